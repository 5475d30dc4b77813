from pathlib import Path

import pandas as pd
import pytest

from bench_utils.report import context
from bench_utils.report import tables as report_tables
from bench_utils.report.frame import frame, latest_records, results_files
from bench_utils.report.markdown import LRI, PDI
from bench_utils.report.i18n import Catalog

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"


@pytest.fixture(scope="module")
def records():
    return latest_records([FIXTURE])


@pytest.fixture(scope="module")
def data(records):
    return frame(records)


def test_the_latest_record_of_each_cell_wins_across_studies(records, data):
    # 9 lines; 3 cells were measured in both runs, and the later run's record wins
    assert len(data) == len(records) == 6
    assert set(data["status"]) == {"ok", "oom", "error"}
    mobilenet = data[(data["model"] == "mobilenet") & (data["mode"] == "eager")]
    assert list(mobilenet["status"]) == ["error"]  # ok in the smoke run, error in the later one
    assert data["device_name"].str.startswith("CPU").all()


def test_every_model_appears_in_the_table_of_its_device_and_batch(data):
    tables = dict(report_tables.guide_tables(data, Catalog("en")))
    for (device, batch), group in data.groupby(["device_name", "batch_size"]):
        table = tables[f"{device}, batch size {batch}"]
        for label in group["label"]:
            assert f"| {label} |" in table


def test_oom_and_error_cells_say_so(data):
    tables = dict(report_tables.guide_tables(data, Catalog("en")))
    batch2 = tables[next(c for c in tables if c.endswith("batch size 2"))]
    assert "| timm:resnet18 | OOM |" in batch2
    batch1 = tables[next(c for c in tables if c.endswith("batch size 1"))]
    assert "| MobileNet | error |" in batch1
    arabic = dict(report_tables.guide_tables(data, Catalog("ar")))
    assert any("نفاد الذاكرة" in table for table in arabic.values())


def test_speedup_with_interval_and_flags(data):
    tables = dict(report_tables.guide_tables(data, Catalog("en")))
    batch1 = tables[next(c for c in tables if c.endswith("batch size 1"))]
    compiled = data[(data["mode"] == "default") & (data["status"] == "ok")].iloc[0]
    row = next(line for line in batch1.splitlines() if f"| {compiled['label']} |" in line)
    assert f"| {compiled['speedup']:.2f}× | {compiled['ci_low']:.2f}–{compiled['ci_high']:.2f} |" in row
    noisy = pd.Series({"status": "ok", "cv": 0.5, "outlier_fraction": 0.0})
    assert report_tables.is_noisy(noisy) and not report_tables.is_noisy(noisy.replace(0.5, 0.01))


def test_drift_between_standalone_and_interleaved_eager_is_flagged(data):
    drifted = data.copy()
    compiled = (drifted["model"] == "mobilenet") & (drifted["mode"] == "default")
    eager = (drifted["model"] == "mobilenet") & (drifted["mode"] == "eager")
    drifted.loc[eager, ["status", "mean_ms"]] = ["ok", 100.0]
    drifted.loc[compiled, "eager_interleaved_ms"] = 50.0
    batch1 = dict(report_tables.guide_tables(drifted, Catalog("en")))
    row = next(line for table in batch1.values() for line in table.splitlines() if "| MobileNet |" in line)
    assert "drift" in row
    drifted.loc[compiled, "eager_interleaved_ms"] = 95.0  # within 10 %
    batch1 = dict(report_tables.guide_tables(drifted, Catalog("en")))
    row = next(line for table in batch1.values() for line in table.splitlines() if "| MobileNet |" in line)
    assert "drift" not in row


def test_parity_failure_is_flagged(data):
    broken = data.copy()
    broken.loc[broken["mode"] == "default", "parity"] = "fail"
    tables = dict(report_tables.guide_tables(broken, Catalog("en")))
    assert any("parity failed" in table for table in tables.values())


def test_tables_are_pipe_tables_and_rtl_numbers_are_isolated(data):
    for caption, table in report_tables.guide_tables(data, Catalog("ar")):
        lines = table.splitlines()
        assert lines[0].startswith("| ") and lines[1].startswith("|---")
        assert LRI in table and PDI in table
    assert LRI not in report_tables.geomean_table(data, Catalog("en"))


def test_geomean_compile_memory_reference_methodology(data, records):
    catalog = Catalog("en")
    compiled = data[(data["mode"] == "default") & (data["status"] == "ok")]
    assert f"{compiled['speedup'].iloc[0]:.2f}×" in report_tables.geomean_table(data, catalog)
    assert "| MobileNet | default | 1 |" in report_tables.compile_table(data, catalog)
    assert "| MobileNet | default | 1 |" in report_tables.memory_table(data, catalog)
    # the fixture's compiled model (MobileNet, batch 1, default) is in the guide's tables
    reference = report_tables.reference_table(data, catalog)
    assert "A100 (torch 2.0.1)" in reference and "| MobileNet | 1 | default |" in reference
    text = context.methodology_text(data, catalog)
    assert "time.perf_counter_ns" in text and "random" in text
    (device, table), = context.environment_tables(records, catalog)
    assert "| torch_version |" in table and device.startswith("CPU")


def test_missing_results_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no results at"):
        results_files([tmp_path / "nope"])
