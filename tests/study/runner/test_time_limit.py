from dataclasses import replace
from functools import partial
import subprocess
import sys
from types import SimpleNamespace

import pytest

from bench_utils.measurement.timing import Measurement
from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.build import make_record, measurement_settings
from bench_utils.records.results_file import append_record, read_records
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.grid.kernel_groups import kernel_groups
from bench_utils.study.runner.grid_runner import Runner
from bench_utils.study.runner.run_command import what_is_left
from bench_utils.study.runner.time_limit import (LIMIT_REACHED_EXIT, LIMIT_TOO_SHORT_EXIT, UNKNOWN_CELL_S, cell_costs,
                                                 TimeLimit, parse_duration)
from fake_notebook import FakeNotebook
from bench_utils.environment.capture import capture_environment

GRID = {"study": "t", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4, 16], "compile_modes": ["eager", "default"]},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager"]}]}


@pytest.mark.parametrize("text,seconds", [("9m", 540), ("540s", 540), ("1h", 3600), ("540", 540),
                                          ("1.5h", 5400), (" 2 min ", 120)])
def test_durations_are_read_in_seconds_minutes_or_hours(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "9x", "-5m", "0", "m", "9m30"])
def test_a_bad_duration_is_one_clear_error(text):
    with pytest.raises(ValueError, match="give a positive duration such as 9m, 540s, 1h or 540"):
        parse_duration(text)


def test_the_cells_that_fit_are_the_first_whose_running_sum_ends_before_the_deadline():
    now, said = [100.0], []
    cells, group = ["a", "b", "c", "d"], SimpleNamespace(group_id="g")
    limit = TimeLimit(60, lambda group, todo, figure="high": (10.0, [20.0, 20.0, 15.0, 1.0][-len(todo):]),
                      clock=lambda: now[0])
    # a start of 10 s, then 20 + 20: 50 s; c would end at 65 s. d would fit, but it comes after c
    limit.say = said.append
    assert limit.fitting(group, cells) == ["a", "b"] and limit.held_back
    assert said == ["[run] time limit: 2 of the 4 cell(s) of g fit in the 1.0 min left (1.1 min with the next); "
                    "the rest wait for a later run"]
    now[0] = 155.0  # 5 s left: not even the kernel's start fits
    assert limit.fitting(group, ["c", "d"]) == []
    assert TimeLimit(60, lambda group, todo, figure="high": (0.0, [1.0]), started=0.0, clock=lambda: 59.5).left() == 0.5


def _priced(high: float, point: float):
    """Costs of a kernel start of 10 s and cells of ``high`` s by the high figure, ``point`` s by the point."""
    return lambda group, todo, figure="high": (10.0, [high if figure == "high" else point] * len(todo))


def test_a_first_kernel_priced_over_the_limit_by_its_high_figure_starts_its_first_cell_on_its_point_figure():
    said, group = [], SimpleNamespace(group_id="g")
    limit = TimeLimit(60, _priced(high=100.0, point=40.0), clock=lambda: 0.0)
    limit.say = said.append
    # an uncalibrated prior's high figure fits no short limit: without a record nothing would ever calibrate it
    assert limit.fitting(group, ["a", "b"]) == ["a"] and limit.started_any and limit.needs is None
    assert "fits only by its estimate's point figure" in said[0]
    assert limit.fitting(group, ["b"]) == []  # once a kernel ran, the high figure rules again


def test_a_kernel_whose_point_figure_exceeds_the_limit_says_how_long_a_limit_it_needs():
    said, group = [], SimpleNamespace(group_id="g")
    limit = TimeLimit(60, _priced(high=100.0, point=80.0), clock=lambda: 0.0)
    limit.say = said.append
    assert limit.fitting(group, ["a"]) == [] and not limit.started_any
    assert limit.needs == 90.0 and "needs a limit of 1.5 min at least" in said[0]
    assert LIMIT_TOO_SHORT_EXIT not in (0, 1, 2, LIMIT_REACHED_EXIT)  # a status of its own: running again won't help


