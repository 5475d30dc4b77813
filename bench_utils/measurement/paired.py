"""Speed-up statistics of paired blocks: baseline and candidate timed side by side, pair by pair.

Drift moves both blocks of a pair alike, so the pairs, not the runs, are the independent units (runs taken as
independent make intervals far too narrow: tests/measurement/test_paired.py). The speed-up is the geometric mean of
the pairs' ratios of block means, its interval Student's t on their logs, the p-value the paired t-test's; the median
speed-up's interval is a bootstrap over whole pairs. With fewer than two pairs no interval exists: None, never a
made-up one.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Sequence
import warnings

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
PAIR_RESAMPLES = 4_000
BOOTSTRAP_SEED = 0
METHOD = "paired t-interval on per-pair log ratios of block means"


@dataclass(frozen=True)
class PairedSpeedup:
    pairs: int
    log_ratios: tuple[float, ...]
    mean: float                                  # geometric mean of the pairs' ratios
    mean_ci95: tuple[float, float] | None
    pvalue: float | None                         # paired t-test of "no speed-up"
    median: float
    median_ci95: tuple[float, float] | None

    @property
    def excludes_one(self) -> bool:
        return self.mean_ci95 is not None and not (self.mean_ci95[0] <= 1.0 <= self.mean_ci95[1])

    @property
    def median_excludes_one(self) -> bool:
        return self.median_ci95 is not None and not (self.median_ci95[0] <= 1.0 <= self.median_ci95[1])


def _blocks(blocks: Sequence[Sequence[float]], side: str) -> list[np.ndarray]:
    arrays = [np.asarray(block, dtype=np.float64) for block in blocks]
    if not arrays or any(a.ndim != 1 or a.size == 0 for a in arrays):
        raise ValueError(f"{side} blocks must be non-empty lists of times")
    if any(not np.all(np.isfinite(a)) or np.any(a <= 0) for a in arrays):
        raise ValueError(f"{side} blocks hold a time that is not finite and positive")
    return arrays


def t_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student's t-interval of the mean of ``values``; None for fewer than two values."""
    n = values.size
    if n < 2:
        return None
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def _pvalue(log_ratios: np.ndarray) -> float | None:
    if log_ratios.size < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero spread: undefined, reported as None
        pvalue = float(scipy_stats.ttest_1samp(log_ratios, 0.0).pvalue)
    return pvalue if math.isfinite(pvalue) else None


def _median_interval(base: list[np.ndarray], cand: list[np.ndarray], confidence: float,
                     n_resamples: int, seed: int) -> tuple[float, float] | None:
    pairs = len(base)
    if pairs < 2:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, pairs, size=(n_resamples, pairs))
    if len({a.size for a in base + cand}) == 1:  # equal blocks: one vectorized gather
        b, c = np.stack(base), np.stack(cand)
        ratios = (np.median(b[picks].reshape(n_resamples, -1), axis=1)
                  / np.median(c[picks].reshape(n_resamples, -1), axis=1))
    else:
        ratios = np.array([np.median(np.concatenate([base[i] for i in pick]))
                           / np.median(np.concatenate([cand[i] for i in pick])) for pick in picks])
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def paired_speedup(baseline_blocks: Sequence[Sequence[float]],
                   candidate_blocks: Sequence[Sequence[float]], *, confidence: float = CONFIDENCE,
                   n_resamples: int = PAIR_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedSpeedup:
    """The candidate's speed-up over the baseline from pairs of blocks (block i of each side
    forms pair i), with intervals that treat the pairs, not the runs, as independent."""
    base, cand = _blocks(baseline_blocks, "baseline"), _blocks(candidate_blocks, "candidate")
    if len(base) != len(cand):
        raise ValueError(f"baseline has {len(base)} blocks but candidate {len(cand)}: pairs need both")
    log_ratios = np.log([b.mean() / c.mean() for b, c in zip(base, cand)])
    interval = t_interval(log_ratios, confidence)
    all_base, all_cand = np.concatenate(base), np.concatenate(cand)
    return PairedSpeedup(
        pairs=len(base),
        log_ratios=tuple(float(x) for x in log_ratios),
        mean=float(math.exp(log_ratios.mean())),
        mean_ci95=(math.exp(interval[0]), math.exp(interval[1])) if interval else None,
        pvalue=_pvalue(log_ratios),
        median=float(np.median(all_base) / np.median(all_cand)),
        median_ci95=_median_interval(base, cand, confidence, n_resamples, seed),
    )
