"""``coverage``: each machine held out in turn, on records built with a known spread between machines."""

import json
import math

import numpy as np
import pytest

from bench_utils import make_record
from bench_utils.cli import main
from bench_utils.measurement.timing import Measurement
from bench_utils.records.schema import Record
from bench_utils.report.machine_coverage import coverage_lines, figures_by_cell

BLOCKS, RUNS = 10, 5


def gpu_record(machine, model, batch_size, speedup, rng, replicate="r1"):
    """An ok compiled record on the H200 ``machine``: eager 10 ms a call, compiled ``speedup`` times faster, in
    10 pairs of 5-call blocks with a little noise."""
    eager = list(10.0 * np.exp(rng.normal(0, 0.01, BLOCKS * RUNS)))
    compiled = list(10.0 / speedup * np.exp(rng.normal(0, 0.01, BLOCKS * RUNS)))
    cell = dict(study="s", task="image-classification", model=model, batch_size=batch_size, compile_mode="default",
                dtype="float32", device="cuda:0", replicate=replicate)
    environment = {"torch_version": "2.11.0", "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": machine}]}
    return make_record(cell, environment=environment, measurement=Measurement(compiled, 900.0),
                       extra={"speedup": {"mean": speedup, "mean_ci95": [speedup * 0.99, speedup * 1.01],
                                          "pairs": BLOCKS, "eager_values": [value / 1e3 for value in eager],
                                          "block_runs": [RUNS] * BLOCKS}})


