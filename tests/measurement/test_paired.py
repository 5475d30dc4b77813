"""The paired speed-up against simulations where the truth is known.

A fake timer plays a machine with block-level effects: a slow drift both sides
share, an independent disturbance per block (a background job, a clock step), an
order effect (the first block of a pair runs 1 % slower) and per-run noise. The
paired design must keep its promise (a 95 % interval that excludes the truth about
5 % of the time); the old design (fixed order, all runs pooled as if independent)
must be shown to break it, or the simulation proves nothing.
"""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bench_utils import compare
from bench_utils.measurement.compare import SWITCH_CALLS, block_sizes, pair_orders
from bench_utils.measurement.paired import paired_speedup, t_interval

BLOCK_SIGMA = 0.02     # independent log-normal disturbance of each block
RUN_SIGMA = 0.03       # per-run noise
ORDER_EFFECT = 0.01    # the first block of a pair is this much slower
DRIFT = 0.05           # slow drift shared by neighbouring blocks


class DriftingMachine:
    """A fake timer: each ``time_calls`` is one block; its times follow the model above."""

    name = "simulated"
    sync = "per-call"

    def __init__(self, seed, true_ms):
        self.rng = np.random.default_rng(seed)
        self.true_ms = true_ms  # callable -> its true mean time
        self.block = 0

    def time_calls(self, fn, runs):
        level = 1 + DRIFT * math.sin(self.block / 7)
        first_of_pair = 1 + ORDER_EFFECT if self.block % 2 == 0 else 1.0
        disturbance = math.exp(self.rng.normal(0, BLOCK_SIGMA))
        noise = np.exp(self.rng.normal(0, RUN_SIGMA, runs))
        self.block += 1
        return list(self.true_ms[fn] * level * first_of_pair * disturbance * noise)


def baseline():
    pass


def candidate():
    pass


def simulate(seed, speedup, runs=60, pairs=30):
    """What ``compare`` does with this timer (checked below), without its per-call setup
    (a garbage collection per comparison would make hundreds of trials slow)."""
    machine = DriftingMachine(seed, {baseline: 10.0, candidate: 10.0 / speedup})
    times = {baseline: [], candidate: []}
    for size, candidate_first in zip(block_sizes(runs, pairs), pair_orders(pairs, seed)):
        for fn in ((candidate, baseline) if candidate_first else (baseline, candidate)):
            # each block's first call after a switch is timed and kept out, as compare does
            times[fn].append(machine.time_calls(fn, SWITCH_CALLS + size)[SWITCH_CALLS:])
    return paired_speedup(times[baseline], times[candidate], seed=seed)


def test_compare_times_the_pairs_the_simulation_assumes():
    machine = DriftingMachine(3, {baseline: 10.0, candidate: 8.0})
    result = compare(baseline, candidate, warmup=0, runs=60, blocks=30, device="cpu",
                     timer=machine, order_seed=3)
    assert result.paired == simulate(3, speedup=1.25)
    assert result.blocks == 30 and result.order_seed == 3
    assert sum(result.candidate_first) == 15  # balanced: half the pairs each way
    assert result.order.count("c") == 15


def old_design_rejects(seed, runs=300, blocks=10):
    """The former method: baseline block then candidate block, runs pooled, Welch's test."""
    machine = DriftingMachine(seed, {baseline: 10.0, candidate: 10.0})
    base, cand = [], []
    for _ in range(blocks):
        base += machine.time_calls(baseline, runs // blocks)
        cand += machine.time_calls(candidate, runs // blocks)
    return scipy_stats.ttest_ind(base, cand, equal_var=False).pvalue < 0.05


def test_a_versus_a_under_drift_is_a_false_positive_about_5_percent_of_the_time():
    trials = 400
    false_positives = sum(simulate(seed, speedup=1.0).excludes_one for seed in range(trials))
    assert 0.01 <= false_positives / trials <= 0.09
    # The old design, on the same machine model, cries wolf most of the time.
    old = sum(old_design_rejects(seed) for seed in range(200))
    assert old / 200 > 0.3


def test_interval_covers_a_known_speedup_about_95_percent_of_the_time():
    trials = 300
    covered = 0
    for seed in range(trials):
        low, high = simulate(1000 + seed, speedup=1.5).mean_ci95
        covered += low <= 1.5 <= high
    assert 0.90 <= covered / trials <= 0.99


def test_a_real_speedup_is_found_with_a_small_pvalue():
    result = simulate(7, speedup=1.2)
    assert result.excludes_one and result.pvalue < 1e-6
    assert result.mean == pytest.approx(1.2, rel=0.03)
    assert result.median == pytest.approx(1.2, rel=0.05) and result.median_excludes_one


def test_the_point_estimate_is_the_geometric_mean_of_pair_ratios():
    result = paired_speedup([[4.0, 4.0], [9.0, 9.0]], [[2.0, 2.0], [1.0, 1.0]])
    assert result.pairs == 2
    assert result.mean == pytest.approx(math.sqrt(2.0 * 9.0))
    assert result.log_ratios == pytest.approx((math.log(2.0), math.log(9.0)))
    assert result.median == pytest.approx(np.median([4, 4, 9, 9]) / np.median([2, 2, 1, 1]))


def test_t_interval_matches_the_textbook_formula():
    values = np.array([0.1, 0.3, 0.2, 0.5])
    low, high = t_interval(values)
    half = scipy_stats.t.ppf(0.975, 3) * values.std(ddof=1) / 2
    assert (low, high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert t_interval(np.array([0.2])) is None


def test_one_pair_has_no_interval_and_claims_nothing():
    result = paired_speedup([[2.0, 2.1]], [[1.0, 1.1]])
    assert result.mean_ci95 is None and result.median_ci95 is None and result.pvalue is None
    assert not result.excludes_one and not result.median_excludes_one


def test_steady_identical_pairs_give_a_point_interval():
    result = paired_speedup([[2.0]] * 5, [[1.0]] * 5)
    assert result.mean_ci95 == pytest.approx((2.0, 2.0)) and result.pvalue == 0.0
    assert result.excludes_one


@pytest.mark.parametrize("base, cand, message", [
    ([[1.0]], [[1.0], [1.0]], "pairs need both"),
    ([[]], [[1.0]], "non-empty"),
    ([[1.0, -1.0]], [[1.0, 1.0]], "finite and positive"),
    ([[1.0, float("nan")]], [[1.0, 1.0]], "finite and positive"),
])
def test_bad_blocks_are_refused(base, cand, message):
    with pytest.raises(ValueError, match=message):
        paired_speedup(base, cand)
