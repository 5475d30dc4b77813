"""A cell's replicates as one row: pooled latencies, the speed-up and its interval over the replicates."""

import math

import numpy as np
import pytest

from bench_utils import make_record
from bench_utils.measurement.paired import t_interval
from bench_utils.measurement.timing import Measurement
from bench_utils.report.frame import frame
from bench_utils.report.replicate_rows import pair_log_ratios

BLOCKS, RUNS = 4, 5


def replicate_record(replicate, eager_blocks_ms, compiled_blocks_ms, *, status="ok"):
    """A compiled cell's record of one replicate: its blocks' calls at the given means (each block 5 calls)."""
    def calls(blocks):
        return [ms + offset for ms in blocks for offset in (-0.2, -0.1, 0.0, 0.1, 0.2)]

    eager, compiled = calls(eager_blocks_ms), calls(compiled_blocks_ms)
    ratios = [math.log(e / c) for e, c in zip(eager_blocks_ms, compiled_blocks_ms)]
    low, high = t_interval(np.array(ratios))
    cell = dict(study="s", task="image-classification", model="resnet", batch_size=1, compile_mode="default",
                dtype="float32", device="cuda", replicate=replicate)
    return make_record(cell, environment={"torch_version": "2.11.0", "gpus": [{"index": 0, "name": "NVIDIA H200"}]},
                       measurement=Measurement(compiled, 900.0), compile={"cold_ms": 9000.0 if replicate == "r1" else 5000.0},
                       config={"replicates": 3},
                       extra={"speedup": {"mean": math.exp(np.mean(ratios)), "mean_ci95": [math.exp(low), math.exp(high)],
                                          "eager_mean_ms": float(np.mean(eager)), "block_runs": [RUNS] * BLOCKS,
                                          "eager_values": [ms / 1e3 for ms in eager], "pairs": BLOCKS}})


def test_the_pairs_log_ratios_come_from_the_blocks_as_run():
    ratios = pair_log_ratios([2.0, 2.0, 1.0, 1.0], [4.0, 4.0, 3.0, 3.0], [2, 2])
    assert ratios == pytest.approx([math.log(2.0), math.log(3.0)])
    assert pair_log_ratios([2.0], None, [1]) is None and pair_log_ratios([2.0, 2.0], [1.0], [2]) is None


def test_replicates_are_one_row_with_pooled_latencies_and_an_interval_over_the_replicates():
    # three processes at three host speeds: the speed-up moves a little, the latencies a lot
    records = [replicate_record("r1", [4.0] * BLOCKS, [2.0] * BLOCKS),
               replicate_record("r2", [8.0] * BLOCKS, [4.2] * BLOCKS),
               replicate_record("r3", [4.0] * BLOCKS, [2.1] * BLOCKS)]
    row = frame(records).iloc[0]
    assert len(frame(records)) == 1 and row["replicates"] == 3 and row["covers_runs"]
    per_replicate = np.log([4.0 / 2.0, 8.0 / 4.2, 4.0 / 2.1])
    assert row["speedup"] == pytest.approx(math.exp(per_replicate.mean()))
    low, high = t_interval(per_replicate)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((math.exp(low), math.exp(high)))
    assert row["between_sd"] == pytest.approx(per_replicate.std(ddof=1))
    assert row["mean_ms"] == pytest.approx((2.0 + 4.2 + 2.1) / 3) and row["runs"] == 3 * BLOCKS * RUNS
    assert row["eager_interleaved_ms"] == pytest.approx((4.0 + 8.0 + 4.0) / 3)
    assert row["compile_s"] == pytest.approx(9.0)  # the first replicate's (r2 and r3 compiled in 5 s)
    assert row["pairs"] == 3 * BLOCKS


def test_a_cell_measured_once_keeps_its_own_interval_and_says_it_is_within_one_run():
    (row,) = [row for _, row in frame([replicate_record("r1", [4.0, 4.2, 3.9, 4.1], [2.0] * BLOCKS)]).iterrows()]
    assert row["replicates"] == 1 and not row["covers_runs"] and np.isnan(row["between_sd"])


def test_a_failed_replicate_leaves_the_row_to_the_others():
    failed = replicate_record("r2", [4.0] * BLOCKS, [2.0] * BLOCKS)
    failed["status"], failed["error"] = "error", "RuntimeError: boom"
    del failed["latency"], failed["speedup"], failed["throughput"]
    records = [replicate_record("r1", [4.0] * BLOCKS, [2.0] * BLOCKS), failed,
               replicate_record("r3", [4.4] * BLOCKS, [2.0] * BLOCKS)]
    row = frame(records).iloc[0]
    assert row["status"] == "ok" and row["replicates"] == 2
    assert row["speedup"] == pytest.approx(math.exp(np.mean(np.log([2.0, 2.2]))))
