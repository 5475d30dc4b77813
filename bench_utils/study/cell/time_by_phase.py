"""Where a cell's time goes: seconds per kind of work, carried by its record as ``phases`` (its keys:
docs/records.md; ``benchmarks/study_cost.py`` subtracts them from the runner's wall time per cell).
"""

from __future__ import annotations

from contextlib import contextmanager
import time

import psutil
from typing import Callable, Iterator

PARTS = ("compile", "warmup", "timed", "parity", "memory", "flops", "energy", "profile")
_LISTENERS: list[Callable[[str], None]] = []  # told as each part begins (``progress_bar``), never in a timed window


def now_doing(part: str) -> None:
    """``part`` (one of ``PARTS``, or "load" and "ready": the kernel's model build and compiler warm-up) begins."""
    for listener in list(_LISTENERS):
        listener(part)


@contextmanager
def told_to(listener: Callable[[str], None]) -> Iterator[None]:
    """``listener`` is told each part as it begins, within the block."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


class Phases:
    """Seconds spent per part of one cell's work."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.started = time.perf_counter()
        self.cell_s: float | None = None   # the cell's own seconds where its clock is not its (a row's mode's)
        self._steal_at_start = _steal_s()

    def stop(self, cell_s: float) -> None:
        """The cell's whole time is ``cell_s`` (a row's modes share one span of time: each says its own part)."""
        self.cell_s = cell_s

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        now_doing(part)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] += time.perf_counter() - start

    def add_loop(self, seconds: float, timed_ms: float) -> None:
        """A timing loop of ``seconds``: its timed calls' own time (``timed_ms``, their summed
        latencies) is ``timed``; the rest (warm-up and first calls) is ``warmup``."""
        timed = min(seconds, max(0.0, timed_ms / 1000.0))
        self.seconds["timed"] += timed
        self.seconds["warmup"] += seconds - timed

    def to_dict(self) -> dict[str, float]:
        """The parts, and ``cell_s``: the whole cell so far."""
        parts = {f"{part}_s": round(seconds, 4) for part, seconds in self.seconds.items()}
        cell_s = time.perf_counter() - self.started if self.cell_s is None else self.cell_s
        steal, start = _steal_s(), self._steal_at_start
        if self.cell_s is None and steal is not None and start is not None:  # a row's modes share one span: none
            parts["host_steal_s"] = round(steal - start, 4)
        return {"cell_s": round(cell_s, 4), **parts}


def _steal_s() -> float | None:
    """CPU seconds stolen from this host's cores by its hypervisor so far, all cores summed; None where unknown."""
    steal = getattr(psutil.cpu_times(), "steal", None)
    return None if steal is None else float(steal)
