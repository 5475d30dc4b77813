"""What the page says before any figure: a grid's cells measured, fields known wrong, cells of an earlier design."""

import json

from babel.lists import format_list
import pytest

from bench_utils.report import provenance
from bench_utils.report.frame import frame, latest_records
from bench_utils.report.i18n import Catalog


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_coverage_says_how_many_of_the_grids_cells_are_measured(locale):
    catalog = Catalog(locale)
    [line] = provenance.coverage_lines([{"folder": "hf-guide-h200", "grid": "hf-guide", "device": "NVIDIA H200",
                                         "cells": 80, "measured": 21, "from_pairs": 2}], catalog)
    line = line.replace("\u2060", "")  # Arabic keeps a name unbroken at its hyphens with a word joiner
    assert "21" in line and "80" in line and "hf-guide" in line and "NVIDIA H200" in line
    [done] = provenance.coverage_lines([{"folder": "s", "grid": "g", "device": "CPU", "cells": 6, "measured": 6}],
                                       catalog)
    assert done == catalog.t("coverage_complete", device="\u2066CPU\u2069" if locale == "ar" else "CPU",
                             cells=provenance.ltr(catalog.number(6, 0), catalog),
                             grid=provenance.ltr("g", catalog), folder=provenance.code("s", catalog))


def _study(tmp_path, corrections):
    from bench_utils import make_record
    from bench_utils.measurement.timing import Measurement

    folder = tmp_path / "study"
    folder.mkdir(parents=True)
    records = [make_record(dict(study="s", task="image-classification", model="resnet", batch_size=batch,
                                compile_mode="eager", dtype="float32", device="cpu"),
                           measurement=Measurement([1.0, 1.0], 2.0),
                           environment={"git_commit": "f9ea3bedd993d1eb", "timestamp_utc": f"2026-11-26T0{batch}"})
               for batch in (1, 2)]
    (folder / "results.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    if corrections is not None:
        (folder / "corrections.yaml").write_text(corrections)
    return folder, records


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_a_field_a_study_folder_says_is_wrong_is_said_wrong_and_the_records_stay_as_measured(tmp_path, locale):
    folder, records = _study(tmp_path, "- field: environment.git_commit\n  records: all\n"
                                       "  reason: enclosing_repository\n")
    before = (folder / "results.jsonl").read_bytes()
    [line] = provenance.correction_lines(provenance.read_corrections([folder]), latest_records([folder]),
                                         Catalog(locale))
    assert "environment.git_commit" in line and "f9ea3bedd993" in line and "2" in line
    assert (folder / "results.jsonl").read_bytes() == before
    # one record named by its id: only it is counted
    (folder / "corrections.yaml").write_text(f"- field: environment.git_commit\n  records: [{records[0]['record_id']}]\n"
                                             "  reason: enclosing_repository\n")
    [line] = provenance.correction_lines(provenance.read_corrections([folder]), latest_records([folder]),
                                         Catalog("en"))
    assert " in 1 record (" in line  # one: the singular


def test_a_correction_file_that_is_not_a_list_of_entries_is_refused_naming_it(tmp_path):
    folder, _ = _study(tmp_path, "- field: environment.git_commit\n")
    with pytest.raises(ValueError, match="corrections.yaml: entry 0 needs field, records"):
        provenance.read_corrections([folder])
    assert provenance.read_corrections([_study(tmp_path / "other", None)[0]]) == []


@pytest.mark.parametrize("entry, message", [
    ("- field: environment.git_commit\n  records: all\n  reason: <script>alert(1)</script>",
     "entry 0: reason must be one the report can say (enclosing_repository, stopped_through_windows, study_outputs), got '<script>alert(1)</script>'"),
    ("- field: '<b>x</b>'\n  records: all\n  reason: enclosing_repository",
     "entry 0: field must be a record field such as environment.git_commit, got '<b>x</b>'"),
    ("- field: environment.git_commit\n  records: [1, 2]\n  reason: enclosing_repository",
     "entry 0: records must be all or a list of record ids, got [1, 2]"),
    ("- field: enviroment.git_commit\n  records: all\n  reason: enclosing_repository",
     "entry 0: field must be in one of a record's blocks (agreement, cell, compile, compute, config, energy, "
     "environment, error, latency, log, memory, model, parity, phases, profile, record_id, schema_version, "
     "shared_measurement, skipped_after_oom, speedup, status, throughput), got 'enviroment.git_commit'"),
    ("- field: environment.git_commit\n  records: all\n reason: [", "line 3 not a YAML list of corrections"),
])
def test_a_correction_the_report_cannot_say_is_one_line_naming_its_file(tmp_path, entry, message):
    # a study folder travels with its corrections: a reason no catalog has was a KeyError mid-report
    folder, _ = _study(tmp_path, entry)
    with pytest.raises(ValueError) as caught:
        provenance.read_corrections([folder])
    assert str(caught.value).startswith(f"{folder / 'corrections.yaml'}:") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_corrections_file_the_report_cannot_say_stops_it_before_any_kernel_starts(tmp_path, monkeypatch):
    from bench_utils.report import render

    folder, _ = _study(tmp_path, "- field: environment.git_commit\n  records: all\n  reason: nope")
    monkeypatch.setattr(render, "ensure_kernel", lambda: pytest.fail("a kernel was about to start"))
    with pytest.raises(ValueError, match="corrections.yaml: entry 0: reason must be one the report can say"):
        render.render([folder], tmp_path / "out", locales=["en"], formats=["md"], progress=lambda line: None)
    assert not (tmp_path / "out").exists()


def test_cells_measured_before_switch_calls_are_named_with_their_mode():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_frame import _paired_record

    data = frame([_paired_record("default", 4.0, 2.0, switch=False),
                  _paired_record("reduce-overhead", 4.0, 1.0, switch=False),
                  _paired_record("default", 4.0, 2.0, batch_size=4)])
    line = provenance.measured_before_switch_calls(data, Catalog("en"))
    assert line.startswith("2 compiled cells") and "ResNet 1 (default), ResNet 1 (reduce-overhead)" in line
    assert provenance.measured_before_switch_calls(frame([_paired_record("default", 4.0, 2.0)]), Catalog("en")) is None


def test_cells_measured_before_switch_calls_are_named_in_numeric_batch_order():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_frame import _paired_record

    data = frame([_paired_record("default", 4.0, 2.0, switch=False, batch_size=batch) for batch in (16, 4, 1)])
    line = provenance.measured_before_switch_calls(data, Catalog("en"))
    assert "ResNet 1 (default), ResNet 4 (default), ResNet 16 (default)" in line  # as text sorts them: 1, 16, 4


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_the_grids_models_not_measured_yet_are_named(locale):
    catalog = Catalog(locale)
    item = {"folder": "hf-guide-h200", "grid": "hf-guide", "device": "NVIDIA H200", "cells": 80, "measured": 46,
            "unmeasured_models": ["maskformer", "owlvit"]}
    [line] = provenance.coverage_lines([item], catalog)
    names = [provenance.ltr(name, catalog) for name in ("Maskformer", "OwlViT")]  # their labels, not their keys
    assert catalog.t("coverage_unmeasured_models", models=format_list(names, locale=locale)) in line
    [line] = provenance.coverage_lines([{**item, "unmeasured_models": []}], catalog)
    assert catalog.t("coverage_unmeasured_models", models="X").split("X")[0] not in line
