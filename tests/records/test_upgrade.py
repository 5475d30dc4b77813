"""One upgrader: records of every schema version the study wrote read as the current one, and say what they lack."""

import copy
import json
from pathlib import Path

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.check import InvalidRecord
from bench_utils.records.results_file import append_record, read_records
from bench_utils.records.schema import SCHEMA_VERSION, Record
from bench_utils.records.upgrade import UNPAIRED_METHOD, upgrade
from bench_utils.records.value_types import VARIANT_FIELDS
from hostile_records import read_jsonl

SCHEMA_1 = Path(__file__).parents[1] / "fixtures" / "schema1-results.jsonl"
COMMITTED = sorted(PROJECT_ROOT.glob("reports/*/results.jsonl"))


def schema_2_lines() -> list[dict]:
    """The committed records written as schema 2 (before the typed record); later leases wrote schema 3."""
    return [line for path in COMMITTED for line in read_jsonl(path) if line["schema_version"] == 2]


def test_schema_1_records_read_as_what_they_measured_and_say_how():
    raw = read_jsonl(SCHEMA_1)
    assert {record["schema_version"] for record in raw} == {1}
    records = read_records(SCHEMA_1)
    assert len(records) == len(raw)  # none skipped
    for record, line in zip(records, raw):
        assert record.schema_version == SCHEMA_VERSION
        assert record.config.sync == "pipelined"  # how schema 1 timed: one wait after the loop
        assert record.config.tf32 == ("on" if line["config"]["tf32"] else "strict")
        assert (record.cell.memory_format, record.cell.shapes, record.cell.inductor) == (
            "contiguous", "static", "default")  # the guide's cells
        if record.latency is not None:
            assert record.latency.sync == "pipelined" and record.latency.values == line["latency"]["values"]
        if record.speedup is not None:  # the unpaired comparison it was, no paired p-value made up
            assert record.speedup.method == UNPAIRED_METHOD and record.speedup.paired_pvalue is None
            assert record.speedup.extra("welch_pvalue") == line["speedup"]["welch_pvalue"]
            assert record.speedup.mean == line["speedup"]["mean"]
        if record.compile is not None and "compile_time_ms" in line["compile"]:
            # its compile time (first call less an eager call) is no cold compile as schema 2 measures it
            assert record.compile.cold_ms is None
            assert record.compile.extra("compile_time_ms") == line["compile"]["compile_time_ms"]


def test_schema_2_records_gain_the_cells_variant_and_cuda_graphs_request_and_nothing_else():
    assert len(schema_2_lines()) >= 40  # the two H200 studies and the example's
    for line in schema_2_lines():
        older = copy.deepcopy(line)
        lifted = upgrade(line, SCHEMA_VERSION)
        assert line == older  # the record read is never changed: a copy is lifted
        assert lifted["schema_version"] == 3
        assert {name: lifted["cell"][name] for name in VARIANT_FIELDS} == {
            name: line["cell"].get(name) or allowed[0] for name, allowed in VARIANT_FIELDS.items()}
        compiled = line.get("compile")
        if isinstance(compiled, dict) and "cuda_graphs_requested" not in compiled:  # one boolean: the request
            assert lifted["compile"]["cuda_graphs_requested"] == compiled["cuda_graphs"]
            lifted["compile"] = {k: v for k, v in lifted["compile"].items() if k != "cuda_graphs_requested"}
        assert {**lifted, "schema_version": 2, "cell": line["cell"]} == line


def test_a_record_reads_back_as_it_was_written():
    for path in COMMITTED:
        for record in read_records(path):
            again = Record.from_json(json.loads(json.dumps(record.to_json())))
            assert again == record and again.to_json() == record.to_json()
            assert record.to_json()["schema_version"] == SCHEMA_VERSION


def test_the_writer_writes_the_current_version_whatever_it_was_given(tmp_path):
    line = schema_2_lines()[0]
    results = tmp_path / "results.jsonl"
    append_record(results, line)
    written = json.loads(results.read_text())
    assert written["schema_version"] == SCHEMA_VERSION
    assert read_records(results)[0] == Record.from_json(line)


@pytest.mark.parametrize("version, reason", [
    (0, "schema_version must be a version from 1 to 3, got 0"),
    (True, "schema_version must be a version from 1 to 3, got True"),
    ("2", "schema_version must be a version from 1 to 3, got '2'"),
    (4, "schema_version 4 is newer than this bench_utils reads (3); upgrade bench_utils"),
])
def test_a_version_no_bench_utils_wrote_or_a_newer_one_is_refused_saying_which(version, reason):
    line = {**read_jsonl(COMMITTED[0])[0], "schema_version": version}
    with pytest.raises(InvalidRecord) as caught:
        Record.from_json(line)
    assert str(caught.value) == reason


def test_a_record_is_immutable():
    record = read_records(COMMITTED[0])[0]
    with pytest.raises(Exception, match="frozen"):
        record.status = "error"  # type: ignore[misc]
    with pytest.raises(Exception, match="frozen"):
        record.cell.model = "vit"  # type: ignore[misc]


def test_a_compile_block_of_one_boolean_reads_it_as_the_request():
    line = schema_2_lines()[0]
    for said in (True, False):
        older = {**line, "compile": {"mode": "reduce-overhead", "cuda_graphs": said}}
        assert Record.from_json(older).compile.cuda_graphs_requested is said
    both = {**line, "compile": {"mode": "reduce-overhead", "cuda_graphs": "partial", "cuda_graphs_requested": True}}
    assert Record.from_json(both).compile.cuda_graphs_requested is True
