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

from ..measurement.memory import MemoryProbe
from ..measurement.power import EnergyProbe, per_inference
from ..measurement.timing import make_timer
from ..zoo.loading import LoadedModel
from .phases import Phases

MEMORY_CALLS = 3        # calls inside the memory probe, after warm-up
ENERGY_MIN_S = 0.5      # NVML's energy counter refreshes every few tens of ms: time enough calls
ENERGY_MAX_CALLS = 5_000


def memory_of(fn: Callable[[], Any], device: torch.device, loaded: LoadedModel,
              inputs: dict[str, torch.Tensor], phases: Phases) -> dict[str, Any]:
    """The memory probe's report over ``MEMORY_CALLS`` calls of ``fn``."""
    with phases.timing("memory"), MemoryProbe(device, model=loaded.model, inputs=inputs) as probe:
        for _ in range(MEMORY_CALLS):
            fn()
    return probe.report


def energy_per_inference(device: torch.device, sides: dict[str, tuple[Callable[[], Any], float]], sync: str,
                         clocks: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Joules per inference (one call: a whole batch) of each side, over at least
    ``ENERGY_MIN_S`` of calls for NVML's counter (CUDA only), and the clocks, temperatures
    and throttle reasons at the start and end of the timed runs."""
    if device.type != "cuda":
        return None
    energy: dict[str, Any] = {"timed_runs": clocks}
    timer = make_timer(device, sync)
    for side, (fn, mean_ms) in sides.items():
        chunk = max(1, min(ENERGY_MAX_CALLS, math.ceil(100.0 / max(mean_ms, 1e-3))))  # ~0.1 s
        calls = 0
        with EnergyProbe(device) as probe:
            start = time.perf_counter()
            while time.perf_counter() - start < ENERGY_MIN_S and calls < ENERGY_MAX_CALLS:
                timer.time_calls(fn, chunk)
                calls += chunk
        energy[side] = {**probe.report, "calls": calls,
                        "joules_per_inference": per_inference(probe.report, calls)}
    return energy


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
