"""Speed-up of one callable over another, measured interleaved.

Like PyTorch's dynamo benchmark harness, the two are timed in alternating blocks
(A, B, A, B, ...) so that clock, thermal and background-load drift hit both alike;
a sequential "all of A, then all of B" measurement folds such drift into the
speed-up. The speed-up is baseline / candidate for means (the guide's statistic)
and medians, each with a bootstrap 95 % interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from . import stats
from .devices import resolve_device
from .timing import Measurement, check_arguments, gc_paused, make_timer, time_first_call


@dataclass(frozen=True)
class Comparison:
    """Two interleaved Measurements and the candidate's speed-up over the baseline."""

    baseline: Measurement
    candidate: Measurement
    blocks: int
    speedup_mean: float
    speedup_mean_ci95: tuple[float, float]
    speedup_median: float
    speedup_median_ci95: tuple[float, float]
    pvalue: float | None

    @property
    def excludes_one(self) -> bool:
        """True when the 95 % interval of the mean speed-up does not contain 1.0."""
        low, high = self.speedup_mean_ci95
        return not (low <= 1.0 <= high)

    @property
    def median_excludes_one(self) -> bool:
        low, high = self.speedup_median_ci95
        return not (low <= 1.0 <= high)

    def to_dict(self) -> dict[str, Any]:
        return {
            "blocks": self.blocks,
            "speedup_mean": self.speedup_mean,
            "speedup_mean_ci95": list(self.speedup_mean_ci95),
            "speedup_median": self.speedup_median,
            "speedup_median_ci95": list(self.speedup_median_ci95),
            "excludes_one": self.excludes_one,
            "median_excludes_one": self.median_excludes_one,
            "welch_pvalue": self.pvalue,
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
        }


def speedup_of(baseline: Measurement, candidate: Measurement, blocks: int = 1) -> Comparison:
    """The Comparison of two existing Measurements (no new timing)."""
    return Comparison(
        baseline=baseline,
        candidate=candidate,
        blocks=blocks,
        speedup_mean=stats.ratio(baseline.times_ms, candidate.times_ms, "mean"),
        speedup_mean_ci95=stats.ratio_ci(baseline.times_ms, candidate.times_ms, "mean"),
        speedup_median=stats.ratio(baseline.times_ms, candidate.times_ms, "median"),
        speedup_median_ci95=stats.ratio_ci(baseline.times_ms, candidate.times_ms, "median"),
        pvalue=stats.welch_pvalue(baseline.times_ms, candidate.times_ms),
    )


def block_sizes(runs: int, blocks: int) -> list[int]:
    """Split ``runs`` into ``blocks`` near-equal block sizes (the first ones larger)."""
    if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks <= runs:
        raise ValueError(f"blocks must be an integer from 1 to runs ({runs}), got {blocks!r}")
    return [len(chunk) for chunk in np.array_split(np.arange(runs), blocks)]


def compare(baseline_fn: Callable[[], Any], candidate_fn: Callable[[], Any], *,
            warmup: int = 10, runs: int = 300, blocks: int = 10,
            device: str | torch.device | None = None, timer: Any | None = None) -> Comparison:
    """Measure both callables interleaved in ``blocks`` blocks of runs each.

    Each side gets its first call timed apart, ``warmup`` untimed calls in all,
    then ``runs`` timed calls split into ``blocks`` blocks: baseline block 1,
    candidate block 1, baseline block 2, and so on.
    """
    check_arguments(baseline_fn, warmup, runs, name="baseline_fn")
    check_arguments(candidate_fn, warmup, runs, name="candidate_fn")
    sizes = block_sizes(runs, blocks)
    resolved = resolve_device(device)
    timer = timer or make_timer(resolved)

    first_ms = {}
    for side, fn in (("baseline", baseline_fn), ("candidate", candidate_fn)):
        first_ms[side] = time_first_call(fn, resolved)
        for _ in range(warmup - 1):
            fn()

    times: dict[str, list[float]] = {"baseline": [], "candidate": []}
    with gc_paused():
        for size in sizes:
            times["baseline"] += timer.time_calls(baseline_fn, size)
            times["candidate"] += timer.time_calls(candidate_fn, size)

    def measurement(side: str) -> Measurement:
        return Measurement(times_ms=times[side], first_call_ms=first_ms[side],
                           device=str(resolved), timer=timer.name, warmup=warmup)

    return speedup_of(measurement("baseline"), measurement("candidate"), blocks=len(sizes))
