import json
from pathlib import Path

from bench_utils.records.key import (CellIdentity, RecordKey, cell_identity, environment_key, latest_per_cell,
                                    latest_per_key, record_key, settings_hash)
from bench_utils.records.build import measurement_settings
from bench_utils.settings import Settings
from sample_records import ok_record, R, Rs

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"


def fixture_records() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def test_identity_and_environment_key():
    record = ok_record(device="cuda:1", environment={
        "torch_version": "2.15.0", "cpu_model": "EPYC", "driver_version": "580.1",
        "gpus": [{"index": 0, "name": "NVIDIA H100"}]})
    assert cell_identity(R(record)) == CellIdentity("test", "image-classification", "resnet", 4, "default", "float32",
                                                 ("contiguous", "static", "default", "r1"), "cuda")
    assert record_key(R(record)).environment == ("2.15.0", "NVIDIA H100", "580.1")
    cpu = ok_record(environment={"torch_version": "2.15.0", "cpu_model": "EPYC", "cpu_count_logical": 2,
                                 "gpus": []})
    assert record_key(R(cpu)).environment == ("2.15.0", "EPYC", 2, None)  # no cluster kind: a local run


def test_keys_of_records_written_before_the_named_key_are_what_they_were():
    # computed from these records by the positional tuple the key replaced: resume must find them done
    first, *_, error = fixture_records()
    assert record_key(R(first)) == RecordKey(
        CellIdentity("smoke", "image-segmentation", "mobilenet", 1, "eager", "float32", ("contiguous", "static", "default", "r1"), "cpu"),
        "e18aa1811533", ("2.14.1+cu130", "AMD EPYC", 2, None))
    assert record_key(R(fixture_records()[1])).settings_hash == "5ea931a79075"  # compiled: its compile options
    assert record_key(R(error)).identity.study == "faults" and record_key(R(error)).settings_hash == "e18aa1811533"


def test_keys_are_equal_and_hashed_by_value_and_slice_by_name():
    records = fixture_records()
    keys = [record_key(R(record)) for record in records]
    assert len(set(keys)) == 9 and record_key(R(dict(records[0]))) == keys[0]
    assert hash(record_key(R(json.loads(json.dumps(records[0]))))) == hash(keys[0])  # read back: the same key
    # the report's: one key per cell across study folders (smoke and faults both measured resnet18 at batch 1
    # and 2, and mobilenet's eager cell)
    assert len({key.without_study() for key in keys}) == 6
    assert keys[2].without_study() == keys[5].without_study() and keys[2] != keys[5]
    # the OOM rule's: one group per model, mode, dtype, variant, settings and environment
    faults = {key.without_batch_size() for key in keys if key.identity.study == "faults"}
    assert len(faults) == 2 and keys[5].without_batch_size() == keys[7].without_batch_size()
    assert keys[5].without_batch_size() != keys[2].without_batch_size()  # another study


def test_a_keys_parts_are_each_part_of_its_equality():
    base = ok_record(device="cuda:0")
    assert record_key(R(ok_record(device="cuda:1"))) == record_key(R(base))  # a device index is no other cell
    for change in ({"study": "other"}, {"task": "object-detection"}, {"model": "vit"}, {"batch_size": 8},
                   {"compile_mode": "max-autotune"}, {"dtype": "float16"}, {"memory_format": "channels_last"},
                   {"shapes": "dynamic"}, {"device": "cpu"}, {"config": {"runs": 7}},
                   {"environment": {"torch_version": "2.16.0", "gpus": []}}):
        assert record_key(R(ok_record(**{"device": "cuda:0", **change}))) != record_key(R(base)), change


