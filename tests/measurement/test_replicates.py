"""Replicated speed-ups on simulated cells whose true speed-up is known.

The simulation takes its sizes from the H200 (reports/anchors-h200/lease-2026-11-27, ResNet-50 at batch 1):
a process adds 0.029 to the log speed-up of all its pairs (sd between fresh processes), a pair of 10-call
blocks has a log-ratio noise of 0.06 (a within-run standard error of 0.011 over 30 pairs), drift inside a run
is left mostly to the pairing, and half the processes change regime for a random stretch of blocks, which
moves the log ratio of those blocks by 0.16 (eager 1.7x slower, compiled 1.45x: the compiled side followed
eager's shifts at a slope of about 0.7 there).
"""

import math

import numpy as np
import pytest

from bench_utils.measurement.paired import t_interval
from bench_utils.measurement.replicates import METHOD_ONE_RUN, replicated_speedup

TRUE_LOG = math.log(1.7)
BETWEEN, WITHIN, DRIFT = 0.029, 0.06, 0.02
REGIME_CHANCE, REGIME_STEP = 0.5, 0.16
SIMULATIONS = 1500


def process(rng, pairs, *, between=BETWEEN, regime=REGIME_CHANCE):
    """One fresh process's per-pair log ratios."""
    ratios = TRUE_LOG + rng.normal(0, between) + rng.normal(0, WITHIN, pairs)
    ratios += rng.normal(0, DRIFT) * (np.arange(pairs) / pairs - 0.5)  # what the pairing leaves of a drift
    if rng.random() < regime:  # from a random moment of the run to its end: half of it, on average
        ratios[(np.arange(pairs) + 0.5) / pairs >= rng.random()] += REGIME_STEP
    return ratios


def truth(*, regime=REGIME_CHANCE, **_):
    """The expected log speed-up over processes, the regimes' share (half of their runs) counted in."""
    return TRUE_LOG + regime * 0.5 * REGIME_STEP


def within_run(ratios):
    low, high = t_interval(ratios)
    return math.exp(low), math.exp(high)


def covers(interval, log_truth):
    return interval[0] <= math.exp(log_truth) <= interval[1]


def overlap(a, b):
    return a[0] <= b[1] and b[0] <= a[1]


def simulate(seed, **kind):
    """Coverage of the truth and overlap of two independent runs: 300 runs a side in one process (30 pairs),
    against 3 replicates of 100 (10 pairs each)."""
    rng = np.random.default_rng(seed)
    old_cover = new_cover = old_overlap = new_overlap = 0
    for _ in range(SIMULATIONS):
        old = [within_run(process(rng, 30, **kind)) for _ in range(2)]
        new = [replicated_speedup([process(rng, 10, **kind) for _ in range(3)]).mean_ci95 for _ in range(2)]
        old_cover += covers(old[0], truth(**kind))
        new_cover += covers(new[0], truth(**kind))
        old_overlap += overlap(*old)
        new_overlap += overlap(*new)
    return (old_cover / SIMULATIONS, new_cover / SIMULATIONS, old_overlap / SIMULATIONS,
            new_overlap / SIMULATIONS)


def test_with_process_effects_and_regimes_replicates_cover_the_truth_and_one_run_does_not():
    old_cover, new_cover, old_overlap, new_overlap = simulate(0)
    assert 0.93 <= new_cover <= 0.99           # about 95 %: the floor makes it a little more, never less
    assert old_cover < 0.75                     # the within-run interval misses the spread between runs
    assert new_overlap >= 0.97 and old_overlap < 0.85   # two independent runs agree, or do not


def test_with_no_effect_between_runs_both_intervals_hold():
    old_cover, new_cover, _, _ = simulate(1, between=0.0, regime=0.0)
    assert 0.93 <= old_cover <= 0.97 and 0.93 <= new_cover <= 0.99


def test_the_speedup_weighs_every_replicate_alike_and_the_interval_is_t_over_replicates():
    replicates = [[0.5, 0.5, 0.5, 0.5], [0.6, 0.6], [0.4, 0.4, 0.4]]  # log ratios: noiseless within
    result = replicated_speedup(replicates)
    assert result.replicates == 3 and result.covers_runs
    assert result.mean == pytest.approx(math.exp(0.5))  # not weighted by pairs (that would be 0.489)
    low, high = t_interval(np.array([0.5, 0.6, 0.4]))
    assert result.mean_ci95 == pytest.approx((math.exp(low), math.exp(high)))
    assert result.between_sd == pytest.approx(0.1) and result.within_se == pytest.approx(0.0)


def test_replicates_that_agree_by_chance_keep_the_noise_within_them():
    rng = np.random.default_rng(5)
    noisy = [0.5 + rng.normal(0, 0.1, 10) for _ in range(3)]
    centred = [r - r.mean() + 0.5 for r in noisy]  # three replicates with identical means
    result = replicated_speedup(centred)
    pooled = within_run(np.concatenate(centred))
    assert result.between_sd == pytest.approx(0.0, abs=1e-12)
    assert result.mean_ci95[0] < pooled[0] * 1.001 and result.mean_ci95[1] > pooled[1] * 0.999


def test_one_replicate_gives_the_runs_own_interval_and_says_so():
    result = replicated_speedup([[0.1, 0.2, 0.3]])
    assert not result.covers_runs and result.method == METHOD_ONE_RUN
    assert result.mean_ci95 == pytest.approx(within_run(np.array([0.1, 0.2, 0.3])))
    with pytest.raises(ValueError, match="at least one"):
        replicated_speedup([])
    with pytest.raises(ValueError, match="replicate 1"):
        replicated_speedup([[0.1], []])
