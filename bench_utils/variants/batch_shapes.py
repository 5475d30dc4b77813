"""One compilation for every batch size: the batch dimension marked dynamic (docs/variants.md).

Dynamo specializes a size of 0 or 1, so the dynamic cells compile under ``backed_size_oblivious``
(``one_graph_for_all_batch_sizes``): the batch symbol stays a symbol at size 1. Inductor may still guard on a batch
of 1, so the graphs compiled on the first call at each later batch size are counted, not assumed to be none.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from ..vocabulary import Shapes

STATIC, DYNAMIC = Shapes.STATIC, Shapes.DYNAMIC


# how a dynamic cell compiles, as its record says
METHOD = "mark_dynamic(batch) + backed_size_oblivious"
METHOD_WITHOUT_OBLIVIOUS = "mark_dynamic(batch)"  # a torch without backed_size_oblivious


def _oblivious_config() -> Any:
    """torch's config module that holds ``backed_size_oblivious`` (None where this torch lacks it)."""
    from torch.fx.experimental import _config

    return _config if hasattr(_config, "backed_size_oblivious") else None


def compile_method() -> str:
    return METHOD if _oblivious_config() is not None else METHOD_WITHOUT_OBLIVIOUS


@contextmanager
def one_graph_for_all_batch_sizes(dynamic: bool = True) -> Iterator[None]:
    """Compile (and recompile) inside the block without specializing a batch of 1 (no-op unless
    ``dynamic``): size-1 dimensions marked dynamic stay symbolic, so a graph compiled at batch 1
    can serve batch 4."""
    config = _oblivious_config() if dynamic else None
    with config.patch(backed_size_oblivious=True) if config is not None else nullcontext():
        yield


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
                "recompiles_at_this_batch_size": graphs_here if batch_size != self.compiled_at_batch_size else 0,
                "method": compile_method()}

