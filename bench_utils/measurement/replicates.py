"""A speed-up from independent replicates, with an interval that holds when the cell is measured again.

One run's paired interval (``paired``) covers the pairs of that run: what a process adds to every one of its pairs
does not cancel, and on an H200 fresh processes spread more than one run's interval says (docs/measurement.md,
*Between runs*). So the speed-up is exp(mean over replicates of each replicate's mean log ratio), every replicate
weighing the same, and its 95 % interval Student's t on those means (r - 1 degrees of freedom), never narrower than
the interval of all the pairs taken together: three replicates that happen to agree do not make the noise within
them vanish. One replicate gives the run's own paired interval, ``covers_runs`` False so that the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

from .paired import CONFIDENCE, t_interval

METHOD = "t-interval over replicates (fresh processes) of their mean per-pair log ratios"
METHOD_ONE_RUN = "paired t-interval within one run: the spread between runs is not in it"


@dataclass(frozen=True)
class ReplicatedSpeedup:
    replicates: int
    replicate_speedups: tuple[float, ...]        # each replicate's geometric mean of its pairs' ratios
    mean: float                                  # geometric mean over the replicates
    mean_ci95: tuple[float, float] | None
    between_sd: float | None                     # sd of the replicates' log speed-ups (None: one replicate)
    within_se: float | None                      # the standard error of the mean log ratio, all pairs pooled
    covers_runs: bool                            # the interval includes the spread between runs
    method: str

    @property
    def excludes_one(self) -> bool:
        return self.mean_ci95 is not None and not (self.mean_ci95[0] <= 1.0 <= self.mean_ci95[1])


def _log_ratios(replicate: Sequence[float], index: int) -> np.ndarray:
    values = np.asarray(replicate, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError(f"replicate {index} must hold its pairs' finite log ratios, got {replicate!r}")
    return values


def pooled_standard_error(replicates: list[np.ndarray]) -> float | None:
    """The standard error of the grand mean from the spread of the pairs within their replicates."""
    pairs = sum(r.size for r in replicates)
    dof = pairs - len(replicates)
    if dof < 1:
        return None
    within = sum(float(((r - r.mean()) ** 2).sum()) for r in replicates) / dof
    return math.sqrt(within / pairs)


def replicated_speedup(log_ratios: Sequence[Sequence[float]], confidence: float = CONFIDENCE) -> ReplicatedSpeedup:
    """The speed-up of replicates given each replicate's per-pair log ratios (``PairedSpeedup.log_ratios``)."""
    if not log_ratios:
        raise ValueError("no replicate: a speed-up needs at least one")
    replicates = [_log_ratios(replicate, i) for i, replicate in enumerate(log_ratios)]
    means = np.array([r.mean() for r in replicates])
    grand = float(means.mean())
    within_se = pooled_standard_error(replicates)
    if len(replicates) == 1:
        interval = t_interval(replicates[0], confidence)
        return ReplicatedSpeedup(1, (math.exp(grand),), math.exp(grand),
                                 None if interval is None else (math.exp(interval[0]), math.exp(interval[1])),
                                 None, within_se, False, METHOD_ONE_RUN)
    interval = t_interval(means, confidence)
    assert interval is not None  # two replicates or more
    low, high = interval
    if within_se is not None:  # the floor: never narrower than all the pairs pooled
        pairs = sum(r.size for r in replicates)
        half = float(scipy_stats.t.ppf(0.5 + confidence / 2, pairs - len(replicates))) * within_se
        low, high = min(low, grand - half), max(high, grand + half)
    return ReplicatedSpeedup(len(replicates), tuple(math.exp(m) for m in means), math.exp(grand),
                             (math.exp(low), math.exp(high)), float(means.std(ddof=1)), within_se, True, METHOD)