def write(folder, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


def study(tmp_path, off=1.0):
    """Six small-batch cells on machines A, B and D (B 5 % faster, D 3 % slower), ViT also on C, ``off`` times A's
    figure there."""
    rng = np.random.default_rng(0)
    records = []
    for index, model in enumerate(["vit", "beit", "resnet", "convnext", "segformer", "detr"]):
        truth = 1.2 + 0.2 * index
        records += [gpu_record(machine, model, 1, truth * factor, rng)
                    for machine, factor in (("GPU-A", 1.0), ("GPU-B", 1.05), ("GPU-D", 0.97))]
    records.append(gpu_record("GPU-C", "vit", 1, 1.2 * off, rng))
    return write(tmp_path / "study", records)


def test_each_machines_figure_is_its_records_and_every_machine_is_held_out(tmp_path):
    folder = study(tmp_path)
    figures = figures_by_cell([Record.of(json.loads(line)) for line in
                               (folder / "results.jsonl").read_text().splitlines()])
    vit = next(cell for key, cell in figures.items() if key[0].model == "vit")
    assert [figure.machine for figure in vit] == ["GPU-A", "GPU-B", "GPU-C", "GPU-D"]
    assert math.exp(vit[0].log_speedup) == pytest.approx(1.2, rel=0.01)
    lines = coverage_lines([folder])
    assert sum(" machine GPU-" in line for line in lines) == 19  # 6 cells x 3 machines, and C
    assert lines[-1].startswith("covered 19 of 19 (binomial 95 %: 0.") and "median width" in lines[-1]
    assert any(line.startswith("a smoke check: 19 held-out figures") for line in lines)
    assert any(line.startswith("small batch: between-machine sd 0.0") for line in lines)


def test_a_machine_far_from_the_others_is_not_covered(tmp_path):
    lines = coverage_lines([study(tmp_path, off=1.6)])
    assert any("machine GPU-C 1.9" in line and line.endswith("NOT covered") for line in lines)
    covered, total = (int(word) for word in lines[-1].split()[1:4:2])
    assert total == 19 and covered < total


def test_the_command_prints_the_check_and_a_missing_study_is_one_line(tmp_path, capsys):
    assert main(["coverage", str(study(tmp_path))]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("covered 19 of 19")
    assert main(["coverage", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.strip().startswith("error: coverage: no results file at")


def test_the_page_shows_every_machines_figure_of_a_cell_measured_on_several(tmp_path):
    from bench_utils.records.results_file import read_records
    from bench_utils.report.i18n import Catalog
    from bench_utils.report.machine_coverage import machines_table

    records = read_records(study(tmp_path) / "results.jsonl")
    table = machines_table(records, Catalog("en"))
    vit = next(line for line in table.splitlines() if line.startswith("| ViT |"))
    assert all(f"{name} " in vit for name in ("A", "B", "C", "D"))  # each machine, by its GPU's UUID
    low, high = (float(bound) for bound in vit.split("|")[6].strip().split("–"))
    assert low < 1.2 < high  # the interval for a new machine's figure around the machines' mean
    assert "batch sizes up to 4: between-machine standard deviation 0.0" in table
    assert all(Catalog(locale).t("machines_spread_pooled", group="g", sd="0.05", dof="3") for locale in ("ar", "es"))
    assert all(machines_table(records, Catalog(locale)) for locale in ("ar", "es"))
    one_machine = [record for record in records if record.environment.gpus[0].uuid == "GPU-A"]
    assert machines_table(one_machine, Catalog("en")) is None  # nothing to show: the tables above have it all


def test_a_record_that_kept_no_calls_enters_with_its_interval_on_its_pairs_degrees_of_freedom(tmp_path):
    from bench_utils.measurement.between_machines import machine_figure
    from bench_utils.report.machine_coverage import _log_ratios

    record = json.loads(json.dumps(gpu_record("GPU-A", "vit", 1, 1.5, np.random.default_rng(0))))
    record["speedup"].pop("eager_values")  # the first lease's records kept no eager calls
    record["speedup"].update(pairs=30, mean_ci95=[1.4, 1.6])
    figure = machine_figure("GPU-A", [_log_ratios(Record.of(record))])
    assert figure.dof == 29 and math.exp(figure.log_speedup) == pytest.approx(1.5)
    half = 2.045 * figure.se  # t(0.975, 29): the record's own interval back
    assert math.exp(figure.log_speedup - half) == pytest.approx(1.4, rel=0.01)


def test_the_page_says_what_each_figure_rests_on_and_where_a_new_machine_would_find_it(tmp_path):
    from bench_utils.report.sections import ReportView

    folder = study(tmp_path)
    rng = np.random.default_rng(1)
    with open(folder / "results.jsonl", "a") as results:  # a cell only machine A measured, in 2 fresh processes
        for replicate in ("r1", "r2"):
            results.write(json.dumps(gpu_record("GPU-A", "mobilenet", 1, 1.5, rng, replicate=replicate)) + "\n")
    view = ReportView([folder], "en")
    data = view.data.set_index("model")
    # the figure shown is the latest machine's (1), of every machine that measured the cell
    assert (data.loc["vit", "machines"], data.loc["vit", "machines_all"]) == (1, 4)
    assert data.loc["beit", "machines_all"] == 3
    assert data.loc["mobilenet", "machines"] == 1 and data.loc["mobilenet", "replicates"] == 2
    # another machine's figure: around the cell's, wider than one machine's own interval (the spread between machines)
    mobilenet = data.loc["mobilenet"]
    assert mobilenet["new_low"] < mobilenet["ci_low"] < 1.5 < mobilenet["ci_high"] < mobilenet["new_high"]
    from bench_utils.report import diagnosis, guide_table

    use = diagnosis.what_to_use(view.data, view.catalog)
    assert "A new machine, 95 %" in use and "Runs · processes · machines" in use
    row = next(line for line in use.splitlines() if "| MobileNet |" in line)
    assert f"| {2 * BLOCKS * RUNS} · 2 · 1 |" in row  # the two replicates' runs pooled, on one machine
    (_, table), = guide_table.guide_tables(view.data, view.catalog)
    assert f"| {BLOCKS * RUNS} · 1 · 1 of 4 |" in next(line for line in table.splitlines() if "| ViT |" in line)
    for locale in ("ar", "es"):
        other = ReportView([folder], locale)
        assert other.catalog.t("col_rests_on") in diagnosis.what_to_use(other.data, other.catalog)
