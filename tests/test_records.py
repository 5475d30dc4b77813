import json
import math
import multiprocessing


import pytest

from bench_utils import append_record, make_record, read_records, read_results
from bench_utils.records import CorruptRecordWarning, SCHEMA_VERSION, validate_record
from bench_utils.timing import Measurement

ENV = {"torch_version": "2.15.0", "gpus": [], "timestamp_utc": "2026-11-22T00:00:00+00:00"}
CELL = dict(study="test", task="image-classification", model="resnet", batch_size=4,
            compile_mode="default", dtype="float32", device="cpu")


def ok_record(**overrides):
    m = Measurement(times_ms=[10.0, 12.0, 11.0, 13.0], first_call_ms=900.0, warmup=2)
    fields = {**CELL, "measurement": m, "environment": ENV,
              "config": {"weights": "random", "seed": 0}, **overrides}
    return make_record(**fields)


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
    assert record["cell"] == CELL and record["config"]["weights"] == "random"


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


def test_round_trip_and_flat_dataframe(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    append_record(path, ok_record(model="vit", batch_size=1))
    append_record(path, make_record(**{**CELL, "batch_size": 16}, status="oom",
                                    error="CUDA out of memory. Tried to allocate 2 GiB", environment=ENV))
    records = read_records(path)
    assert [r["cell"]["model"] for r in records] == ["resnet", "vit", "resnet"]
    assert records[0]["latency"]["values"] == pytest.approx([0.010, 0.012, 0.011, 0.013])
    frame = read_results(path)
    assert len(frame) == 3
    assert list(frame.columns[:7]) == ["study", "task", "model", "batch_size", "compile_mode",
                                       "dtype", "device"]
    assert list(frame["status"]) == ["ok", "ok", "oom"]
    assert frame.loc[0, "latency.mean"] == pytest.approx(0.0115)
    assert math.isnan(frame.loc[2, "latency.mean"])
    assert "latency.values" not in frame and "latency.values" in read_results(path, include_values=True)
    assert list(frame["line"]) == [1, 2, 3]


def test_each_record_is_one_utf8_line(tmp_path):
    path = tmp_path / "r.jsonl"
    append_record(path, ok_record(config={"note": "نموذج الرؤية"}))
    raw = path.read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")
    assert "نموذج الرؤية" in raw.decode("utf-8")


def test_torn_last_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    line = json.dumps(ok_record(), ensure_ascii=False)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line[: len(line) // 2])  # a writer killed mid-line
    with pytest.warns(CorruptRecordWarning, match=rf"{path.name}:2: skipped"):
        frame = read_results(path)
    assert len(frame) == 1


def test_append_after_a_torn_line_starts_a_new_line(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"schema_version": 1, "cell": {"mod')
    append_record(path, ok_record(model="vit"))
    with pytest.warns(CorruptRecordWarning, match=":2:"):
        records = read_records(path)
    assert [r["cell"]["model"] for r in records] == ["resnet", "vit"]


def test_corrupt_lines_in_the_middle_are_skipped(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    with open(path, "ab") as f:
        f.write(b"not json at all\n")
        f.write(b'{"hello": "no schema"}\n')
        f.write(b"\xff\xfe garbage bytes\n")
        f.write(b'{"schema_version": 999, "cell": {}}\n')
    append_record(path, ok_record(model="vit"))
    with pytest.warns(CorruptRecordWarning) as caught:
        records = read_records(path)
    assert [r["cell"]["model"] for r in records] == ["resnet", "vit"]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 4
    assert any(":5:" in m and "newer" in m for m in messages)


def test_several_files_merge(tmp_path):
    a, b = tmp_path / "a" / "results.jsonl", tmp_path / "b" / "results.jsonl"
    append_record(a, ok_record())
    append_record(b, ok_record(model="vit"))
    frame = read_results([a, b])
    assert list(frame["model"]) == ["resnet", "vit"]
    assert frame["source"].tolist() == [str(a), str(b)]


def test_empty_file_gives_an_empty_frame(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("")
    frame = read_results(path)
    assert frame.empty and "model" in frame.columns


def _writer(path, worker, count):
    for i in range(count):
        record = ok_record(model=f"m{worker}", batch_size=i + 1)
        record["config"]["padding"] = "x" * 20_000  # lines much longer than a pipe buffer
        append_record(path, record)


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "results.jsonl"
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_writer, args=(path, w, 15)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join()
    records = read_records(path)  # any interleaving would raise a CorruptRecordWarning
    assert len(records) == 60
    assert sorted((r["cell"]["model"], r["cell"]["batch_size"]) for r in records) == \
        sorted((f"m{w}", i + 1) for w in range(4) for i in range(15))


def test_validate_record_rejects_non_dicts():
    with pytest.raises(ValueError):
        validate_record([])


def test_identity_and_environment_key():
    from bench_utils.records import cell_identity, record_key

    record = ok_record(device="cuda:1", environment={"torch_version": "2.15.0", "cpu_model": "EPYC",
                                                     "gpus": [{"index": 0, "name": "NVIDIA H100"}]})
    assert cell_identity(record) == ("test", "image-classification", "resnet", 4, "default", "float32", "cuda")
    assert record_key(record)[-2:] == ("2.15.0", "NVIDIA H100")
    cpu = ok_record(environment={"torch_version": "2.15.0", "cpu_model": "EPYC", "gpus": []})
    assert record_key(cpu)[-2:] == ("2.15.0", "EPYC")


def test_reading_from_an_offset_sees_only_later_records(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    offset = path.stat().st_size
    append_record(path, ok_record(model="vit"))
    from bench_utils.records import iter_records

    assert [r["cell"]["model"] for _, r in iter_records(path, start=offset)] == ["vit"]
    assert len(list(iter_records(path))) == 2
