"""Figures a cell takes after its timed runs: memory and energy.

Taken outside every timed region; if one fails (an OOM, say), that figure is missing with a note
saying why, and the latency measured before it stands.
"""

from __future__ import annotations

import gc
import math
import time
from typing import Any, Callable

import torch

from ...measurement.cpu_activation import FIELDS as CPU_ACTIVATION_FIELDS, cpu_activation_peak
from ...measurement.memory import MemoryProbe
from ...measurement.power import EnergyProbe, per_inference
from ...measurement.timing import make_timer
from ...zoo.loading import LoadedModel
from .time_by_phase import Phases

MEMORY_CALLS = 3        # calls inside the memory probe, after warm-up
# NVML's counter steps every ~100 ms and samples a quarter of each step (measurement/power.py):
# 50 steps average that out to ~1 %; 0.5 s (5 steps) was off by tens of percent. ~5.4 s a side with polling.
ENERGY_WINDOW_S = 5.0
ENERGY_CHUNK_MS = 100.0     # calls between clock checks
ENERGY_MAX_CALLS = 5_000    # calls in one chunk, at most
# Calls whose period divides the counter's step (50 ms, 100 ms, ...) would be sampled at one phase of the
# call only (off by 30 % in tests): an idle gap before each chunk, one call in all over the window (at most
# this), sweeps the sampling across the call. The gaps' idle energy is counted: +1 % at most in tests.
ENERGY_DRIFT_MAX_MS = 200.0

_sleep = time.sleep  # module-level so tests can drive the clock


def memory_of(fn: Callable[[], Any], device: torch.device, loaded: LoadedModel,
              inputs: dict[str, torch.Tensor], phases: Phases) -> dict[str, Any]:
    """The memory probe's report over ``MEMORY_CALLS`` calls of ``fn`` and, on a CPU, the activation
    memory of one more call under torch's profiler (``measurement/cpu_activation.py``; None elsewhere)."""
    with phases.timing("memory"):
        with MemoryProbe(device, model=loaded.model, inputs=inputs) as probe:
            for _ in range(MEMORY_CALLS):
                fn()
        # after the probe's region: the profiler's own memory stays out of the resident figures
        activation = cpu_activation_peak(fn) if device.type == "cpu" else dict.fromkeys(CPU_ACTIVATION_FIELDS)
    return {**probe.report, **activation}


def energy_per_inference(device: torch.device, sides: dict[str, tuple[Callable[[], Any], float]], sync: str,
                         clocks: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Joules per inference (one call: a whole batch) of each side (CUDA only), and the clocks,
    temperatures and throttle reasons at the start and end of the timed runs.

    Each side runs calls for at least ``ENERGY_WINDOW_S``, integrated from step to step of NVML's
    counter (``EnergyProbe(align=True)``): the mean power over that window times the wall time of
    one call."""
    if device.type != "cuda":
        return None
    energy: dict[str, Any] = {"timed_runs": clocks}
    timer = make_timer(device, sync)
    for side, (fn, mean_ms) in sides.items():
        energy[side] = _energy_of(device, timer, fn, mean_ms)
    return energy


def _energy_of(device: torch.device, timer: Any, fn: Callable[[], Any], mean_ms: float) -> dict[str, Any]:
    """One side's energy block: the probe's report, the window and calls, joules per inference."""
    chunk = max(1, min(ENERGY_MAX_CALLS, math.ceil(ENERGY_CHUNK_MS / max(mean_ms, 1e-3))))
    drift_s = min(mean_ms, ENERGY_DRIFT_MAX_MS) * chunk * mean_ms / 1e6 / ENERGY_WINDOW_S  # ms * ms -> s
    calls = 0
    with EnergyProbe(device, align=True) as probe:
        # the window ends on the counter's last step before the exit: one step more keeps it >= ENERGY_WINDOW_S
        end_s = ENERGY_WINDOW_S + (probe.counter_step_s or 0.0)
        while probe.counting and probe.elapsed_s() < end_s:  # no counter: no calls, no GPU time
            _sleep(drift_s)  # before the calls: the region ends busy, the counter's last step sampled busy
            timer.time_calls(fn, chunk)
            calls += chunk
    return {**probe.report, "window_min_s": ENERGY_WINDOW_S, "calls": calls,
            "joules_per_inference": per_inference(probe.report, calls) if calls else None}


def outside_timing(what: str, notes: list[str], device: torch.device, fn: Callable[[], Any]) -> Any:
    """A figure taken after the timed runs: if it fails (an OOM, say), that figure is missing,
    with a note; the latency measured before it stands."""
    try:
        return fn()
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        notes.append(f"{what} not measured: {type(exc).__name__}: {first_line}"[:300])
        release(device)
        return None


def release(device: torch.device) -> None:
    """Give back what a failed figure left: Python garbage, and the CUDA cache."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