def estimated(cell, environment, seconds, startup_s=0.0, energy_s=0.0):
    """A record that prices ``cell`` but is not this grid's measurement (other runs): it is run again."""
    fields = dict(study=cell.study, task=cell.task, model=cell.model, batch_size=cell.batch_size,
                  compile_mode=cell.compile_mode, dtype=cell.dtype, device=cell.device)
    config = measurement_settings(replace(cell.settings, runs=7))
    return make_record(fields, measurement=Measurement([1.0, 2.0, 3.0], 5.0), config=config,
                       environment=environment,
                       extra={"phases": {"cell_s": seconds, "startup_s": startup_s, "energy_s": energy_s}})


def runner_under(tmp_path, notebook, seconds, prior=None, grid=GRID, environment=None):
    """A runner built with a limit of ``seconds``, its cells priced by the records of its own and of the studies
    under ``tmp_path / "reports"``, else by ``prior``."""
    environment = environment or capture_environment()
    costs = partial(cell_costs, tmp_path / "study" / "results.jsonl", environment, prior,
                    reports_dir=tmp_path / "reports")
    return Runner(parse_grid(grid), tmp_path / "study", executor=notebook, environment=environment,
                  time_limit=TimeLimit(seconds, costs))


def limited_runner(tmp_path, notebook, seconds, cell_seconds, startup_s=1.0):
    """A runner under a limit of ``seconds``, its cells priced by records in another study's results file."""
    runner = runner_under(tmp_path, notebook, seconds)
    other = tmp_path / "reports" / "other" / "results.jsonl"
    for cell in runner.grid.cells:
        append_record(other, estimated(cell, runner.environment, cell_seconds(cell), startup_s))
    return runner


def test_a_cell_predicted_to_overrun_the_limit_is_not_started_and_what_is_left_is_printed(tmp_path):
    notebook = FakeNotebook()
    runner = limited_runner(tmp_path, notebook, 120, lambda cell: 500.0 if cell.model == "segformer" else 2.0)
    outcome = runner.run()
    # resnet: a 1 s start and 6 cells of 2 s fit in 120 s; segformer's 500 s cell does not
    assert [call[0] for call in notebook.calls] == ["resnet"] * 6
    assert outcome.counts() == {"ok": 6} and outcome.not_run == 1 and outcome.signal is None
    assert runner.time_limit.held_back and not runner.time_limit.reached
    text, status = what_is_left(runner, None, outcome, reports_dir=tmp_path / "reports")
    assert status == LIMIT_REACHED_EXIT == 3
    assert text.startswith("time limit 2.0 min: no other cell would finish before the limit; left for a later "
                           "run: 1 cell(s) in 1 kernel(s), estimated ~8.3 min (8.3-8.3 min)")  # start and cell: 501 s
    assert "\n  kernel image-segmentation__segformer__float32__cpu: eager 1: ~8.3 min (8.3-8.3 min)" in text


def test_a_kernel_is_cut_to_the_cells_that_fit_and_unpriced_cells_follow_the_conservative_rule(tmp_path):
    notebook = FakeNotebook()
    runner = runner_under(tmp_path, notebook, UNKNOWN_CELL_S - 1)
    for cell in runner.grid.cells:  # only resnet's default cells are priced: 30 s each
        if cell.model == "resnet" and cell.compile_mode == "default":
            append_record(tmp_path / "reports" / "o" / "results.jsonl", estimated(cell, runner.environment, 30.0, 5.0))
    outcome = runner.run()
    # 5 + 3 x 30 s fit, and resnet's eager cells take the default cells' eager series: they run nothing. An eager
    # cell timed by itself that nothing prices counts UNKNOWN_CELL_S: segformer's waits
    assert [(call[2], call[1]) for call in notebook.calls] == [("default", 1), ("eager", 1), ("default", 4),
                                                                ("eager", 4), ("default", 16), ("eager", 16)]
    assert outcome.not_run == 1


