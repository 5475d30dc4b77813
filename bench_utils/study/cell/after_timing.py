"""Figures a cell takes after its timed runs: memory, and any figure attempted with a note where it fails."""

from __future__ import annotations

import gc
from typing import Any, Callable

import torch

from ...measurement.cpu_activation import FIELDS as CPU_ACTIVATION_FIELDS, cpu_activation_peak
from ...measurement.memory import MemoryProbe
from ...variants.cell_plan import MEMORY_CALLS
from ...zoo.loading import LoadedModel
from .time_by_phase import Phases


def memory_of(fn: Callable[[], Any], device: torch.device, loaded: LoadedModel,
              inputs: dict[str, torch.Tensor], phases: Phases, calls: int = MEMORY_CALLS) -> dict[str, Any]:
    """The memory probe's report over ``calls`` calls of ``fn`` (the cell's plan's) and, on a CPU, the activation
    memory of one more call under torch's profiler (``measurement/cpu_activation.py``; None elsewhere)."""
    with phases.timing("memory"):
        with MemoryProbe(device, model=loaded.model, inputs=inputs) as probe:
            for _ in range(calls):
                fn()
        # after the probe's region: the profiler's own memory stays out of the resident figures
        activation = cpu_activation_peak(fn) if device.type == "cpu" else dict.fromkeys(CPU_ACTIVATION_FIELDS)
    return {**probe.report, **activation}


def attempt(what: str, notes: list[str], device: torch.device, fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """A figure taken after the timed runs, and None. If it fails (an OOM, say), that figure is missing: None, and
    the note appended to ``notes`` saying why (returned too, for a block that records the reason); the latency
    measured before it stands."""
    try:
        return fn(), None
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        note = f"{what} not measured: {type(exc).__name__}: {first_line}"[:300]
        notes.append(note)
        release(device)
        return None, note


def release(device: torch.device) -> None:
    """Give back what a failed figure left: Python garbage, and the CUDA cache."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
