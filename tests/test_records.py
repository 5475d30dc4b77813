import math

import pytest

from bench_utils.settings import Settings
from bench_utils import make_record
from bench_utils.records import SCHEMA_VERSION, validate_record
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
    assert record["cell"] == {**CELL, "memory_format": "contiguous", "shapes": "static"}
    assert record["config"]["weights"] == "random"


def test_error_text_does_not_name_the_home_directory():
    from pathlib import Path

    error = f'File "{Path.home()}/project/x.py", line 3\nRuntimeError: boom'
    record = make_record(**CELL, status="error", error=error, environment=ENV)
    assert str(Path.home()) not in record["error"] and record["error"].startswith('File "~/project')


def test_failed_records_carry_no_numbers():
    record = make_record(**CELL, status="oom", error="CUDA out of memory", environment=ENV)
    assert record["latency"] is None and record["throughput"] is None
    with pytest.raises(ValueError, match="error text"):
        make_record(**CELL, status="error", environment=ENV)
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


def test_identity_and_environment_key():
    from bench_utils.records import cell_identity, record_key

    record = ok_record(device="cuda:1", environment={
        "torch_version": "2.15.0", "cpu_model": "EPYC", "driver_version": "580.1",
        "gpus": [{"index": 0, "name": "NVIDIA H100"}]})
    assert cell_identity(record) == ("test", "image-classification", "resnet", 4, "default", "float32",
                                     "contiguous", "static", "cuda")
    assert record_key(record)[-3:] == ("2.15.0", "NVIDIA H100", "580.1")
    cpu = ok_record(environment={"torch_version": "2.15.0", "cpu_model": "EPYC", "cpu_count_logical": 2,
                                 "gpus": []})
    assert record_key(cpu)[-4:] == ("2.15.0", "EPYC", 2, None)  # no cluster kind: a local run


def test_the_settings_a_cell_was_measured_with_belong_to_its_key():
    from bench_utils.records import measurement_settings, record_key, settings_hash

    base = measurement_settings(Settings(blocks=10, weights="auto"))
    keys = {record_key(ok_record(config={**base, **change})) for change in (
        {}, {"runs": 100}, {"warmup": 5}, {"blocks": 30}, {"weights_requested": "random"}, {"seed": 1},
        {"tf32": "strict"}, {"backend": "aot_eager"}, {"fullgraph": True}, {"dynamic": True},
        {"sync": "pipelined"})}
    assert len(keys) == 11
    # eager cells do not compile: compile options are no part of their measurement
    assert settings_hash(base, "eager") == settings_hash({**base, "fullgraph": True}, "eager")
    assert settings_hash(base, "default") != settings_hash({**base, "fullgraph": True}, "default")



def test_a_gpu_memory_cap_is_a_setting_and_records_before_it_keep_their_key():
    from bench_utils.records import measurement_settings, settings_hash

    base = measurement_settings(Settings(blocks=10, weights="auto"))
    older = {key: value for key, value in base.items() if key != "gpu_memory_gib"}  # written before caps
    assert base["gpu_memory_gib"] is None and settings_hash(older, "eager") == settings_hash(base, "eager")
    capped = {**base, "gpu_memory_gib": 16}
    assert settings_hash(capped, "eager") != settings_hash(base, "eager")
    assert settings_hash(capped, "eager") != settings_hash({**base, "gpu_memory_gib": 24}, "eager")




def test_a_variant_is_another_cell_and_old_records_are_the_guides_cells():
    from bench_utils.records import cell_identity, record_key

    guide = ok_record()
    older = ok_record()
    del older["cell"]["memory_format"], older["cell"]["shapes"]  # written before variants existed
    nhwc = ok_record(memory_format="channels_last")
    dynamic = ok_record(shapes="dynamic")
    assert cell_identity(older) == cell_identity(guide)
    assert record_key(older) == record_key(guide)
    assert len({record_key(record) for record in (guide, nhwc, dynamic)}) == 3
    assert cell_identity(nhwc)[6:8] == ("channels_last", "static")
    assert cell_identity(dynamic)[6:8] == ("contiguous", "dynamic")


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="cell.memory_format must be one of contiguous, channels_last"):
        ok_record(memory_format="nhwc")


def test_a_cpu_nodes_declared_kind_is_part_of_its_identity_a_gpus_name_already_is():
    from bench_utils.records import environment_key, record_key

    cpu = {"torch_version": "2.9", "cpu_model": "EPYC", "cpu_count_logical": 8}
    assert environment_key({**cpu, "accelerator_type": "KA"}, "cpu") != environment_key(
        {**cpu, "accelerator_type": "KB"}, "cpu")
    assert environment_key(cpu, "cpu") == environment_key({**cpu, "accelerator_type": None}, "cpu")
    gpu = {"torch_version": "2.9", "driver_version": "580", "gpus": [{"index": 0, "name": "NVIDIA H100"}]}
    # a GPU measured locally and on a cluster node of its type is one environment
    assert environment_key(gpu, "cuda") == environment_key({**gpu, "accelerator_type": "H100"}, "cuda")
    record = ok_record()
    placed = {**record, "environment": {**record["environment"], "accelerator_type": "KA"}}
    assert record_key(placed) != record_key(record)
