import math

import pytest

from bench_utils import make_record
from bench_utils.settings import Settings
from bench_utils.records.build import SCHEMA_VERSION, validate_record
from sample_records import CELL, ENV, ok_record


def test_ok_record_has_optimum_benchmark_latency_block():
    record = ok_record()
    latency = record["latency"]
    assert record["schema_version"] == SCHEMA_VERSION and record["status"] == "ok"
    for key in ("values", "count", "total", "mean", "p50", "p90", "p95", "p99", "stdev", "stdev_",
                "p999", "median", "ci95"):
        assert key in latency, key
    assert latency["unit"] == "s" and latency["count"] == 4
    assert latency["values"] == pytest.approx([0.010, 0.012, 0.011, 0.013])
    assert latency["mean"] == pytest.approx(0.0115) and latency["total"] == pytest.approx(0.046)
    assert latency["stdev_"] == pytest.approx(latency["stdev"] / latency["mean"] * 100)
    assert record["throughput"] == {"unit": "samples/s", "value": pytest.approx(4 / 0.0115)}
    assert record["compile"]["first_call_ms"] == 900.0
    assert record["cell"] == {**CELL, "memory_format": "contiguous", "shapes": "static", "inductor": "default",
                              "replicate": "r1"}
    assert record["config"]["weights"] == "random"


def test_error_text_does_not_name_the_home_directory():
    from pathlib import Path

    error = f'File "{Path.home()}/project/x.py", line 3\nRuntimeError: boom'
    record = make_record(CELL, status="error", error=error, environment=ENV)
    assert str(Path.home()) not in record["error"] and record["error"].startswith('File "~/project')


def test_failed_records_carry_no_numbers():
    record = make_record(CELL, status="oom", error="CUDA out of memory", environment=ENV)
    assert record["latency"] is None and record["throughput"] is None
    with pytest.raises(ValueError, match="error text"):
        make_record(CELL, status="error", environment=ENV)
    with pytest.raises(ValueError, match="must not carry latency"):
        ok_record(status="error", error="boom")


@pytest.mark.parametrize("field, value, message", [
    ("batch_size", 0, "batch_size"), ("batch_size", "4", "batch_size"), ("model", "", "cell.model"),
    ("status", "done", "status must be one of"),
])
def test_invalid_records_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        ok_record(**{field: value})


def test_non_finite_numbers_are_refused_with_their_path():
    with pytest.raises(ValueError, match=r"record.memory.peak"):
        ok_record(memory={"peak": math.nan})


def test_validate_record_rejects_non_dicts():
    with pytest.raises(ValueError):
        validate_record([])


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="cell.memory_format must be one of contiguous, channels_last"):
        ok_record(memory_format="nhwc")


def test_a_cell_block_is_the_identity_then_the_variant_each_setting_its_default_where_not_given():
    record = make_record({**CELL, "shapes": "dynamic"}, status="error", error="boom", environment=ENV)
    assert list(record["cell"]) == [*CELL, "memory_format", "shapes", "inductor", "replicate"]
    assert record["cell"]["memory_format"] == "contiguous" and record["cell"]["shapes"] == "dynamic"
    with pytest.raises(ValueError, match="no cell field runs: the cell's fields are study, task"):
        make_record({**CELL, "runs": 3}, status="error", error="boom", environment=ENV)
    with pytest.raises(ValueError, match="cell.device must be a non-empty string, got None"):
        make_record({name: value for name, value in CELL.items() if name != "device"}, status="error",
                    error="boom", environment=ENV)


def test_a_cell_no_kernel_measured_records_its_settings_and_no_weights():
    from bench_utils.records.build import failure_record, unmeasured_config

    config = unmeasured_config(Settings(runs=7, weights="auto"))
    assert config["weights"] is None and config["weights_requested"] == "auto" and config["runs"] == 7
    record = failure_record(CELL, status="error", error="lost", config=config, environment=ENV)
    assert record["config"] == config and record["latency"] is None
