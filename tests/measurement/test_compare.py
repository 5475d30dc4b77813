import time

import pytest

from bench_utils import compare
from bench_utils.measurement.compare import block_sizes, speedup_of
from bench_utils.measurement.timing import Measurement


def busy_wait(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_twice_the_work_gives_a_speedup_near_two():
    result = compare(lambda: busy_wait(0.004), lambda: busy_wait(0.002),
                     warmup=2, runs=60, blocks=6, device="cpu")
    assert result.baseline.runs == 60 and result.candidate.runs == 60
    # Medians resist a stray stall of this shared machine; the interval holds ~2 and not 1.
    low, high = result.speedup_median_ci95
    assert 1.7 < result.speedup_median < 2.3
    assert low < 2.1 and high > 1.9 and result.median_excludes_one
    # The mean (the guide's statistic): its interval is consistent and clear of 1.0.
    low, high = result.speedup_mean_ci95
    assert low <= result.speedup_mean <= high
    assert 1.3 < result.speedup_mean < 3.0 and result.excludes_one
    assert result.pvalue is not None and result.pvalue < 1e-6


def test_same_work_gives_a_speedup_near_one():
    result = compare(lambda: busy_wait(0.001), lambda: busy_wait(0.001),
                     warmup=2, runs=60, blocks=6, device="cpu")
    assert 0.8 < result.speedup_median < 1.25


def test_runs_are_interleaved_in_blocks():
    order = []
    compare(lambda: order.append("A"), lambda: order.append("B"),
            warmup=1, runs=6, blocks=3, device="cpu")
    # first call and warm-up of each side, then blocks of 2: A A B B A A B B A A B B
    assert order == ["A", "B"] + ["A", "A", "B", "B"] * 3


def test_first_calls_are_kept_apart():
    calls = {"A": 0}

    def slow_first():
        calls["A"] += 1
        if calls["A"] == 1:
            busy_wait(0.05)

    class Timer:  # "times" each call as its call number, so we see which calls were timed
        name = "counting"

        def time_calls(self, fn, runs):
            out = []
            for _ in range(runs):
                fn()
                out.append(float(calls["A"]))
            return out

    result = compare(slow_first, lambda: None, warmup=2, runs=4, blocks=2, device="cpu",
                     timer=Timer())
    assert result.baseline.first_call_ms >= 50.0
    assert result.baseline.times_ms == [3.0, 4.0, 5.0, 6.0]  # calls 1-2: first call, warm-up


def test_block_sizes():
    assert block_sizes(300, 10) == [30] * 10
    assert block_sizes(7, 3) == [3, 2, 2]
    assert sum(block_sizes(301, 7)) == 301
    for bad in (0, 11, 2.5, True):
        with pytest.raises(ValueError, match="blocks"):
            block_sizes(10, bad)


def test_bad_arguments():
    with pytest.raises(ValueError, match="baseline_fn"):
        compare(None, lambda: None, device="cpu")
    with pytest.raises(ValueError, match="candidate_fn"):
        compare(lambda: None, "x", device="cpu")
    with pytest.raises(ValueError, match="blocks"):
        compare(lambda: None, lambda: None, runs=5, blocks=6, device="cpu")


def test_speedup_of_existing_measurements_and_to_dict():
    base = Measurement(times_ms=[10.0, 11.0, 9.0, 10.0], first_call_ms=1.0)
    cand = Measurement(times_ms=[5.0, 5.5, 4.5, 5.0], first_call_ms=100.0)
    result = speedup_of(base, cand)
    assert result.speedup_mean == pytest.approx(2.0)
    data = result.to_dict()
    assert data["speedup_mean"] == pytest.approx(2.0)
    assert data["baseline"]["first_call_ms"] == 1.0 and data["candidate"]["first_call_ms"] == 100.0
    assert len(data["speedup_mean_ci95"]) == 2