def test_the_settings_a_cell_was_measured_with_belong_to_its_key():
    base = measurement_settings(Settings(blocks=10, weights="auto"))
    keys = {record_key(R(ok_record(config={**base, **change}))) for change in (
        {}, {"runs": 100}, {"warmup": 5}, {"blocks": 30}, {"weights_requested": "random"}, {"seed": 1},
        {"tf32": "strict"}, {"backend": "aot_eager"}, {"fullgraph": True}, {"dynamic": True},
        {"sync": "pipelined"})}
    assert len(keys) == 11
    # eager cells do not compile: compile options are no part of their measurement
    assert settings_hash(base, "eager") == settings_hash({**base, "fullgraph": True}, "eager")
    assert settings_hash(base, "default") != settings_hash({**base, "fullgraph": True}, "default")


def test_a_gpu_memory_cap_is_a_setting_and_records_before_it_keep_their_key():
    base = measurement_settings(Settings(blocks=10, weights="auto"))
    older = {key: value for key, value in base.items() if key != "gpu_memory_gib"}  # written before caps
    assert base["gpu_memory_gib"] is None and settings_hash(older, "eager") == settings_hash(base, "eager")
    capped = {**base, "gpu_memory_gib": 16}
    assert settings_hash(capped, "eager") != settings_hash(base, "eager")
    assert settings_hash(capped, "eager") != settings_hash({**base, "gpu_memory_gib": 24}, "eager")


def test_a_variant_is_another_cell_and_old_records_are_the_guides_cells():
    guide = ok_record()
    older = ok_record()
    del older["cell"]["memory_format"], older["cell"]["shapes"]  # written before variants existed: schema 2
    older["schema_version"] = 2
    nhwc = ok_record(memory_format="channels_last")
    dynamic = ok_record(shapes="dynamic")
    assert cell_identity(R(older)) == cell_identity(R(guide))
    assert record_key(R(older)) == record_key(R(guide))
    assert len({record_key(R(record)) for record in (guide, nhwc, dynamic)}) == 3
    assert cell_identity(R(nhwc)).variant_fields() == {"memory_format": "channels_last", "shapes": "static", "inductor": "default",
                                                        "replicate": "r1"}
    assert cell_identity(R(dynamic)).variant == ("contiguous", "dynamic", "default", "r1")


def test_an_identity_gives_back_the_cell_block_it_was_read_from():
    record = ok_record(device="cpu", memory_format="channels_last")
    assert cell_identity(R(record)).cell_block() == record["cell"]
    assert list(cell_identity(R(record)).cell_block()) == list(record["cell"])  # in the schema's order


def test_a_cpu_nodes_declared_kind_is_part_of_its_identity_a_gpus_name_already_is():
    cpu = {"torch_version": "2.9", "cpu_model": "EPYC", "cpu_count_logical": 8}
    assert environment_key({**cpu, "accelerator_type": "KA"}, "cpu") != environment_key(
        {**cpu, "accelerator_type": "KB"}, "cpu")
    assert environment_key(cpu, "cpu") == environment_key({**cpu, "accelerator_type": None}, "cpu")
    gpu = {"torch_version": "2.9", "driver_version": "580", "gpus": [{"index": 0, "name": "NVIDIA H100"}]}
    # a GPU measured locally and on a cluster node of its type is one environment
    assert environment_key(gpu, "cuda") == environment_key({**gpu, "accelerator_type": "H100"}, "cuda")
    record = ok_record()
    placed = {**record, "environment": {**record["environment"], "accelerator_type": "KA"}}
    assert record_key(R(placed)) != record_key(R(record))


