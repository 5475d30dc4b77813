"""Unsteady cells measured once more (``runner.unsteady``)."""

import dataclasses

from bench_utils.measurement.timing import Measurement
from bench_utils.records.build import make_record
from bench_utils.records.results_file import read_records
from bench_utils.records.schema import Record
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner.grid_runner import Runner
from bench_utils.study.runner.progress_display import format_run_outcome
from bench_utils.study.runner.unsteady import regime_shifts, remeasures
from fake_notebook import FakeNotebook

GRID = {"study": "t", "runs": 3, "warmup": 1, "blocks": 1, "remeasure_unsteady": True, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager", "default"]}]}
CELL = dict(study="t", task="image-classification", model="resnet", batch_size=1, compile_mode="default",
            dtype="float32", device="cpu")


def compiled(calls_ms, eager_s):
    return Record.from_json(make_record(CELL, measurement=Measurement(calls_ms, 5.0), environment={},
                                        extra={"speedup": {"mean": 2.0, "block_runs": [3] * 20,
                                                           "eager_values": eager_s}}))


def test_a_side_whose_block_means_change_level_is_a_regime_shift_and_a_steady_one_is_not():
    steady_eager = [0.002 + 0.00001 * (i % 3) for i in range(60)]
    shifted = regime_shifts(compiled([1.0] * 30 + [1.6] * 30, steady_eager))
    assert set(shifted) == {"compiled"} and 1.55 < shifted["compiled"].ratio < 1.65
    both = regime_shifts(compiled([1.0] * 30 + [1.6] * 30, [0.002] * 24 + [0.004] * 36))
    assert set(both) == {"eager", "compiled"}
    assert regime_shifts(compiled([1.0 + 0.01 * (i % 3) for i in range(60)], steady_eager)) == {}
    # a record without its blocks (the first GPU run's) says nothing
    plain = Record.from_json(make_record(CELL, measurement=Measurement([1.0, 2.0, 3.0], 5.0), environment={}))
    assert regime_shifts(plain) == {}


def test_by_default_a_gpu_study_measures_an_unsteady_cell_again_and_a_cpu_study_does_not():
    cells = {cell.device: cell for cell in parse_grid({**GRID, "remeasure_unsteady": None, "replicates": 1,
                                                       "devices": ["cpu", "cuda"]}).cells}
    assert remeasures(cells["cuda"]) and not remeasures(cells["cpu"])
    off = dataclasses.replace(cells["cuda"], settings=dataclasses.replace(cells["cuda"].settings,
                                                                          remeasure_unsteady=False))
    assert not remeasures(off)


def test_an_unsteady_cell_is_measured_once_more_as_one_more_replicate_after_the_grid(tmp_path):
    notebook = FakeNotebook(shifted={("resnet", 4, "r1")})
    runner = Runner(parse_grid(GRID), tmp_path, executor=notebook)
    outcome = runner.run()
    records = read_records(tmp_path / "results.jsonl")
    cells = [(r.cell.compile_mode, r.cell.batch_size, r.cell.replicate) for r in records]
    # the grid's 4 cells, then the unsteady one again, in a fresh kernel
    assert cells == [("default", 1, "r1"), ("eager", 1, "r1"), ("default", 4, "r1"), ("eager", 4, "r1"),
                     ("default", 4, "r2")]
    assert outcome.again == 1 and outcome.counts() == {"ok": 5} and outcome.exit_status() == 0
    assert "(1 of them unsteady cells measured once more, as one more replicate)" in format_run_outcome(
        outcome, runner.results_path)
    # once: a second run measures nothing more, though the first replicate stays unsteady
    again = Runner(parse_grid(GRID), tmp_path, executor=FakeNotebook(shifted={("resnet", 4, "r1")})).run()
    assert again.again == 0 and not again.outcomes


def test_without_the_setting_a_cpu_study_measures_each_cell_once(tmp_path):
    notebook = FakeNotebook(shifted={("resnet", 4, "r1")})
    outcome = Runner(parse_grid({**GRID, "remeasure_unsteady": None}), tmp_path, executor=notebook).run()
    assert outcome.again == 0 and len(read_records(tmp_path / "results.jsonl")) == 4


def test_one_unsteady_mode_of_a_row_brings_its_whole_row_back_beside_one_eager_series(tmp_path):
    grid = {**GRID, "grids": [{"models": ["resnet"], "batch_sizes": [1, 4],
                               "compile_modes": ["eager", "default", "reduce-overhead"]}]}
    notebook = FakeNotebook(shifted={("resnet", 4, "r1", "reduce-overhead")})
    outcome = Runner(parse_grid(grid), tmp_path, executor=notebook).run()
    again = [(r.cell.compile_mode, r.cell.batch_size) for r in read_records(tmp_path / "results.jsonl")
             if r.cell.replicate == "r2"]
    assert again == [("default", 4), ("reduce-overhead", 4)] and outcome.again == 2
