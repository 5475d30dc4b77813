"""A kernel's own cost, as its first record reports it.

A kernel (one task notebook's process under the grid runner) pays, once, for what no cell measures: its start
(papermill, ipykernel, the imports), then the device's preparation: the memory cap, Inductor's compile-worker pool
and the process's first compile (``variants.compile_workers``, ``variants.compiler_warmup``), and the environment's
capture. The H200 leases' run logs showed 11 to 17 s a kernel that no record's phases held (a first cell's wall
against its record's start, load and cell, ``benchmarks/lease_replay.py``), so no replay could price it. Its first record now carries both:
``startup_s``, the process's age when ``task.run`` began, and ``ready_s``, the seconds from then to its first cell
(the model's build is that cell's ``load_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Any

import psutil

from ...measurement.memory_cap import gpu_memory_cap
from ...variants.compiler_warmup import warm_up_compiler
from ...variants.kept_caches import KeptCaches

START_PHASES = ("startup_s", "ready_s")  # the first record's, beside its load_s


def process_age_s() -> float:
    """Seconds since this kernel process started (its boot and imports, so far)."""
    return max(0.0, time.time() - psutil.Process().create_time())


def ready_the_device(config: dict[str, Any], gpu_memory_gib: float | None, backend: str, device: str,
                     compiles: bool) -> None:
    """The memory cap, before anything is on the GPU (into ``config``, as the records say it); where the kernel
    compiles, the process's first compile (``variants.compiler_warmup``), its seconds the kernel's, never a
    cell's compile's."""
    config.update(gpu_memory_cap(gpu_memory_gib, device))
    if compiles:
        import torch

        warm_up_compiler(torch.device(device), backend)


@dataclass
class Kernel:
    """What one kernel captures once and reports once."""

    environment: dict[str, Any]
    start_phases: dict[str, float]   # reported in the first record (``START_PHASES``), then none
    kept_caches: KeptCaches | None = None   # cold compiles kept for the cells' next replicates

    def phases(self, cell_phases: dict[str, float], load_s: float) -> dict[str, float]:
        start, self.start_phases = self.start_phases, {}
        return {"startup_s": 0.0, **{name: round(value, 4) for name, value in start.items()},
                "load_s": round(load_s, 4), **cell_phases}
