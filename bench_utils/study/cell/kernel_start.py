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

from dataclasses import dataclass, field
import os
from pathlib import Path
import time
from typing import Any

import psutil

from ...measurement import gpu_token
from ...measurement.memory_cap import gpu_memory_cap
from ...variants.compiler_warmup import warm_up_compiler
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


def ready_the_device(config: dict[str, Any], gpu_memory_gib: float | None, backend: str, device: str,
                     compiles: bool) -> None:
    """The memory cap, before anything is on the GPU (into ``config``, as the records say it); where the kernel
    compiles, the process's first compile (``variants.compiler_warmup``), its seconds the kernel's start-up's, never a
    cell's compile's."""
    config.update(gpu_memory_cap(gpu_memory_gib, device))
    if compiles:
        import torch

        warm_up_compiler(torch.device(device), backend)


def ready_ahead(token: Path, config: dict[str, Any], gpu_memory_gib: float | None, backend: str, device: str,
                compiles: bool) -> None:
    """``ready_the_device`` in a kernel started ahead, before its gate: beside the measuring kernel, as a compile
    process, holding the GPU's token (never in a measuring window); what it queued done, its allocator's cache the
    card's again, before it lets go. The compiler warm-up is then off the GPU's path too."""
    token.parent.mkdir(parents=True, exist_ok=True)  # the runner's compile processes' folder, made by now or here
    gpu_token.compile_beside(token, device)
    # the token let go while dynamo compiles the warm-up's tiny model (the CPU's work): the first pipelined H200
    # lease's kernels waited on it
    with gpu_token.window_between_compiles("kernel started ahead: memory cap and compiler warm-up"):
        ready_the_device(config, gpu_memory_gib, backend, device, compiles)


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


def model_request(model: str, settings: Any, dtype: str, task: str) -> tuple[Any, ...]:
    """What a model is built from (``zoo.loading.HostModel.request``): a model built ahead serves only the same."""
    return (model, settings.weights, dtype, task, settings.seed, settings.memory_format)


def built_ahead(models: list[str], dtypes: list[str], task: str, settings: Any, device: str) -> dict[tuple, Any]:
    """Before its gate, a kernel started ahead builds its models on the host (``zoo.loading.built_on_host``: the
    random weights drawn, a checkpoint read), the device untouched: only their move to it is left on the GPU's path.
    A build that fails is left to the cell, which builds it again and records why."""
    from ...variants.precision import parse_dtype
    from ...zoo.loading import built_on_host

    built = {}
    for model in models:
        for dtype in dtypes:
            name = parse_dtype(dtype)[0]
            try:
                built[model_request(model, settings, name, task)] = built_on_host(
                    model, weights=settings.weights, dtype=name, device=device, task=task, seed=settings.seed,
                    memory_format=settings.memory_format)
            except Exception:
                continue
    return built


@dataclass
class Kernel:
    """What one kernel captures once and reports once."""

    environment: dict[str, Any]
    start_phases: dict[str, float]   # reported in the first record (``startup_s``...), then none
    kept_caches: KeptCaches | None = None   # cold compiles kept for the cells' next replicates
    host_models: dict[tuple, Any] = field(default_factory=dict)  # built on the host before the gate (``built_ahead``)

    def phases(self, cell_phases: dict[str, float], load_s: float) -> dict[str, float]:
        start, self.start_phases = self.start_phases, {}
        return {"startup_s": 0.0, **{name: round(value, 4) for name, value in start.items()},
                "load_s": round(load_s, 4), **cell_phases}