def test_the_limit_ends_a_running_cell_cleanly_and_a_rerun_resumes(tmp_path):
    hangs = FakeNotebook(hang={("resnet", 4)})  # runs until it is told to stop
    runner = limited_runner(tmp_path, hangs, 3.0, lambda cell: 0.01, startup_s=0.1)
    outcome = runner.run()
    assert runner.time_limit.reached and outcome.signal is None
    records = read_records(runner.results_path)
    assert [(r.cell.compile_mode, r.cell.batch_size) for r in records] == [("default", 1), ("eager", 1)]  # no error
    assert outcome.not_run == 5
    text, status = what_is_left(runner, None, outcome, reports_dir=tmp_path / "reports")
    assert status == LIMIT_REACHED_EXIT and "the limit was reached; left for a later run: 5 cell(s)" in text
    assert "default 4, eager 4, default 16, eager 16" in text
    again = FakeNotebook()
    summary = Runner(parse_grid(GRID), tmp_path / "study", executor=again).run()
    assert summary.resumed == 2 and summary.counts() == {"ok": 5} and summary.exit_status() == 0
    assert len(read_records(runner.results_path)) == 7


def test_no_limit_effect_leaves_the_exit_status_alone(tmp_path):
    runner = limited_runner(tmp_path, FakeNotebook(), 3600, lambda cell: 0.01)
    outcome = runner.run()
    assert outcome.counts() == {"ok": 7}
    assert what_is_left(runner, None, outcome, reports_dir=tmp_path / "reports") == ("", 0)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "bench_utils", "run", *args], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=300)


def test_a_bad_limit_and_a_limit_on_a_ray_cluster_are_one_line_and_exit_2():
    bad = run_cli("params/smoke.yaml", "--time-limit", "nine minutes")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --time-limit 'nine minutes': give a positive duration such as 9m, 540s, 1h or 540 (seconds)"]
    ray = run_cli("params/smoke.yaml", "--executor", "ray", "--time-limit", "9m")
    assert ray.returncode == 2 and ray.stderr.strip().splitlines() == [
        "error: --time-limit and --device-model are for the local executor: not with --executor ray"]


