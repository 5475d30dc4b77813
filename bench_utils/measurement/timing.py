"""Timing one callable: warm-up, then many timed runs, then statistics.

Each run is bracketed by CUDA events (``sync="per-call"``: from an idle device; ``"pipelined"``: the host runs ahead)
or, on a CPU, by ``time.perf_counter_ns``. The first call is timed alone by the host clock, the device synchronized
around it: for a compiled model it is mostly host-side compilation. Why: docs/measurement.md, *How times are taken*.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
import gc
import math
import time
from typing import Any, Callable, Iterator

import torch

from ..vocabulary import Sync, names
from . import stats
from .devices import resolve_device, synchronize

TIMER_CUDA_EVENT = "cuda_event"
TIMER_PERF_COUNTER = "perf_counter_ns"
SYNC_PER_CALL = Sync.PER_CALL.value     # one request's latency, from an idle device (the default)
SYNC_PIPELINED = Sync.PIPELINED.value   # the host runs ahead: throughput-like figures
SYNC_MODES = names(Sync)


def check_sync(sync: Any) -> str:
    if sync not in SYNC_MODES:
        raise ValueError(f"sync must be one of {', '.join(map(repr, SYNC_MODES))}, got {sync!r}")
    return sync


@dataclass(frozen=True)
class Measurement:
    """The timed runs of one callable, in milliseconds, and their statistics."""

    times_ms: list[float]
    first_call_ms: float
    device: str = "cpu"
    timer: str = TIMER_PERF_COUNTER
    warmup: int = 0
    sync: str = SYNC_PER_CALL
    _summary: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        times = [float(t) for t in self.times_ms]
        object.__setattr__(self, "times_ms", times)
        object.__setattr__(self, "_summary", stats.summarize(times))
        if not math.isfinite(self.first_call_ms) or self.first_call_ms < 0:
            raise ValueError(f"first_call_ms must be a finite time, got {self.first_call_ms!r}")

    runs = property(lambda self: self._summary["count"])
    mean_ms = property(lambda self: self._summary["mean"])
    median_ms = property(lambda self: self._summary["median"])
    stdev_ms = property(lambda self: self._summary["stdev"])
    cv = property(lambda self: self._summary["cv"])
    min_ms = property(lambda self: self._summary["min"])
    max_ms = property(lambda self: self._summary["max"])
    p50_ms = property(lambda self: self._summary["p50"])
    p90_ms = property(lambda self: self._summary["p90"])
    p95_ms = property(lambda self: self._summary["p95"])
    p99_ms = property(lambda self: self._summary["p99"])
    p999_ms = property(lambda self: self._summary["p999"])
    outliers = property(lambda self: self._summary["outliers"])

    @cached_property
    def ci95_mean_ms(self) -> tuple[float, float]:
        """Bootstrap 95 % confidence interval of the mean."""
        return stats.bootstrap_ci(self.times_ms, "mean")

    def throughput(self, batch_size: int) -> float:
        """Samples per second at the mean latency."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        return batch_size * 1000.0 / self.mean_ms


# --- timers -----------------------------------------------------------------

class HostTimer:
    """Times each call with ``time.perf_counter_ns`` (CPU work)."""

    name = TIMER_PERF_COUNTER

    def __init__(self, device: torch.device, sync: str = SYNC_PER_CALL) -> None:
        self.device = device
        self.sync = check_sync(sync)  # a host call has finished when it returns: either way

    def time_calls(self, fn: Callable[[], Any], runs: int) -> list[float]:
        clock = time.perf_counter_ns
        elapsed_ns = [0] * runs
        for i in range(runs):
            start = clock()
            fn()
            elapsed_ns[i] = clock() - start
        return [ns / 1e6 for ns in elapsed_ns]


class CudaBackend:
    """The three CUDA calls the event timer needs; replaceable in tests."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def event(self):
        return torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def device_context(self):
        return torch.cuda.device(self.device)


class CudaEventTimer:
    """Times each call between two CUDA events; waits for the device after each call
    (``per-call``, outside the interval) or once after the loop (``pipelined``)."""

    name = TIMER_CUDA_EVENT

    def __init__(self, device: torch.device, backend: Any | None = None,
                 sync: str = SYNC_PER_CALL) -> None:
        self.device = device
        self.backend = backend or CudaBackend(device)
        self.sync = check_sync(sync)

    def time_calls(self, fn: Callable[[], Any], runs: int) -> list[float]:
        backend = self.backend
        with backend.device_context():
            # torch.cuda.Event creates its CUDA event lazily, on its first record: each is
            # recorded once here, so that no event is created inside a timed interval.
            starts = [backend.event() for _ in range(runs)]
            ends = [backend.event() for _ in range(runs)]
            for event in starts + ends:
                event.record()
            backend.synchronize()  # start from an idle device
            per_call = self.sync == SYNC_PER_CALL
            for start, end in zip(starts, ends):
                start.record()
                fn()
                end.record()
                if per_call:  # after the end event: the wait is outside the interval
                    backend.synchronize()
            if not per_call:
                backend.synchronize()  # the single wait: all events are complete after it
            return [start.elapsed_time(end) for start, end in zip(starts, ends)]


def make_timer(device: torch.device, sync: str = SYNC_PER_CALL) -> HostTimer | CudaEventTimer:
    if device.type == "cuda":
        return CudaEventTimer(device, sync=sync)
    return HostTimer(device, sync=sync)


def time_first_call(fn: Callable[[], Any], device: torch.device) -> float:
    """Wall time of one call in ms, with the device idle before and after."""
    synchronize(device)
    start = time.perf_counter_ns()
    fn()
    synchronize(device)
    return (time.perf_counter_ns() - start) / 1e6


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector out of timed loops, as ``timeit`` does."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# --- measure ----------------------------------------------------------------

def check_arguments(fn: Any, warmup: Any, runs: Any, name: str = "fn") -> None:
    """Raise ValueError with a clear message for arguments ``measure`` cannot use."""
    if not callable(fn):
        raise ValueError(f"{name} must be callable (a function taking no arguments), "
                         f"got {type(fn).__name__}")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")


def measure(fn: Callable[[], Any], *, warmup: int = 10, runs: int = 300,
            device: str | torch.device | None = None, timer: Any | None = None,
            sync: str = SYNC_PER_CALL) -> Measurement:
    """Time ``fn()`` on ``device`` and return every run's latency with its statistics.

    ``fn`` is called ``max(warmup, 1) + runs`` times: the first timed alone, the rest of the warm-up untimed, then
    ``runs`` timed (docs/measurement.md, *Call order*). ``timer`` replaces the device's timer (tests use it).
    """
    check_arguments(fn, warmup, runs)
    check_sync(sync)
    resolved = resolve_device(device)
    timer = timer or make_timer(resolved, sync)
    first_call_ms = time_first_call(fn, resolved)
    for _ in range(warmup - 1):
        fn()
    with gc_paused():
        times_ms = timer.time_calls(fn, runs)
    return Measurement(times_ms=times_ms, first_call_ms=first_call_ms, device=str(resolved),
                       timer=timer.name, warmup=warmup, sync=getattr(timer, "sync", sync))


__all__ = ["Measurement", "measure", "make_timer", "HostTimer", "CudaEventTimer",
           "time_first_call", "check_arguments", "check_sync", "SYNC_MODES", "SYNC_PER_CALL",
           "SYNC_PIPELINED"]
