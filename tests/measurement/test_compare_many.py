"""One baseline timed in the same rounds as several candidates (``compare_many``)."""

import itertools

import pytest

from bench_utils.measurement.compare import compare_many, round_orders


class StepClock:
    """A fake timer: each side's call costs its own fixed time, so the ratios are known exactly."""

    name = "fake"

    def __init__(self, cost_ms):
        self.cost_ms = cost_ms
        self.log = []

    def time_calls(self, fn, calls):
        side = fn()
        self.log.append((side, calls))
        return [self.cost_ms[side]] * calls


def side(name):
    return lambda: name


def test_every_round_times_one_block_of_each_side_in_its_recorded_order():
    clock = StepClock({"eager": 6.0, "default": 3.0, "reduce-overhead": 2.0})
    row = compare_many(side("eager"), {"default": side("default"), "reduce-overhead": side("reduce-overhead")},
                       baseline_name="eager", warmup=1, runs=12, blocks=6, device="cpu", timer=clock, order_seed=3)
    assert row.sides == ("eager", "default", "reduce-overhead")
    expected = [(row.sides[i], 3) for order in row.round_order for i in order]  # a switch call, then 2 runs
    assert clock.log == expected
    assert row.order_text() == ["".join(map(str, order)) for order in row.round_order]
    # every candidate is paired with the one eager series, round by round
    default, graphs = row.comparisons["default"], row.comparisons["reduce-overhead"]
    assert default.baseline is graphs.baseline is row.baseline and row.baseline.runs == 12
    assert default.speedup_mean == pytest.approx(2.0) and graphs.speedup_mean == pytest.approx(3.0)
    assert default.blocks == graphs.blocks == 6
    assert default.candidate_first == tuple(order.index(1) < order.index(0) for order in row.round_order)
    assert graphs.candidate_first == tuple(order.index(2) < order.index(0) for order in row.round_order)
    assert len(graphs.switch_ms["candidate"]) == len(graphs.switch_ms["baseline"]) == 6


def test_between_blocks_is_kept_per_side_for_each_candidate():
    clock = StepClock({"eager": 2.0, "a": 1.0, "b": 1.0})
    reads = itertools.count()
    row = compare_many(side("eager"), {"a": side("a"), "b": side("b")}, baseline_name="eager", warmup=1, runs=4,
                       blocks=2, device="cpu", timer=clock, between_blocks=lambda: next(reads))
    seen = sorted(row.comparisons["a"].block_probes["baseline"] + row.comparisons["a"].block_probes["candidate"]
                  + row.comparisons["b"].block_probes["candidate"])
    assert seen == list(range(6))  # one read after each of the 3 x 2 blocks, each kept once per side
    assert row.comparisons["a"].block_probes["baseline"] == row.comparisons["b"].block_probes["baseline"]


@pytest.mark.parametrize("sides", [2, 3, 4])
def test_round_orders_time_every_two_sides_in_either_order_equally_often(sides):
    for seed in range(10):
        orders = round_orders(30, sides, seed)
        assert len(orders) == 30 and all(sorted(order) == list(range(sides)) for order in orders)
        for first, second in itertools.combinations(range(sides), 2):
            assert sum(order.index(first) < order.index(second) for order in orders) == 15
    assert round_orders(30, 3, 1) == round_orders(30, 3, 1)
    assert len({round_orders(30, 3, seed) for seed in range(20)}) == 20
    odd = round_orders(7, 3, 0)
    assert abs(sum(order.index(0) < order.index(1) for order in odd) - 3.5) == 0.5  # the odd round out: at random


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="at least one candidate"):
        compare_many(side("eager"), {}, device="cpu")
    with pytest.raises(ValueError, match="distinct names"):
        compare_many(side("eager"), {"eager": side("x")}, baseline_name="eager", device="cpu")
    with pytest.raises(ValueError, match="b must be callable"):
        compare_many(side("eager"), {"a": side("a"), "b": 3}, device="cpu")
