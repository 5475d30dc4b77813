"""A process's one-off compile costs, paid before any cell's cold compile is timed.

On the H200 the first compiled cell of a kernel compiled slower than the same model's next batch sizes (Segformer
16.7 s at batch 1 against 10.2 and 9.8 s: reports/hf-guide-h200). ``warm_up_compiler`` compiles a tiny model of the
study's layers once, in caches it throws away, so that what a process pays once (Inductor's and Triton's first
imports, builds and loads) lands in the kernel's start-up, never in a cell's compile. A kernel whose every compiled
cell compiles warm from kept caches warms up warm too (``fresh=False``: the host's caches, a hit from its second
kernel on, no pool needed): its first warm compile then pays no more than the next (on a loaded CPU the first in a
process took 13.3 s where the next took 2.6 s).
"""

from __future__ import annotations

from contextlib import nullcontext
import time
from typing import Any, Callable

import torch

from .compile_cost import clear_in_memory_caches, fresh_caches
from . import modes


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.LayerNorm(8)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens = self.conv(images).flatten(2).transpose(1, 2)  # (batch, 64 positions, 8 channels)
        return torch.softmax(self.proj(self.norm(torch.relu(tokens))), dim=-1).sum(dim=1)


def warm_up_compiler(device: torch.device, backend: str | Callable[..., Any] = "inductor", fresh: bool = True) -> float:
    """Compile and call a tiny model on ``device`` with ``backend`` (in fresh caches, or the host's; dynamo reset
    after); the seconds it took."""
    start = time.perf_counter()
    model = _Tiny().to(device).eval()
    images = torch.randn(2, 3, 8, 8, device=device)
    with torch.no_grad(), fresh_caches() if fresh else nullcontext():
        compiled = torch.compile(model, backend=backend)
        for _ in range(2):
            compiled(images)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    modes.reset()
    clear_in_memory_caches()
    return time.perf_counter() - start
