"""A kernel's start, as its records report it; and the wait at the start gate of a kernel started ahead.

Under the grid runner a kernel's first record carries ``startup_s``: the process's age when ``task.run`` began
(papermill, ipykernel, the imports). A kernel the runner started ahead (``runner.kernel_ahead``) boots while the
kernel before it measures: it does the host's work only (the settings, the fp32 math policy, Inductor's
compile-worker pool), then waits at its start gate (``study.start_gate``) until the runner opens it, the device its
own, with the cells to measure now; only then does it touch the device. Its first record then says ``startup_s``:
the seconds from the gate's opening to the kernel being ready (the device's preparation: on the GPU's path);
``started_ahead_s``: the seconds it booted before the gate opened (off the path); ``gate_wait_s``: the seconds it
waited at the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path
import time
from typing import Any

import psutil

from ...variants.kept_caches import KeptCaches
from ..start_gate import read_gate

GATE_POLL_S = 0.02  # a gate opened is seen within this: the measuring GPU waits no longer
START_PHASES = ("startup_s", "started_ahead_s", "gate_wait_s")  # the first record's, beside its load_s


def process_age_s() -> float:
    """Seconds since this kernel process started (its boot and imports, so far)."""
    return max(0.0, time.time() - psutil.Process().create_time())


@dataclass(frozen=True)
class GateOpened:
    """What the start gate said, and when the kernel passed it (epoch seconds)."""

    cells: list[tuple[str, int]]   # the cells to measure now
    arrived: float                 # the kernel's host work done
    opened: float                  # the runner opened it (its own clock where the gate says, else when seen)
    passed: float                  # the kernel saw it open
    started_at: float              # the process's start

    def phases(self, ready: float) -> dict[str, float]:
        """The start's phases, the kernel ready (its device prepared) at ``ready`` (epoch seconds)."""
        return {"startup_s": max(0.0, ready - max(self.opened, self.started_at)),   # on the device's path
                "started_ahead_s": max(0.0, min(self.arrived, self.opened) - self.started_at),
                "gate_wait_s": max(0.0, self.passed - self.arrived)}


def wait_at_gate(path: Path) -> GateOpened:
    """Wait for the start gate at ``path`` to be opened (``study.start_gate``); its cells. The runner's watchdog
    (``lease.start_watchdog``, a thread) still ends this process if the runner dies meanwhile: the wait only sleeps.
    Where the runner moved the kernel to other cores before opening it, torch's threads follow: as many as a kernel
    started there would have (one a core)."""
    arrived, cores = time.time(), os.sched_getaffinity(0)
    while not path.exists():
        time.sleep(GATE_POLL_S)
    passed = time.time()
    cells, opened = read_gate(path)
    if os.sched_getaffinity(0) != cores:
        import torch

        torch.set_num_threads(len(os.sched_getaffinity(0)))
    return GateOpened(cells, arrived, min(opened or passed, passed), passed, psutil.Process().create_time())


@dataclass
class Kernel:
    """What one kernel captures once and reports once."""

    environment: dict[str, Any]
    start_phases: dict[str, float]   # reported in the first record (``startup_s``...), then none
    kept_caches: KeptCaches | None = None   # cold compiles kept for the cells' next replicates

    def phases(self, cell_phases: dict[str, float], load_s: float) -> dict[str, float]:
        start, self.start_phases = self.start_phases, {}
        return {"startup_s": 0.0, **{name: round(value, 4) for name, value in start.items()},
                "load_s": round(load_s, 4), **cell_phases}
