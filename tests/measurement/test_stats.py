import math

import numpy as np
import pytest

from bench_utils.measurement import stats


@pytest.fixture
def skewed():
    # A right-skewed latency-like sample with a few slow outliers.
    rng = np.random.default_rng(42)
    sample = rng.gamma(shape=9.0, scale=0.2, size=300) + 5.0
    sample[[10, 150, 290]] = [30.0, 40.0, 50.0]
    return sample


def test_summarize_matches_numpy(skewed):
    summary = stats.summarize(skewed)
    assert summary["count"] == 300
    assert summary["total"] == pytest.approx(skewed.sum())
    assert summary["mean"] == pytest.approx(skewed.mean())
    assert summary["median"] == pytest.approx(np.median(skewed))
    assert summary["stdev"] == pytest.approx(skewed.std(ddof=0))
    assert summary["cv"] == pytest.approx(skewed.std() / skewed.mean())
    assert summary["min"] == skewed.min() and summary["max"] == skewed.max()
    for name, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
        assert summary[name] == pytest.approx(np.percentile(skewed, q))


def test_summary_matches_optimum_benchmark_report():
    # The latency block of optimum-benchmark's example report, recomputed.
    values = [1.677669428999991, 1.5840412070000411, 1.542571974999987,
              1.5427501599999687, 1.556280681999965]
    summary = stats.summarize(values)
    assert summary["mean"] == pytest.approx(1.5806626905999905)
    assert summary["p90"] == pytest.approx(1.640218140200011)
    assert summary["p99"] == pytest.approx(1.673924300119993)
    assert summary["stdev"] == pytest.approx(0.05080249325153477)
    assert summary["stdev"] / summary["mean"] * 100 == pytest.approx(3.2139996441777896)


def test_percentiles_on_known_array():
    values = np.arange(1, 101, dtype=float)  # 1..100
    p = stats.percentiles(values)
    assert p["p50"] == pytest.approx(50.5)
    assert p["p90"] == pytest.approx(90.1)
    assert p["p999"] == pytest.approx(99.901)


def test_outlier_count_uses_tukey_fences():
    values = [10.0] * 50 + [11.0] * 50 + [100.0, 200.0]
    # quartiles 10 and 11: fences at 8.5 and 12.5, so exactly the two slow points
    assert stats.outlier_count(values) == 2
    assert stats.outlier_count(np.linspace(0, 1, 101)) == 0


def test_bootstrap_ci_contains_mean_and_is_reproducible(skewed):
    low, high = stats.bootstrap_ci(skewed, "mean")
    assert low < skewed.mean() < high
    assert (low, high) == stats.bootstrap_ci(skewed, "mean")  # fixed seed
    # roughly the normal-theory width: 2 * 1.96 * s / sqrt(n)
    expected = 2 * 1.96 * skewed.std(ddof=1) / math.sqrt(skewed.size)
    assert 0.5 * expected < high - low < 2.0 * expected


def test_bootstrap_ci_of_constant_sample_is_a_point():
    assert stats.bootstrap_ci([2.0] * 20) == (2.0, 2.0)


def test_bootstrap_median_ci(skewed):
    low, high = stats.bootstrap_ci(skewed, "median")
    assert low <= np.median(skewed) <= high


def test_geometric_mean():
    assert stats.geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        stats.geometric_mean([1.0, -1.0])


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [1.0, float("nan")], [1.0, float("inf")]])
def test_bad_samples_are_refused(bad):
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_unknown_statistic_is_refused():
    with pytest.raises(ValueError, match="unknown statistic"):
        stats.bootstrap_ci([1.0, 2.0], "mode")


def test_many_small_outliers_of_a_tight_sample_move_its_mean_by_nothing_and_are_not_noise():
    # ViT at batch 16 on the H200: 13 % of its runs beyond the fences of a 1 % spread
    rng = np.random.default_rng(0)
    tight = np.concatenate([rng.normal(16.5, 0.02, 260), rng.normal(16.8, 0.02, 40)])
    assert stats.outlier_count(tight) / tight.size > 0.05
    assert abs(stats.outlier_shift(tight)) < 0.005
    assert not stats.is_noisy(float(tight.std() / tight.mean()), stats.outlier_shift(tight))


def test_a_few_stalls_that_move_the_mean_are_noise_and_the_spread_alone_judges_without_runs():
    rng = np.random.default_rng(1)
    stalled = np.concatenate([rng.normal(2.3, 0.02, 291), np.full(9, 4.5)])  # 3 % of runs twice as slow
    shift = stats.outlier_shift(stalled)
    assert shift == pytest.approx(stalled.mean() / stalled[:291].mean() - 1, rel=0.02)  # a normal tail run or two too
    assert shift > stats.NOISY_OUTLIER_SHIFT
    assert stats.is_noisy(0.05, shift) and not stats.is_noisy(0.05, 0.001)
    assert stats.is_noisy(0.2, None) and not stats.is_noisy(0.05, None) and not stats.is_noisy(0.05, float("nan"))


def test_eager_means_drift_when_any_two_lie_further_apart_than_the_threshold():
    assert stats.drifted(3.69, 5.06)            # ResNet-50's eager beside default and beside reduce-overhead
    assert not stats.drifted(3.69, 3.80, 3.75)
    assert stats.drifted(3.69, 3.80, 4.50)
    assert not stats.drifted(3.69) and not stats.drifted(3.69, float("nan"), None)


def test_switch_cost_is_the_median_over_blocks_of_the_switch_calls_excess():
    steady = stats.split_blocks([2.0, 2.0, 2.2, 2.2, 2.1, 2.1], [2, 2, 2])
    assert steady == [[2.0, 2.0], [2.2, 2.2], [2.1, 2.1]]
    assert stats.switch_cost([[2.4], [2.7], [2.2]], steady) == pytest.approx(0.4)
    # as a share of each block's own mean: 0.2, 0.227, 0.048 -> 0.2 (0.4 over the blocks' 2.1 would read 0.19)
    assert stats.switch_cost([[2.4], [2.7], [2.2]], steady, share=True) == pytest.approx(0.2)
    assert np.isnan(stats.switch_cost([[], [], []], steady))
    with pytest.raises(ValueError, match="do not make blocks"):
        stats.split_blocks([1.0, 2.0, 3.0], [2, 2])


def test_break_even():
    # moved from variants.modes: the report computes the warm break-even with it too
    assert stats.break_even_calls(1000.0, 10.0, 8.0) == 500
    assert stats.break_even_calls(1001.0, 10.0, 8.0) == 501
    assert stats.break_even_calls(1000.0, 8.0, 10.0) is None  # slower: never pays off
