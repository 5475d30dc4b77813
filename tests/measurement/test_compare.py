import time

import pytest

from bench_utils import compare
from switching_machine import SwitchingMachine
from bench_utils.measurement.compare import DEFAULT_PAIRS, block_sizes, pair_orders

# real clocks: timed on an idle machine, after the parallel tests (make test's serial pass)
pytestmark = pytest.mark.serial


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
    assert low < 2.3 and high > 1.7 and result.median_excludes_one
    # The mean (the guide's statistic): its interval is consistent and clear of 1.0.
    low, high = result.speedup_mean_ci95
    assert low <= result.speedup_mean <= high
    assert 1.3 < result.speedup_mean < 3.0 and result.excludes_one
    # the paired test agrees with the interval (a stray stall of a shared machine widens both)
    assert result.pvalue is not None and result.pvalue < 0.05


def test_same_work_gives_a_speedup_near_one():
    result = compare(lambda: busy_wait(0.001), lambda: busy_wait(0.001),
                     warmup=2, runs=60, blocks=6, device="cpu")
    assert 0.8 < result.speedup_median < 1.25


def test_runs_are_timed_in_pairs_of_blocks_in_the_recorded_random_order():
    order = []
    result = compare(lambda: order.append("A"), lambda: order.append("B"),
                     warmup=1, runs=12, blocks=6, device="cpu", order_seed=5)
    # first call and warm-up of each side, then 6 pairs of blocks of a switch call and 2 runs, each pair in its order
    expected = ["A", "B"]
    for candidate_first in result.candidate_first:
        expected += ["B"] * 3 + ["A"] * 3 if candidate_first else ["A"] * 3 + ["B"] * 3
    assert order == expected
    assert result.candidate_first == pair_orders(6, 5) and sum(result.candidate_first) == 3
    assert result.order_seed == 5 and result.order == "".join("c" if first else "b" for first in result.candidate_first)


def test_pair_orders_are_balanced_seeded_and_vary_with_the_seed():
    assert pair_orders(30, 1) == pair_orders(30, 1)
    assert len({pair_orders(30, seed) for seed in range(20)}) == 20
    assert all(sum(pair_orders(30, seed)) == 15 for seed in range(20))
    assert {sum(pair_orders(7, seed)) for seed in range(40)} == {3, 4}  # the odd pair: a coin


def test_default_is_30_pairs_or_one_run_per_pair_when_fewer_runs():
    assert DEFAULT_PAIRS == 30
    assert compare(lambda: None, lambda: None, warmup=0, runs=60, device="cpu").blocks == 30
    assert compare(lambda: None, lambda: None, warmup=0, runs=8, device="cpu").blocks == 8


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
    # calls 1-2: first call, warm-up; then each block's switch call (3, 6) kept apart from its runs
    assert result.baseline.times_ms == [4.0, 5.0, 7.0, 8.0]
    assert result.switch_ms["baseline"] == ((3.0,), (6.0,))


def test_the_first_call_after_a_switch_stays_out_of_the_statistics_and_its_cost_is_recorded():
    machine = SwitchingMachine({"eager": 4.0, "compiled": 2.0}, {"eager": 0.5, "compiled": 0.6})
    result = compare(machine.side("eager"), machine.side("compiled"), warmup=1, runs=300, device="cpu",
                     timer=machine)
    # the statistics are the steady calls': no outlier, the true ratio
    assert set(result.baseline.times_ms) == {4.0} and set(result.candidate.times_ms) == {2.0}
    assert result.baseline.outliers == 0 and result.candidate.outliers == 0
    assert result.speedup_mean == pytest.approx(2.0)
    # every block's switch call is kept, with its cost (a pair's first block may follow its own side)
    for side, steady, penalty in (("baseline", 4.0, 0.5), ("candidate", 2.0, 0.6)):
        switches = [block[0] for block in result.switch_ms[side]]
        assert len(switches) == 30 and set(switches) <= {steady, steady + penalty}
        assert switches.count(steady + penalty) >= 15
    assert result.switch_calls == 1 and len(result.switch_ms["baseline"]) == 30
    assert result.block_runs() == [10] * 30


def test_without_switch_calls_the_switch_cost_is_in_the_figures_as_outliers():
    # the design the H200 ran: each block's first call is one of its runs
    machine = SwitchingMachine({"eager": 4.0, "compiled": 2.0}, {"eager": 0.5, "compiled": 0.6})
    result = compare(machine.side("eager"), machine.side("compiled"), warmup=1, runs=300, device="cpu",
                     timer=machine, switch_calls=0)
    assert result.candidate.outliers >= 15 and result.candidate.mean_ms > 2.0
    assert result.switch_ms == {"baseline": ((),) * 30, "candidate": ((),) * 30}


def test_between_blocks_is_called_after_every_block_and_kept_per_side():
    seen = []
    result = compare(lambda: None, lambda: None, warmup=0, runs=8, blocks=4, device="cpu",
                     between_blocks=lambda: seen.append(1) or {"sm_clock_mhz": len(seen)})
    assert len(seen) == 8
    probes = result.block_probes
    assert len(probes["baseline"]) == 4 and len(probes["candidate"]) == 4
    assert sorted(p["sm_clock_mhz"] for side in probes.values() for p in side) == list(range(1, 9))
    with pytest.raises(ValueError, match="switch_calls"):
        compare(lambda: None, lambda: None, runs=4, device="cpu", switch_calls=-1)


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


def test_the_speedup_block_carries_both_sides_and_the_paired_figures():
    from bench_utils.study.cell.cell_record import speedup_block

    result = compare(lambda: busy_wait(0.0004), lambda: busy_wait(0.0002), warmup=1, runs=8,
                     blocks=4, device="cpu", order_seed=2)
    block = speedup_block(result)
    assert block["pairs"] == 4 and len(block["order"]) == 4 and "paired" in block["method"]
    assert result.baseline.runs == 8 and result.candidate.runs == 8 and len(block["eager_values"]) == 8
    assert len(block["mean_ci95"]) == 2 and block["paired_pvalue"] == result.pvalue
    assert result.baseline.sync == "per-call"


def test_one_pair_gives_no_interval():
    result = compare(lambda: None, lambda: None, warmup=0, runs=3, blocks=1, device="cpu")
    assert result.speedup_mean_ci95 is None and not result.excludes_one
    assert result.speedup_mean_ci95 is None
