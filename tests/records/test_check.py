"""A record held to its schema's types and ranges: every committed study reads, and every impossible value is one
line naming its field, on reading (the line skipped) and on writing (nothing appended)."""

import copy
from pathlib import Path
import re
import warnings

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.schema import Record, problem
from bench_utils.records.results_file import CorruptRecordWarning, append_record, iter_records
from hostile_records import payload, poisoned, read_jsonl, refusal, string_fields, write_jsonl

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"
EXAMPLE = PROJECT_ROOT / "reports" / "example-tiny" / "results.jsonl"
COMMITTED = sorted((PROJECT_ROOT / "reports").glob("*/results.jsonl"))


def compiled_record() -> dict:
    """The example study's compiled cell: every block a CPU record has (speed-up, parity, profile...)."""
    return next(record for record in read_jsonl(EXAMPLE) if record["cell"]["compile_mode"] != "eager")


def test_every_committed_studys_records_hold_to_the_schema():
    assert len(COMMITTED) >= 3  # the example and the two H200 studies
    for path in COMMITTED:
        for number, record in enumerate(read_jsonl(path), start=1):
            assert problem(record) is None, f"{path}:{number}: {problem(record)}"


def _with(record: dict, dotted: str, value) -> dict:
    changed = copy.deepcopy(record)
    *parents, last = dotted.split(".")
    target = changed
    for name in parents:
        target = target[name]
    target[last] = value
    return changed


@pytest.mark.parametrize("field, value, reason", [
    ("latency.mean", "0.0288", "latency.mean: must be a valid number, got '0.0288'"),
    ("latency.values", ["0.03", "0.03"], "latency.values.0: must be a valid number, got '0.03'"),
    ("latency.mean", -0.0288, "latency.mean: must be greater than or equal to 0.000000001, got -0.0288"),
    ("latency.count", True, "latency.count: must be a valid integer, got True"),
    ("speedup.mean", -0.5, "speedup.mean: must be greater than or equal to 0.000001, got -0.5"),
    ("speedup.mean_ci95", [1.2, 0.9], "speedup.mean_ci95: its low bound 1.2 is above its high bound 0.9"),
    ("speedup.mean_ci95", [0.9, 1.0, 1.2], "speedup.mean_ci95: must have at most 2 items"),
    ("speedup.eager_mean_ms", 0, "speedup.eager_mean_ms: must be greater than or equal to 0.000001, got 0"),
    ("compile.graphs", -1, "compile.graphs: must be greater than or equal to 0, got -1"),
    ("memory.param_bytes", -8, "memory.param_bytes: must be greater than or equal to 0, got -8"),
    ("cell.device", "cuda:x", "cell.device: must be cpu, cuda or cuda:N, got 'cuda:x'"),
    ("cell.compile_mode", "fastest", "cell.compile_mode: must be eager, a torch.compile mode"),
    ("environment.machine", "../../etc", "environment.machine: must be letters, digits"),
    ("environment.packages", {"torch": "2.14.1\n--index-url http://mirror.example"},
     "environment.packages.torch: must be a version (PEP 440"),
    ("environment.packages", {"torch; os.system('x')": "2.14.1"},
     "environment.packages.torch; os.system('x'): must be a package name"),
    ("environment.torch_version", "2.14.1 --pre", "environment.torch_version: must be a version"),
    ("latency.mean", 1.0, "latency.mean 1.0 lies outside its runs' [min, max]"),
])
def test_an_impossible_value_is_refused_naming_its_field_and_what_it_holds(field, value, reason):
    found = problem(_with(compiled_record(), field, value))
    assert found is not None and found.startswith(reason), found
    assert "\n" not in found and len(found) < 300


def test_a_long_value_is_quoted_short():
    found = problem(_with(compiled_record(), "latency.mean", "x" * 10_000))
    assert found.startswith("latency.mean: must be a valid number, got 'xxx") and len(found) < 150


def test_each_string_field_holding_markup_is_kept_or_refused_by_name():
    # a colleague's record: each string alone made hostile. Kept (the report escapes it), or skipped with a
    # reason that names that very field: never a crash, never another field blamed
    for record in [*read_jsonl(FIXTURE), *read_jsonl(EXAMPLE)]:
        for field in string_fields(record):
            found = refusal(poisoned(record, {field}, keys=False))
            if found is not None:
                named = re.sub(r"\[(\d+)\]", r".\1", field)
                assert found.startswith(named), (field, found)


def test_a_reader_skips_an_impossible_record_with_its_line_and_reads_the_rest(tmp_path):
    good = compiled_record()
    results = write_jsonl(tmp_path / "results.jsonl", [good, _with(good, "latency.mean", "fast"), good])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read = [number for number, _ in iter_records(results)]
    assert read == [1, 3]
    [skipped] = [str(w.message) for w in caught if w.category is CorruptRecordWarning]
    assert skipped == (f"{results}:2: skipped: not a valid record (latency.mean: must be a valid number, "
                       "got 'fast')")


def test_the_writer_refuses_what_a_reader_would_skip(tmp_path):
    results = tmp_path / "results.jsonl"
    with pytest.raises(ValueError, match="speedup.mean: must be greater than or equal to 0.000001"):
        append_record(results, _with(compiled_record(), "speedup.mean", -1.0))
    assert not results.exists() or results.read_text() == ""
    append_record(results, compiled_record())  # the same record, as measured, is written
    assert len(results.read_text().splitlines()) == 1


def test_free_text_holding_markup_is_a_valid_record():
    # names, notes and errors are the records' own words: checked for type, and escaped where shown
    record = _with(compiled_record(), "cell.model", "resnet" + payload("cell.model"))
    assert Record.from_json(record).cell.model == record["cell"]["model"]