def test_a_compiled_cells_record_stands_for_its_eager_cell_where_eager_warmed_up_as_the_cell_asks():
    from bench_utils.records.key import eager_side_key
    compiled = {**fixture_records()[1], "speedup": {"mean": 2.0, "eager_mean_ms": 4.0}}
    compiled["latency"] = {**compiled["latency"], "warmup": compiled["config"]["warmup"]}
    compiled["cell"] = {**compiled["cell"], "shapes": "dynamic"}
    key = eager_side_key(R(compiled))
    eager = {**compiled, "cell": {**compiled["cell"], "compile_mode": "eager", "shapes": "static"}}
    assert key == record_key(R(eager))  # eager compiles nothing: static shapes, no compile settings
    assert key.identity.compile_mode == "eager" and key.settings_hash != record_key(R(compiled)).settings_hash
    # not where eager warmed up otherwise (a CUDA-graph mode's longer warm-up), nor without pairs or failed
    assert eager_side_key(R({**compiled, "latency": {**compiled["latency"], "warmup": 99}})) is None
    assert eager_side_key(R({**compiled, "speedup": None})) is None
    assert eager_side_key(R({**compiled, "status": "error", "error": "RuntimeError", "latency": None,
                             "throughput": None})) is None
    assert eager_side_key(R(eager)) is None


def test_a_cell_measured_again_keeps_only_its_latest_record_whatever_the_study_or_file_order():
    def at(timestamp, **overrides):
        record = ok_record(**overrides)
        record["environment"] = {**record["environment"], "timestamp_utc": timestamp}
        return record

    later, earlier = at("2026-11-26T02:00:00Z", study="rerun"), at("2026-11-26T01:00:00Z", study="first")
    other = at("2026-11-26T00:00:00Z", batch_size=16)
    kept = {record.record_id for record in latest_per_key(Rs([later, other, earlier]))}
    assert kept == {later["record_id"], other["record_id"]}


def test_a_cell_measured_again_with_other_settings_keeps_its_latest_record_per_machine():
    # the fourth H200 lease measured ViT again in 100-run replicates; the first lease's 300-run record is superseded
    def at(timestamp, runs, cores=2):
        record = ok_record(config={"weights": "random", "seed": 0, "runs": runs})
        record["environment"] = {**record["environment"], "timestamp_utc": timestamp, "cpu_count_logical": cores}
        return record

    first, again = at("2026-11-26T01:00:00Z", 300), at("2026-11-27T01:00:00Z", 100)
    elsewhere = at("2026-11-25T01:00:00Z", 300, cores=16)  # another machine's: its own
    assert len(latest_per_key(Rs([first, again]))) == 2  # two measurements
    kept = {record.record_id for record in latest_per_cell(Rs([again, elsewhere, first]))}
    assert kept == {again["record_id"], elsewhere["record_id"]}


def test_the_latest_records_are_in_time_order_so_that_a_row_shows_the_later_measurement():
    # settings A at 1, B at 2, A again at 3: two measurements, A's latest the newest of all; the page keeps the later
    # of the two in its row by their order (report.frame.latest_records), so A's must come last
    def at(timestamp, runs):
        record = ok_record(config={"weights": "random", "seed": 0, "runs": runs})
        record["environment"] = {**record["environment"], "timestamp_utc": timestamp}
        return record

    a1, b2, a3 = at("2026-11-26T01:00:00Z", 300), at("2026-11-26T02:00:00Z", 100), at("2026-11-26T03:00:00Z", 300)
    assert [record.record_id for record in latest_per_key(Rs([a1, b2, a3]))] == [b2["record_id"], a3["record_id"]]
    from bench_utils.report.frame import latest_records
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two records claim one row: said, and the later shown
        assert [r.record_id for r in latest_records_of(latest_records, [a1, b2, a3])] == [a3["record_id"]]


def latest_records_of(latest_records, records):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
        return latest_records([path])


def test_a_setting_read_back_from_a_record_hashes_as_the_grid_gave_it():
    # a record's typed field holds 16.0 where the grid said 16: the same measurement, resumed, never measured again
    record = ok_record(config={"weights": "random", "seed": 0, "gpu_memory_gib": 16})
    assert R(record).config.gpu_memory_gib == 16.0
    assert settings_hash(R(record).config, "default") == settings_hash(record["config"], "default")
    assert settings_hash({"gpu_memory_gib": 16.5}, "default") != settings_hash({"gpu_memory_gib": 16}, "default")