def test_on_a_known_gpu_unrecorded_cells_cost_the_priors_high_figure_until_a_record_calibrates_it(tmp_path):
    from bench_utils.study.pricing.prices import Prices, gpu_of
    from bench_utils.study.pricing.prior import Shape

    h100 = {**capture_environment(), "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}], "driver_version": "1"}
    runner = Runner(parse_grid({**GRID, "devices": ["cuda"], "replicates": 1}), tmp_path / "study",
                    executor=FakeNotebook(), environment=h100)
    assert gpu_of(h100, None) == "H100 SXM" and gpu_of(h100, "L4") == "L4"
    costs = partial(cell_costs, runner.results_path, h100, "H100 SXM", reports_dir=tmp_path / "reports")
    group = kernel_groups(runner.grid.cells)[0]
    cells = list(group.cells)
    start, seconds = costs(group, cells)
    assert [(c.compile_mode, c.batch_size) for c in cells[:3]] == [("default", 1), ("eager", 1), ("default", 4)]
    prior = Prices([], h100, "H100 SXM").prior
    assert start == prior.start("resnet").high and seconds[2] == prior.cell(Shape.of_cell(cells[2], warm=False)).high
    assert seconds[1] == 0.5  # eager 1 takes default 1's pairs: it runs nothing
    # the first cell is recorded on this GPU at twice the prior's work (its energy windows apart): the rest now cost
    # twice their work, the limit counting the calibrated high figure (one ratio: +25 %), so that the last cell
    # started rarely overruns
    recorded = Shape.of_cell(cells[0], warm=False)  # the record has no warm compile
    work = (prior.cell(recorded) - prior.energy(recorded)).point
    first = estimated(cells[0], h100, 2 * work + 3.0, energy_s=3.0)
    first["config"]["runs"] = cells[0].settings.runs  # this grid's own measurement, as the run writes it
    append_record(runner.results_path, first)
    default_4 = Shape.of_cell(cells[2])  # now the first of its mode in the kernel: it compiles warm too
    work, energy = prior.cell(default_4) - prior.energy(default_4), prior.energy(default_4)
    _, points = costs(group, cells[2:], figure="point")
    assert points[0] == pytest.approx(2 * work.point + energy.point)
    _, highs = costs(group, cells[2:])
    assert highs[0] == pytest.approx(1.25 * 2 * work.point + energy.high)


def test_a_limit_that_starts_no_cell_says_so_rather_than_nothing_to_do(tmp_path):
    from bench_utils.study.runner.progress_display import format_run_outcome

    notebook = FakeNotebook()
    runner = runner_under(tmp_path, notebook, 60)
    outcome = runner.run()  # nothing prices a cell: the conservative rule's 5 minutes fit in no minute
    assert notebook.calls == [] and outcome.not_run == 7
    summary = format_run_outcome(outcome, runner.results_path)
    assert "nothing to do" not in summary and "7 cell(s) not run" in summary and "slowest" not in summary
    text, status = what_is_left(runner, None, outcome, reports_dir=tmp_path / "reports")
    assert status == LIMIT_TOO_SHORT_EXIT  # running the same command again would start nothing either
    assert text.startswith("time limit 1.0 min: no kernel fits: give --time-limit 7.0 min at least; left for a "
                           "later run: 7 cell(s) in 2 kernel(s), no estimate (no record prices them)\n")
    assert "run the same command again" not in text


def test_a_kernel_cut_by_the_limit_leaves_no_larger_batch_to_run_after_an_out_of_memory_error(tmp_path):
    notebook = FakeNotebook(oom={("resnet", 1)})
    # a start of 1 s and cells of 40 s in 60 s: one cell a kernel, so batch 4 is not in batch 1's kernel
    runner = limited_runner(tmp_path, notebook, 60, lambda cell: 40.0)
    outcome = runner.run()
    assert sorted(notebook.calls) == [("resnet", 1, "default", "cpu"), ("resnet", 1, "eager", "cpu"),
                                      ("segformer", 1, "eager", "cpu")]  # no larger batch of an OOM's mode ran
    skipped = [(r.cell.compile_mode, r.cell.batch_size) for r in read_records(runner.results_path)
               if r.skipped_after_oom is not None]
    assert sorted(skipped) == [("default", 4), ("default", 16), ("eager", 4), ("eager", 16)]
    assert outcome.counts() == {"oom": 2, "skipped": 4, "ok": 1}


def test_the_limit_prices_a_later_replicate_warm_only_where_its_cold_compile_is_kept_here(tmp_path, monkeypatch):
    import tempfile

    from bench_utils.variants.kept_caches import KeptCaches, default_root, kept_cell

    grid = parse_grid({**GRID, "devices": ["cuda"], "replicates": 2, "blocks": 2})
    later = [c for c in grid.cells if c.model == "resnet" and c.settings.replicate == "r2"]
    group = kernel_groups(later)[0]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the kept caches' root, this test's own
    (tmp_path / "tmp").mkdir()
    results = tmp_path / "study" / "results.jsonl"
    costs = partial(cell_costs, results, capture_environment(), "H100 SXM", reports_dir=tmp_path / "reports")
    default_4 = next(i for i, c in enumerate(group.cells) if (c.compile_mode, c.batch_size) == ("default", 4))
    cold = costs(group, list(group.cells))[1][default_4]
    cell = group.cells[default_4]
    caches = KeptCaches(default_root(results.parent))
    kept = kept_cell(caches, cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.settings, cell.dtype,
                     cell.device)
    assert caches.root.is_relative_to(tmp_path)
    kept.folder.mkdir(parents=True)
    kept.keep([1000.0], {"graphs": 1}, "replicate r1", None)  # its first replicate measured here, earlier in this run
    warm = costs(group, list(group.cells))[1][default_4]
    assert cold > warm + 1.0
