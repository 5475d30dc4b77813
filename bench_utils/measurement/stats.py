"""Statistics of a latency sample, from numpy and scipy.

Conventions (docs/measurement.md, *Statistics conventions*): numpy's linear percentiles and the population stdev
(ddof=0), as optimum-benchmark, so our latency blocks match theirs; bootstrap intervals with a fixed seed, so a
sample always gives the same interval; outliers beyond Tukey's fences (1.5 IQR outside the quartiles).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence
import warnings

import numpy as np
from scipy import stats as scipy_stats

# The percentiles every summary carries (name -> percent).
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}

CONFIDENCE = 0.95
N_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
TUKEY_K = 1.5


def as_sample(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-D float64 array of finite values; raises ValueError otherwise."""
    sample = np.asarray(values, dtype=np.float64)
    if sample.ndim != 1 or sample.size == 0:
        raise ValueError(f"expected a non-empty 1-D sample, got shape {sample.shape}")
    if not np.all(np.isfinite(sample)):
        raise ValueError("sample contains NaN or infinite values")
    return sample


def percentiles(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """The p50..p99.9 percentiles of ``values`` (linear interpolation)."""
    sample = as_sample(values)
    points = np.percentile(sample, list(PERCENTILES.values()))
    return {name: float(point) for name, point in zip(PERCENTILES, points)}


def outlier_count(values: Sequence[float] | np.ndarray, k: float = TUKEY_K) -> int:
    """How many values lie beyond ``k`` IQR outside the quartiles (Tukey's fences)."""
    sample = as_sample(values)
    q1, q3 = np.percentile(sample, [25.0, 75.0])
    spread = k * (q3 - q1)
    return int(np.count_nonzero((sample < q1 - spread) | (sample > q3 + spread)))


def outlier_shift(values: Sequence[float] | np.ndarray, k: float = TUKEY_K) -> float:
    """How far the values beyond Tukey's fences move the mean: mean(all) / mean(within the fences) - 1. Many
    outliers of a tight distribution move it by nothing; a few stalls of a noisy host, by percents."""
    sample = as_sample(values)
    q1, q3 = np.percentile(sample, [25.0, 75.0])
    spread = k * (q3 - q1)
    inside = sample[(sample >= q1 - spread) & (sample <= q3 + spread)]
    return float(sample.mean() / inside.mean() - 1.0)


def switch_cost(switch_blocks: Sequence[Sequence[float]], steady_blocks: Sequence[Sequence[float]], *,
                share: bool = False) -> float:
    """What switching sides costs a call: the median over blocks of (the mean of a block's switch calls
    minus the mean of its steady calls), in the blocks' unit, or with ``share`` as a fraction of that block's
    steady mean (each block's own: the median of the ratios, not one median over another); NaN where no block
    has both."""
    gaps = [(float(np.mean(switch)) - float(np.mean(steady))) / (float(np.mean(steady)) if share else 1.0)
            for switch, steady in zip(switch_blocks, steady_blocks) if len(switch) and len(steady)]
    return float(np.median(gaps)) if gaps else math.nan


def break_even_calls(compile_ms: float, eager_ms: float, compiled_ms: float) -> int | None:
    """Calls after which compiling has paid for itself; None if it never does."""
    saving = eager_ms - compiled_ms
    if saving <= 0:
        return None
    return max(0, int(-(-max(compile_ms, 0.0) // saving)))  # ceiling division


def split_blocks(values: Sequence[float], sizes: Sequence[int]) -> list[list[float]]:
    """``values`` cut into consecutive blocks of ``sizes``; ValueError where they do not add up."""
    if sum(sizes) != len(values):
        raise ValueError(f"{len(values)} values do not make blocks of {list(sizes)}")
    bounds = np.cumsum([0, *sizes])
    return [list(values[start:end]) for start, end in zip(bounds[:-1], bounds[1:])]


def summarize(values: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """Count, total, mean, median, stdev, cv, min, max, percentiles, IQR, outliers."""
    sample = as_sample(values)
    mean = float(sample.mean())
    stdev = float(sample.std(ddof=0))
    q1, q3 = np.percentile(sample, [25.0, 75.0])
    return {
        "count": int(sample.size),
        "total": float(sample.sum()),
        "mean": mean,
        "median": float(np.median(sample)),
        "stdev": stdev,
        "cv": stdev / mean if mean > 0 else math.nan,
        "min": float(sample.min()),
        "max": float(sample.max()),
        **percentiles(sample),
        "iqr": float(q3 - q1),
        "outliers": outlier_count(sample),
    }


_STATISTICS: dict[str, Callable[..., np.ndarray]] = {"mean": np.mean, "median": np.median}


def _statistic(name: str) -> Callable[..., np.ndarray]:
    try:
        return _STATISTICS[name]
    except KeyError:
        raise ValueError(f"unknown statistic {name!r}: use one of {sorted(_STATISTICS)}") from None


def _bootstrap(data: tuple[np.ndarray, ...], statistic, method: str, confidence: float,
               n_resamples: int, seed: int) -> tuple[float, float]:
    with warnings.catch_warnings():
        # BCa warns on (near-)degenerate samples; we fall back below instead.
        warnings.simplefilter("ignore")
        result = scipy_stats.bootstrap(
            data, statistic, n_resamples=n_resamples, batch=2_000, vectorized=True,
            paired=False, confidence_level=confidence, method=method,
            rng=np.random.default_rng(seed),
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _interval(data: tuple[np.ndarray, ...], statistic, point: float, method: str,
              confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    if all(np.ptp(sample) == 0 for sample in data):
        return point, point  # no spread: every resample gives the same value
    low, high = _bootstrap(data, statistic, method, confidence, n_resamples, seed)
    if not (math.isfinite(low) and math.isfinite(high)) and method == "BCa":
        low, high = _bootstrap(data, statistic, "percentile", confidence, n_resamples, seed)
    return low, high


def bootstrap_ci(values: Sequence[float] | np.ndarray, statistic: str = "mean", *,
                 confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Bootstrap confidence interval of the mean (BCa) or median (percentile)."""
    sample = as_sample(values)
    func = _statistic(statistic)
    method = "BCa" if statistic == "mean" else "percentile"
    point = float(func(sample))
    return _interval((sample,), lambda x, axis: func(x, axis=axis), point, method,
                     confidence, n_resamples, seed)


def geometric_mean(values: Sequence[float] | np.ndarray) -> float:
    """Geometric mean of positive ratios (the harness's summary of speed-ups)."""
    sample = as_sample(values)
    if np.any(sample <= 0):
        raise ValueError("geometric mean needs positive values")
    return float(scipy_stats.gmean(sample))


# --- quality flags ---------------------------------------------------------------------
# Thresholds stated once, beside the statistics they judge; the report shows the flags.

NOISY_CV = 0.10                 # coefficient of variation above which a sample is noisy
NOISY_OUTLIER_SHIFT = 0.02      # or the runs beyond Tukey's fences moving its mean by more than this
DRIFT = 0.10                    # two eager means of one cell (alone, or beside each mode): relative gap flagged


def is_noisy(cv: float, shift: float | None) -> bool:
    """A latency sample whose mean cannot be taken at face value: widely spread, or moved by its outliers
    (``outlier_shift``; None where the runs are not kept: the spread alone judges). A share of outliers
    alone is no criterion: a tight distribution has many that change nothing."""
    return bool(cv > NOISY_CV or (shift is not None and not math.isnan(shift) and abs(shift) > NOISY_OUTLIER_SHIFT))


def drifted(*means: float) -> bool:
    """Eager means that should agree (timed alone, and interleaved with each compiled mode) but lie
    further apart than ``DRIFT``: what eager is timed beside, or the machine, changed it."""
    found = [mean for mean in means if mean is not None and not math.isnan(mean) and mean > 0]
    return len(found) > 1 and bool(max(found) / min(found) - 1 > DRIFT)
