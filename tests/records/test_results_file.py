import json
import math
import multiprocessing
import re
import warnings
from pathlib import Path

import pytest

from bench_utils import append_record, make_record, read_records, read_results
from bench_utils.records.results_file import CorruptRecordWarning, iter_records, skipped_lines_said
from sample_records import CELL, ENV, ok_record


def test_round_trip_and_flat_dataframe(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    append_record(path, ok_record(model="vit", batch_size=1))
    append_record(path, make_record({**CELL, "batch_size": 16}, status="oom",
                                    error="CUDA out of memory. Tried to allocate 2 GiB", environment=ENV))
    records = read_records(path)
    assert [r.cell.model for r in records] == ["resnet", "vit", "resnet"]
    assert records[0].latency.values == pytest.approx([0.010, 0.012, 0.011, 0.013])
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
    assert [r.cell.model for r in records] == ["resnet", "vit"]


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
    assert [r.cell.model for r in records] == ["resnet", "vit"]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 4
    assert any(":5:" in m and "newer" in m for m in messages)


def test_structurally_bad_and_older_records_are_skipped_by_readers_runner_and_report(tmp_path):
    import json

    from bench_utils.report.frame import frame, latest_records

    path = tmp_path / "results.jsonl"
    good = ok_record()
    broken = {**ok_record(model="vit"), "cell": {**good["cell"], "batch_size": "four"}}
    no_status = {k: v for k, v in ok_record(model="beit").items() if k != "status"}
    older = {**ok_record(model="detr"), "schema_version": 0}
    with open(path, "w", encoding="utf-8") as f:
        for record in (good, broken, no_status, older):
            f.write(json.dumps(record) + "\n")
    with pytest.warns(CorruptRecordWarning) as caught:
        records = read_records(path)
    assert [r.cell.model for r in records] == ["resnet"]
    messages = sorted(str(w.message) for w in caught)
    assert messages[0].startswith(f"{path}:2:") and "cell.batch_size must be an integer" in messages[0]
    assert messages[1].startswith(f"{path}:3:") and "status must be one of" in messages[1]
    assert messages[2].startswith(f"{path}:4:") and "schema_version must be a version from 1 to 3, got 0" in messages[2]
    with pytest.warns(CorruptRecordWarning):  # the report reads the same way: no crash
        assert list(frame(latest_records([path]))["model"]) == ["resnet"]


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
    assert sorted((r.cell.model, r.cell.batch_size) for r in records) == \
        sorted((f"m{w}", i + 1) for w in range(4) for i in range(15))


def test_reading_from_an_offset_sees_only_later_records(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    offset = path.stat().st_size
    append_record(path, ok_record(model="vit"))
    from bench_utils.records.results_file import iter_records

    assert [r.cell.model for _, r in iter_records(path, start=offset)] == ["vit"]
    assert len(list(iter_records(path))) == 2


def test_a_file_that_begins_with_a_byte_order_mark_is_read_whole(tmp_path):
    path = tmp_path / "results.jsonl"
    lines = [json.dumps(ok_record(model=model), ensure_ascii=False) for model in ("resnet", "vit")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8-sig")  # as some editors and shells save it
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptRecordWarning)
        assert [r.cell.model for r in read_records(path)] == ["resnet", "vit"]
    append_record(path, ok_record(model="beit"))  # appends go on after it
    assert [r.cell.model for r in read_records(path)] == ["resnet", "vit", "beit"]


def test_a_file_of_a_byte_order_mark_alone_takes_appends(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"\xef\xbb\xbf")  # an editor's empty file: no newline after the mark
    append_record(path, ok_record())
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptRecordWarning)
        assert [(line, r.cell.model) for line, r in iter_records(path)] == [(2, "resnet")]


def test_a_byte_order_mark_is_read_past_on_the_first_line_only(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    with open(path, "ab") as f:
        f.write(b"\xef\xbb\xbf" + json.dumps(ok_record(model="vit")).encode() + b"\n")
    with pytest.warns(CorruptRecordWarning, match=r":2: skipped: not valid JSON"):
        assert [r.cell.model for r in read_records(path)] == ["resnet"]


def test_lines_read_from_an_offset_are_numbered_as_in_the_file(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    append_record(path, ok_record(model="vit"))
    offset = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"torn\n")
    append_record(path, ok_record(model="beit"))
    with pytest.warns(CorruptRecordWarning, match=rf"^{re.escape(str(path))}:3: skipped: not valid JSON"):
        assert [line for line, _ in iter_records(path, start=offset)] == [4]


def test_skipped_lines_are_said_once_each_and_collected(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    append_record(path, ok_record())
    with open(path, "ab") as f:
        f.write(b"not json\n")
        f.write(b'{"hello": "no schema"}\n')
    said = []
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as others, skipped_lines_said(said.append) as skipped:
        read_records(path)
        read_records("results.jsonl")  # the same file again, named relative: nothing said twice
        warnings.warn("another warning", UserWarning)
    assert said == [f"{path}:2: skipped: not valid JSON (JSONDecodeError: Expecting value: line 1 column 1 (char 0))",
                    f"{path}:3: skipped: not a result record (no schema_version)"]
    assert [(line.path, line.line) for line in skipped] == [(str(path), 2), (str(path), 3)]
    assert [str(w.message) for w in others] == ["another warning"]  # other warnings shown as before
    with pytest.warns(CorruptRecordWarning):  # outside, the reader warns as before
        read_records(path)


def _unreadable_files(tmp_path):
    import codecs
    line = '{"schema_version": 2}\n'
    files = {"empty": b"", "blank": b"\n \n", "values": b'1\n"x"\n[1, 2]\n',
             "utf16": codecs.BOM_UTF16_LE + line.encode("utf-16-le"),
             "utf16-no-bom": line.encode("utf-16-le"), "latin1": "{\"caf\xe9\": 1}\n".encode("latin-1")}
    for name, data in files.items():
        (tmp_path / f"{name}.jsonl").write_bytes(data)
    return files


@pytest.mark.parametrize("name, words", [
    ("empty", "is empty: no cell has been measured"), ("blank", "is empty"),
    ("values", "holds 3 lines and no result record (line 1: not a result record"),
    ("utf16", "is in UTF-16: records are UTF-8, one JSON object a line; convert it with: iconv -f UTF-16 -t UTF-8"),
    ("utf16-no-bom", "is in UTF-16 (little-endian, no byte-order mark)"),
    ("latin1", "is not UTF-8 (perhaps Latin-1 or Windows-1252): records are UTF-8"),
])
def test_a_file_no_record_can_be_read_from_is_said_in_one_line(tmp_path, name, words):
    from bench_utils.records.results_file import NoRecordsError, check_readable, unreadable
    _unreadable_files(tmp_path)
    reason = unreadable(tmp_path / f"{name}.jsonl")
    assert words in reason and "\n" not in reason
    with pytest.raises(NoRecordsError) as raised:
        check_readable([tmp_path / f"{name}.jsonl"])
    assert raised.value._render_traceback_() == [f"error: {reason}"]  # a notebook shows this line, no traceback


def test_a_file_with_one_readable_record_is_readable(tmp_path):
    from bench_utils.records.results_file import unreadable
    good = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"not json\n" + good.read_bytes())
    assert unreadable(good) is None and unreadable(mixed) is None


def test_a_line_with_a_byte_that_is_not_utf8_is_skipped_and_the_file_still_reads(tmp_path):
    from bench_utils.records.results_file import unreadable
    path = tmp_path / "results.jsonl"
    good = json.dumps(ok_record()).encode()
    path.write_bytes(good + b"\n" + good.replace(b'"resnet"', b'"caf\xe9"') + b"\n" + good + b"\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [number for number, _ in iter_records(path)] == [1, 3]
    assert any(":2: skipped: not valid JSON (UnicodeDecodeError" in str(w.message) for w in caught)
    assert unreadable(path) is None  # the report reads it too, that line skipped, as run and resume do


@pytest.mark.parametrize("line, reason", [
    (b"[" * 100_000, "nested deeper than 32 levels"),  # the decoder's own recursion ends, one line
    (b'{"schema_version": 3, "x": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32 levels"),
    (b'{"schema_version": 3, "status": "ok", "status": "error"}', "the key 'status' is given twice in one object"),
    (b'{"schema_version": "3"}', 'schema_version must be a whole number, got "3"'),
    (b'{"schema_version": null}', "schema_version must be a whole number, got null"),
    (b'{"schema_version": true}', "schema_version must be a whole number, got true"),
    (b'{"schema_version": 2.5}', "schema_version must be a whole number, got 2.5"),
    (b'{"schema_version": 99}', "schema_version 99 is newer than this bench_utils reads"),
])
def test_a_strange_line_is_skipped_with_what_is_wrong_with_it(tmp_path, line, reason):
    path = tmp_path / "results.jsonl"
    path.write_bytes(json.dumps(ok_record()).encode() + b"\n" + line + b"\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(read_records(path)) == 1
    (said,) = [str(w.message) for w in caught if issubclass(w.category, CorruptRecordWarning)]
    assert said.startswith(f"{path}:2: skipped: ") and reason in said


@pytest.mark.parametrize("change, words", [
    (lambda r: r["cell"].update(batch_size=10 ** 30), "cell.batch_size: must be less than or equal to 1048576"),
    (lambda r: r["cell"].update(model="m" * 3000), "cell.model: must have at most 256 characters"),
    (lambda r: r["environment"].update(cpu_model="c" * 100_000), "environment.cpu_model: must have at most 256"),
    (lambda r: r["latency"].update(values=[1e30] * 4, mean=1e30, p50=1e30, p99=1e30, median=1e30, min=1e30,
                                   max=1e30), "latency.values.0: must be less than or equal to 3600"),
    (lambda r: r.update(speedup={"mean": 1e308}), "speedup.mean: must be less than or equal to 1000000"),
    (lambda r: r.update(speedup={"mean": 1.5, "mean_ci95": [1.0, 1e300]}),
     "speedup.mean_ci95.1: must be less than or equal to 100000000000000000000"),
])
def test_a_record_outside_the_physical_range_of_a_field_is_refused(change, words):
    from bench_utils.records.check import InvalidRecord
    from bench_utils.records.schema import Record

    record = json.loads(json.dumps(ok_record()))
    change(record)
    with pytest.raises(InvalidRecord) as refused:
        Record.from_json(record)
    assert words in str(refused.value)
    # the smallest figures of committed records stay readable: a p-value of 1e-22, an interval near 0
    kept = json.loads(json.dumps(ok_record()))
    kept["speedup"] = {"mean": 1.5, "mean_ci95": [1e-3, 2.0], "paired_pvalue": 1e-22}
    assert Record.from_json(kept).speedup.paired_pvalue == 1e-22
    # and an interval that 2 noisy pairs took towards 0 is a measurement (a loaded 2-core CPU gave 1e-10)
    kept["speedup"] = {"mean": 1.5, "mean_ci95": [1e-10, 2e10]}
    assert Record.from_json(kept).speedup.mean_ci95 == [1e-10, 2e10]
