"""One compilation for every batch size: the batch dimension marked dynamic.

The guide compiles once per batch size (``static``: each cell's shapes are fixed, and a new batch
size recompiles). A server that takes batches of any size wants one compilation for all of them
(``dynamic``): the inputs' batch dimension is marked dynamic (``torch._dynamo.mark_dynamic``), the
model is compiled at the smallest batch size and the same compiled model serves the larger ones.
Whether it really does is measured, not assumed: the graphs compiled on the first call at each
later batch size are counted (dynamo specializes sizes 0 and 1, and an operator may guard on a
range, so some batch sizes recompile). ``torch._dynamo.decorators.mark_unbacked`` would avoid the
specialization but fails on convolutions in torch 2.14 (a stride assertion in the fake kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..parameters import one_of

STATIC = "static"
DYNAMIC = "dynamic"
SHAPES = (STATIC, DYNAMIC)


def check_shapes(name: str) -> str:
    return one_of("shapes", name, SHAPES)


def mark_batch_dynamic(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Mark dimension 0 (the batch) of every input dynamic, in place; return the inputs."""
    import torch._dynamo

    for value in inputs.values():
        if value.dim() >= 1:
            torch._dynamo.mark_dynamic(value, 0)
    return inputs


@dataclass
class SharedCompilation:
    """A model compiled once with a dynamic batch, kept to serve the next batch sizes."""

    mode: str
    model: Any                 # the torch.compile'd module
    compiled_at_batch_size: int
    graphs: dict[str, Any] = field(default_factory=dict)  # its graphs, breaks and their reasons

    def compile_stats(self, batch_size: int, first_calls: dict[str, Any]) -> dict[str, Any]:
        """A record's graph figures at ``batch_size`` (``first_calls``: what its first call compiled):
        the model's graphs and breaks as the one compilation has them, and how many graphs that
        first call still compiled."""
        if batch_size == self.compiled_at_batch_size:
            return {**first_calls, "batch_shapes": self.describe(batch_size, 0)}
        return {**first_calls, **self.graphs, "batch_shapes": self.describe(batch_size, first_calls["graphs"])}

    def describe(self, batch_size: int, graphs_here: int) -> dict[str, Any]:
        """What a record says of it at ``batch_size`` (``graphs_here``: compiled on its first call)."""
        return {"shapes": DYNAMIC, "compiled_at_batch_size": self.compiled_at_batch_size,
                "recompiles_at_this_batch_size": graphs_here if batch_size != self.compiled_at_batch_size else 0}
