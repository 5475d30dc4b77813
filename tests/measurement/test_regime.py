"""Regime shifts in block means, on simulated series whose truth is known."""

import numpy as np
import pytest

from bench_utils.measurement.regime import regime_shift, shift_text, two_levels, von_neumann_ratio

BLOCKS = 30
NOISE = 0.05   # the log spread of a steady cell's block means (BEiT at batch 1 on the H200: 0.03-0.05)


def steady(rng, blocks=BLOCKS, level=8.0):
    return level * np.exp(rng.normal(0.0, NOISE, blocks))


def test_a_steady_series_is_flagged_no_more_often_than_alpha():
    rng = np.random.default_rng(0)
    flagged = sum(regime_shift(steady(rng), seed=i) is not None for i in range(400))
    assert flagged / 400 <= 0.02  # alpha is 0.01; the size rule removes most of those too


def test_a_step_of_one_and_a_half_is_found_where_it_is():
    rng = np.random.default_rng(1)
    found = []
    for i in range(100):
        at = int(rng.integers(5, 25))
        series = steady(rng) * np.r_[np.ones(at), np.full(BLOCKS - at, 1.5)]
        shift = regime_shift(series, seed=i)
        found.append(shift is not None and shift.first_change == at and 1.35 < shift.ratio < 1.65)
    assert sum(found) >= 97


def test_several_regimes_as_the_h200_showed_them_are_one_shift_with_its_slow_blocks():
    # BEiT at batch 1, eager, packer-stopped: blocks 6-11 and 14-28 at 15 ms, the rest at 8.7
    levels = [8.7] * 5 + [15.0] * 6 + [8.7] * 2 + [15.0] * 15 + [10.9, 11.9]
    shift = regime_shift(levels)
    assert shift is not None and shift.first_change == 5
    # 11.9 is above the two levels' midpoint (11.4, in logs): it is counted slow
    slow = tuple(range(5, 11)) + tuple(range(13, 28)) + (29,)
    assert shift.slow_blocks == slow
    logs = np.log(levels)
    fast = [i for i in range(30) if i not in slow]
    assert shift.ratio == pytest.approx(np.exp(logs[list(slow)].mean() - logs[fast].mean()), rel=1e-9)
    assert shift_text(shift, 30) == (f"two levels x{shift.ratio:.2f} apart, 22 of 30 blocks slow, "
                                     "the first change at block 6")


def test_a_drift_is_unsteady_too():
    rng = np.random.default_rng(2)
    drifting = steady(rng) * np.linspace(1.0, 1.3, BLOCKS)
    assert regime_shift(drifting) is not None


def test_one_slow_block_is_an_outlier_not_a_regime():
    rng = np.random.default_rng(3)
    for where in (0, 14, BLOCKS - 1):
        series = steady(rng)
        series[where] *= 2.0
        assert regime_shift(series) is None


def test_a_persistent_step_too_small_to_matter_is_not_flagged():
    series = 8.0 * np.r_[np.ones(15), np.full(15, 1.04)]
    assert regime_shift(series) is None  # persistent (noiseless), but 4 %


def test_the_statistics_it_rests_on():
    assert von_neumann_ratio(np.array([1.0, 2.0, 1.0, 2.0])) == pytest.approx(3 / 1.0)  # alternating: above 2
    assert list(two_levels(np.log([1.0, 1.1, 2.0, 2.1, 1.05]))) == [False, False, True, True, False]
    with pytest.raises(ValueError, match="finite positive"):
        regime_shift([1.0, 0.0] * 5)
    assert regime_shift([1.0, 2.0, 1.0]) is None  # too few blocks for an order to mean anything


def test_a_records_calls_are_read_in_their_blocks_and_calls_that_fill_no_blocks_say_nothing():
    from bench_utils.measurement.regime import block_regime

    shifted = block_regime([1.0] * 30 + [1.6] * 30, [3] * 20)  # the level changes at the 11th of 20 blocks
    assert shifted is not None and shifted.slow_blocks == tuple(range(10, 20)) and 1.59 < shifted.ratio < 1.61
    assert block_regime([1.0, 1.01, 0.99] * 10, [3] * 10) is None
    assert block_regime([1.0] * 29, [3] * 10) is None and block_regime(None, [3]) is None


def replicate(rng, call_cv, step=None, calls=100, blocks=10):
    """One replicate's calls of one side, as a GPU replicate times them: 100 calls in 10 blocks, each block a little
    off (a clock: 1 %), each call ``call_cv`` off; ``step``: from a random call between the 21st and the 81st to the
    end, every call that much slower."""
    runs = [calls // blocks] * blocks
    values = 8.0 * np.exp(np.repeat(rng.normal(0, 0.01, blocks), runs) + rng.normal(0, call_cv, calls))
    if step:
        values[int(rng.integers(20, 81)):] *= step
    return list(values), runs


@pytest.mark.parametrize("call_cv", [0.02, 0.05, 0.15])  # the H200 records' calls: 1-15 % within a block
def test_a_step_of_1_3_in_one_of_three_replicates_is_found_nine_times_in_ten(call_cv):
    from bench_utils.measurement import stats
    from bench_utils.measurement.regime import block_regime

    rng = np.random.default_rng(7)
    found = on_block_means = flagged = 0
    for _ in range(200):
        cells = [replicate(rng, call_cv, 1.3 if index == 1 else None) for index in range(3)]
        found += any(block_regime(*cell) is not None for cell in cells)
        on_block_means += any(regime_shift([float(np.mean(block)) for block in stats.split_blocks(*cell)])
                              is not None for cell in cells)
        flagged += any(block_regime(*replicate(rng, call_cv)) is not None for _ in range(3))
    assert found / 200 >= 0.9              # points of 5 calls: 20 a replicate
    assert found >= on_block_means         # 10 block means a replicate: 69 % at 15 % a call
    assert flagged / 200 <= 0.04           # a steady cell, any of its three replicates


def test_a_shift_read_on_points_names_the_blocks_that_are_mostly_slow_and_the_block_it_began_in():
    from bench_utils.measurement.regime import block_regime

    values = [8.0] * 45 + [12.0] * 55  # slow from the 46th call: inside the 5th block (0-based 4), then all
    shifted = block_regime(values, [10] * 10)
    assert shifted.first_change == 4 and shifted.slow_blocks == tuple(range(5, 10)) and 1.49 < shifted.ratio < 1.51
    assert block_regime([8.0] * 85 + [12.0] * 15, [10] * 10) is None  # 15 slow calls at the end: a burst
