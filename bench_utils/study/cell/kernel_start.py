"""A kernel's own cost, as its first record reports it, and the order that keeps it short (docs/study.md, *A
kernel's own cost is recorded, and cut*): the compile-worker pool is launched first and waited for only before the
compiler's warm-up; then what lives through a model's cells is frozen out of the collector's reach. The first record
carries ``startup_s`` (the process's age when ``task.run`` began), ``ready_s`` (from then to the freeze, less the
model's build: that cell's ``load_s``) and ``freeze_s`` (the collection before the freeze).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
import gc
import time
from typing import Any, Iterator

import psutil

from ...records.blocks import KERNEL_START_PHASES
from ...variants import compile_workers
from ...variants.compiler_warmup import warm_up_compiler
from ...variants.kept_caches import KeptCaches

START_PHASES = KERNEL_START_PHASES[:-1]  # the first record's, beside its load_s


def process_age_s() -> float:
    """Seconds since this kernel process started (its boot and imports, so far)."""
    return max(0.0, time.time() - psutil.Process().create_time())


def ready_the_compiler(backend: str, device: str, warm_only: bool = False) -> None:
    """The compile-worker pool answered, then the process's first compile (``variants.compiler_warmup``; warm from the
    host's caches in a kernel that compiles only warm): their seconds the kernel's, never a cell's compile's."""
    import torch

    compile_workers.ready(backend)
    warm_up_compiler(torch.device(device), backend, fresh=not warm_only)


@contextmanager
def long_lived_frozen() -> Iterator[float]:
    """After one collection (its seconds given), what is alive (imports, model, the compiler's readying) frozen
    (``gc.freeze``, as vLLM does after its warm-up): the collections a cell makes then scan only what the cells made.
    Thawed after, so that what the model leaves can be collected, unless something froze before (docs/study.md)."""
    thaw, started = gc.get_freeze_count() == 0, time.perf_counter()
    gc.collect()
    gc.freeze()
    try:
        yield time.perf_counter() - started
    finally:
        if thaw:
            gc.unfreeze()


@dataclass
class Kernel:
    """What one kernel captures once and reports once."""

    environment: dict[str, Any]
    start_phases: dict[str, float] = field(default_factory=dict)  # in the first record (``START_PHASES``), then none
    kept_caches: KeptCaches | None = None   # cold compiles kept for the cells' next replicates

    def phases(self, cell_phases: dict[str, float], load_s: float) -> dict[str, float]:
        start, self.start_phases = self.start_phases, {}
        return {"startup_s": 0.0, **{name: round(value, 4) for name, value in start.items()},
                "load_s": round(load_s, 4), **cell_phases}
