"""A regime shift in a series of block means: the host (or the device) changing pace inside a cell.

A mean over such a cell describes neither level (what was seen on the H200: docs/measurement.md, *Regime shifts*).
``regime_shift`` says whether one side's series of block means changed level, and by how much:

- whether: the blocks' order matters. Von Neumann's ratio (the mean square of successive differences over
  the variance, of the log block means) is about 2 for blocks in random order and small where neighbouring
  blocks resemble each other, as they do on either side of a step, in each of several regimes, or along a
  drift. Its permutation test (the same blocks shuffled, a fixed seed) gives the p-value. One slow block
  alone is an outlier, not a regime: it leaves the ratio near 2;
- by how much: the log block means split into a fast and a slow level where the two groups are most apart
  (the optimal two-class split of sorted values); the ratio of their means, which blocks are slow, and the
  first block whose level differs from the first block's;
- it counts where p is below ``alpha`` and the levels differ by at least ``min_ratio``: a persistent change
  too small to matter for a latency is not flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import stats

MIN_RATIO = 1.10
ALPHA = 0.01
PERMUTATIONS = 999
MIN_BLOCKS = 8
MIN_LEVEL_BLOCKS = 2   # a level of one block at an end of the run is an outlier there, not a regime
SEED = 0
# Calls are read as points of this many consecutive calls, not as block means: twice the points find a 1.3x step
# far more often (docs/measurement.md). A level lasts MIN_LEVEL_CALLS calls at least; a shorter burst is outliers.
CALLS_PER_POINT = 5
MIN_LEVEL_CALLS = 20


@dataclass(frozen=True)
class RegimeShift:
    ratio: float                   # the slow level's mean over the fast level's
    slow_blocks: tuple[int, ...]   # the blocks (0-based, in the order timed) at the slow level
    first_change: int              # the first block whose level differs from the first block's
    pvalue: float                  # the permutation test's, of von Neumann's ratio


def von_neumann_ratio(series: np.ndarray) -> np.ndarray:
    """Per row: the mean square successive difference over the variance (about 2 for random order)."""
    centred = series - series.mean(axis=-1, keepdims=True)
    return (np.diff(series, axis=-1) ** 2).sum(axis=-1) / np.maximum((centred ** 2).sum(axis=-1), 1e-300)


def two_levels(logs: np.ndarray) -> np.ndarray:
    """Which values are in the slow (upper) class of the best two-class split of ``logs`` (least squares)."""
    order = np.argsort(logs)
    ranked = logs[order]
    n = ranked.size
    cumsum = np.cumsum(ranked)
    k = np.arange(1, n)                      # the lower class: the k smallest
    low_mean, high_mean = cumsum[:-1] / k, (cumsum[-1] - cumsum[:-1]) / (n - k)
    between = k * (n - k) * (high_mean - low_mean) ** 2  # largest between-class spread = least within
    split = int(between.argmax()) + 1
    slow = np.zeros(n, dtype=bool)
    slow[order[split:]] = True
    return slow


def regime_shift(block_means: Sequence[float], *, min_ratio: float = MIN_RATIO, alpha: float = ALPHA,
                 permutations: int = PERMUTATIONS, seed: int = SEED,
                 min_level: int = MIN_LEVEL_BLOCKS) -> RegimeShift | None:
    """The change of level in ``block_means`` (or any time-ordered means) where it is real (see the module's
    docstring), each level ``min_level`` means at least; else None."""
    means = np.asarray(block_means, dtype=np.float64)
    if means.ndim != 1 or not np.all(np.isfinite(means)) or np.any(means <= 0):
        raise ValueError("block means must be finite positive times")
    if means.size < MIN_BLOCKS:
        return None  # too few blocks for an order to mean anything
    logs = np.log(means)
    slow = two_levels(logs)
    ratio = float(np.exp(logs[slow].mean() - logs[~slow].mean()))
    if ratio < min_ratio or min(slow.sum(), (~slow).sum()) < min_level:
        return None
    observed = float(von_neumann_ratio(logs))
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.repeat(logs[None, :], permutations, axis=0), axis=1)
    pvalue = float((1 + np.count_nonzero(von_neumann_ratio(shuffled) <= observed)) / (1 + permutations))
    if pvalue >= alpha:
        return None
    first_change = int(np.argmax(slow != slow[0])) if np.any(slow != slow[0]) else 0
    return RegimeShift(ratio, tuple(int(i) for i in np.flatnonzero(slow)), first_change, pvalue)


def block_regime(values: Sequence[float] | None, block_runs: Sequence[int] | None) -> RegimeShift | None:
    """The regime shift of a side's calls as timed in blocks of ``block_runs`` (a record's), from the means of
    their points (``CALLS_PER_POINT`` consecutive calls of one block), its slow blocks those mostly slow and its
    first change the block of the first point that changed; None where steady, or where the calls do not fill
    the blocks (a record that kept no blocks)."""
    if not values or not block_runs or sum(block_runs) != len(values):
        return None
    means, owners = [], []
    for index, block in enumerate(stats.split_blocks(list(values), list(block_runs))):
        for chunk in np.array_split(np.asarray(block, dtype=np.float64), max(1, round(len(block) / CALLS_PER_POINT))):
            means.append(float(chunk.mean()))
            owners.append(index)
    shift = regime_shift(means, min_level=-(-MIN_LEVEL_CALLS // CALLS_PER_POINT))
    if shift is None:
        return None
    slow = set(shift.slow_blocks)
    share = {block: np.mean([point in slow for point, owner in enumerate(owners) if owner == block])
             for block in set(owners)}
    return RegimeShift(shift.ratio, tuple(sorted(block for block, part in share.items() if part > 0.5)),
                       owners[shift.first_change], shift.pvalue)


def shift_text(shift: RegimeShift, blocks: int) -> str:
    """``two levels x1.72 apart, 20 of 30 blocks slow, the first change at block 6``: for logs (1-based)."""
    return (f"two levels x{shift.ratio:.2f} apart, {len(shift.slow_blocks)} of {blocks} blocks slow, "
            f"the first change at block {shift.first_change + 1}")


__all__ = ["RegimeShift", "regime_shift", "block_regime", "von_neumann_ratio", "two_levels", "shift_text"]
