from dataclasses import replace
import subprocess
import sys

import pytest

from bench_utils.measurement.timing import Measurement
from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.build import failure_record, make_record, measurement_settings
from bench_utils.records.results_file import append_record
from bench_utils.study.pricing.plan_text import format_plan, minutes
from bench_utils.study.pricing.recorded import (estimate_cell_seconds, estimate_kernel_start_seconds,
                                                records_of_environment)
from bench_utils.study.grid.grid_file import load_grid, parse_grid
from bench_utils.study.runner.grid_runner import Runner
from sample_records import Rs

GRID = {"study": "t", "runs": 30, "warmup": 10, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4, 16], "compile_modes": ["eager", "default"]},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager"]}]}
ENV = {"torch_version": "2.15.0", "cpu_model": "Test CPU", "cpu_count_logical": 2}


def cells(**change):
    return {(c.model, c.compile_mode, c.batch_size): c for c in parse_grid({**GRID, **change}).cells}


def record(cell, environment, phases=None, status="ok", runs=None, warmup=None):
    """The record a kernel writes for ``cell``, measured with ``runs`` and ``warmup`` (default: the cell's)."""
    fields = dict(study=cell.study, task=cell.task, model=cell.model, batch_size=cell.batch_size,
                  compile_mode=cell.compile_mode, dtype=cell.dtype, device=cell.device)
    config = measurement_settings(replace(cell.settings, runs=runs or cell.settings.runs,
                                          warmup=cell.settings.warmup if warmup is None else warmup))
    extra = {"phases": phases} if phases is not None else {}
    if status == "ok":
        return make_record(fields, measurement=Measurement([1.0, 2.0, 3.0], 5.0), config=config,
                           environment=environment, extra=extra or None)
    return failure_record(fields, status=status, error=f"{status}!", config=config,
                          environment=environment, **extra)


def write(path, *records):
    for one in records:
        append_record(path, one)
    return path


# --- estimating from records ------------------------------------------------------

def test_the_timed_and_warmup_part_is_scaled_to_the_cells_calls():
    cell = cells()[("resnet", "default", 4)]  # 30 runs + 10 warm-up
    measured = record(cell, ENV, {"cell_s": 10.0, "timed_s": 4.0, "warmup_s": 2.0, "compile_s": 3.0},
                      runs=3, warmup=1)  # 4 calls: ten times fewer
    assert estimate_cell_seconds(cell, Rs([measured])) == pytest.approx(10.0 - 6.0 + 60.0)
    same_calls = record(cell, ENV, {"cell_s": 10.0, "timed_s": 4.0, "warmup_s": 2.0})
    assert estimate_cell_seconds(cell, Rs([same_calls])) == pytest.approx(10.0)


def test_a_records_wait_for_a_compile_process_is_not_the_cells_cost():
    cell = cells()[("resnet", "default", 4)]
    waited = record(cell, ENV, {"cell_s": 19.0, "compile_wait_s": 10.5, "timed_s": 4.0, "warmup_s": 2.0})
    assert estimate_cell_seconds(cell, Rs([waited])) == pytest.approx(8.5)  # the pipeline's wait is priced apart


def test_the_most_recent_record_of_the_same_cell_wins():
    grid = cells()
    cell = grid[("resnet", "default", 4)]
    older = record(cell, ENV, {"cell_s": 5.0})
    newer = record(cell, ENV, {"cell_s": 9.0})
    other_mode = record(grid[("resnet", "eager", 4)], ENV, {"cell_s": 100.0})
    other_batch = record(grid[("resnet", "default", 16)], ENV, {"cell_s": 200.0})
    assert estimate_cell_seconds(cell, Rs([older, newer, other_mode, other_batch])) == 9.0
    assert estimate_cell_seconds(cell, Rs([newer, older])) == 5.0
    assert estimate_cell_seconds(grid[("segformer", "eager", 1)], Rs([older, newer, other_mode])) is None


def test_a_record_without_cell_seconds_is_passed_over():
    cell = cells()[("resnet", "default", 4)]
    timed = record(cell, ENV, {"cell_s": 7.0})
    started_only = record(cell, ENV, {"startup_s": 20.0})
    assert estimate_cell_seconds(cell, Rs([timed, started_only])) == 7.0


def test_only_records_of_this_environment_with_phases_are_read(tmp_path):
    cell = cells()[("resnet", "default", 4)]
    other_torch = {**ENV, "torch_version": "9.9.9"}
    other_cores = {**ENV, "cpu_count_logical": 64}
    path = write(tmp_path / "a.jsonl",
                 record(cell, ENV, {"cell_s": 1.0}),
                 record(cell, other_torch, {"cell_s": 2.0}),
                 record(cell, other_cores, {"cell_s": 3.0}),
                 record(cell, ENV))  # written before records had phases
    second = write(tmp_path / "b.jsonl", record(cell, ENV, {"cell_s": 4.0}))
    found = records_of_environment([path, tmp_path / "missing.jsonl", second], ENV)
    assert [r.phases.cell_s for r in found] == [1.0, 4.0]
    assert records_of_environment([path], other_torch)[0].phases.cell_s == 2.0


def test_a_kernel_start_is_the_median_start_and_build_of_its_model_else_any_start():
    grid = cells()
    resnet, segformer = grid[("resnet", "default", 1)], grid[("segformer", "eager", 1)]
    starts = [record(resnet, ENV, {"startup_s": startup, "load_s": load, "cell_s": 1.0})
              for startup, load in ((10.0, 2.0), (20.0, 4.0), (30.0, 6.0))]
    later_cell = record(resnet, ENV, {"startup_s": 0.0, "load_s": 0.0, "cell_s": 1.0})
    assert estimate_kernel_start_seconds(resnet, Rs([*starts, later_cell])) == 24.0
    # segformer was never built here: the kernel start of another model, without the build
    assert estimate_kernel_start_seconds(segformer, Rs(starts)) == 20.0
    assert estimate_kernel_start_seconds(segformer, Rs([later_cell])) is None


# --- the plan ---------------------------------------------------------------------

@pytest.fixture
def runner(tmp_path):
    return Runner(parse_grid(GRID), tmp_path / "study")


def plan_of(runner, tmp_path):
    return runner.plan(reports_dir=tmp_path / "reports")


def test_unknown_cells_and_starts_are_counted_and_left_out_of_the_total(runner, tmp_path):
    grid = cells()
    env = runner.environment
    write(tmp_path / "reports" / "other" / "results.jsonl",  # another study on this machine
                  record(grid[("resnet", "default", 1)], env,
                         {"startup_s": 20.0, "load_s": 10.0, "cell_s": 60.0}),
                  record(grid[("resnet", "default", 4)], env, {"cell_s": 90.0}),
                  record(grid[("resnet", "eager", 1)], env, {"cell_s": 30.0, "timed_s": 10.0},
                         runs=10, warmup=0))  # eager 1 takes default 1's pairs: 30 - 10 = 20
    plan = plan_of(runner, tmp_path)
    assert plan.records_used == 3  # another study's records count: same machine, same cells
    assert [k.group.group_id for k in plan.kernels] == ["image-classification__resnet__float32__cpu",
                                                        "image-segmentation__segformer__float32__cpu"]
    resnet, segformer = plan.kernels
    assert resnet.cell_seconds == [60.0, 20.0, 90.0, None, None, None]  # batch by batch, eager after the modes
    assert resnet.start_seconds == 30.0 and resnet.start_includes_load
    assert segformer.cell_seconds == [None] and segformer.start_seconds == 20.0
    assert not segformer.start_includes_load
    assert plan.estimated_seconds == pytest.approx(30 + 60 + 90 + 20 + 20)
    text = format_plan(plan)
    assert ("estimated duration: ~3.7 min for 3 of 7 cells (4 cells and 0 kernel starts without an "
            "earlier record: not included); the model build of 1 kernel is unknown: not included") in text
    assert "default 1, eager 1, default 4, eager 4, default 16, eager 16" in text
    assert "segformer__float32__cpu (cpu): eager 1\n  estimate: ~20 s (start 20 s, model build unknown; " \
           "1 cell without an earlier record)" in text


def test_earlier_oom_cells_are_skipped_and_measured_cells_not_listed(runner, tmp_path):
    grid = cells()
    env = runner.environment
    write(runner.results_path,
          record(grid[("resnet", "default", 1)], env, {"startup_s": 5.0, "load_s": 5.0, "cell_s": 50.0}),
          record(grid[("resnet", "eager", 4)], env, {"cell_s": 8.0}, status="oom"),
          record(grid[("resnet", "default", 4)], env, {"cell_s": 3.0}, status="error"))
    plan = plan_of(runner, tmp_path)
    assert plan.already_measured == 2  # ok and oom are done; the error is measured again
    assert [(c.compile_mode, c.batch_size, at) for c, at in plan.skipped_after_oom] == [("eager", 16, 4)]
    resnet = plan.kernels[0]
    assert [(c.compile_mode, c.batch_size) for c in resnet.group.cells] == [
        ("eager", 1), ("default", 4), ("default", 16)]
    assert resnet.cell_seconds == [None, None, None] and plan.cells_to_run == 4  # an error's time says nothing
    text = format_plan(plan)
    assert "resnet__float32__cpu (cpu): eager 1, default 4, default 16\n" in text
    assert "  resnet float32 cpu: eager 16 (out of memory at batch 4)" in text
    assert "already measured on this environment (skipped): 2" in text
    assert "skipped after an earlier out-of-memory error: 1" in text


def test_a_kernel_whose_cells_an_earlier_oom_all_rules_out_does_not_start(runner, tmp_path):
    grid = cells()
    write(runner.results_path, record(grid[("resnet", "eager", 1)], runner.environment, status="oom"),
          *[record(grid[("resnet", "default", batch)], runner.environment) for batch in (1, 4, 16)])
    plan = plan_of(runner, tmp_path)
    assert [k.group.group_id for k in plan.kernels] == ["image-segmentation__segformer__float32__cpu"]
    assert [(c.batch_size, at) for c, at in plan.skipped_after_oom] == [(4, 1), (16, 1)]
    assert "kernel image-classification" not in format_plan(plan)


def test_force_plans_every_cell_again(runner, tmp_path):
    write(runner.results_path, record(cells()[("resnet", "eager", 4)], runner.environment, status="oom"))
    forced = Runner(parse_grid(GRID), runner.out_dir, force=True)
    plan = plan_of(forced, tmp_path)
    assert plan.already_measured == 0 and plan.skipped_after_oom == [] and plan.cells_to_run == 7


def test_records_of_another_environment_give_no_estimate(runner, tmp_path, monkeypatch):
    grid = cells()
    # measured with other runs, so that every cell is measured again, and estimated from them
    write(runner.results_path, *[record(cell, runner.environment, {"startup_s": 5.0, "cell_s": 5.0},
                                        runs=7) for cell in grid.values()])
    assert plan_of(runner, tmp_path).estimated_seconds == 2 * 5.0 + 7 * 5.0
    monkeypatch.setattr(runner, "environment", {**runner.environment, "torch_version": "9.9.9"})
    plan = plan_of(runner, tmp_path)
    assert plan.records_used == 0 and plan.already_measured == 0 and plan.cells_to_run == 7
    text = format_plan(plan)
    assert text.endswith("no earlier records of this environment: no estimate")
    assert "estimated duration" not in text and text.count("estimate: no estimate") == 2


def test_a_fully_measured_grid_has_nothing_to_run(runner, tmp_path):
    write(runner.results_path, *[record(cell, runner.environment, {"cell_s": 5.0})
                                 for cell in cells().values()])
    plan = plan_of(runner, tmp_path)
    assert plan.kernels == [] and plan.already_measured == 7
    assert format_plan(plan).endswith("estimated duration: nothing to run")


def test_the_estimate_modules_import_neither_torch_nor_pandas():
    code = ("import sys, bench_utils.study.pricing.plan_text, bench_utils.study.pricing.cell_costs, "
            "bench_utils.study.runner.time_limit; "
            "print(sorted({'torch', 'pandas'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_dry_run_lists_every_kernel_and_writes_nothing(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", "params/smoke.yaml", "--dry-run",
                             "--out", str(tmp_path)], capture_output=True, text=True, cwd=PROJECT_ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    from bench_utils.study.grid.kernel_groups import kernel_groups

    grid = load_grid(PROJECT_ROOT / "params" / "smoke.yaml")
    for group in kernel_groups(grid.cells):
        assert f"kernel {group.group_id} (" in result.stdout
    assert f"{len(grid.cells)} cells in the grid" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["params/hf-guide.yaml"], "this machine shows 0 CUDA device(s)"),
    (["params/smoke.yaml", "--devices", "cpu,cpu"], "device cpu is listed twice"),
])
def test_a_dry_run_refuses_what_the_run_would_refuse(tmp_path, args, message):
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", *args, "--dry-run", "--out", str(tmp_path)],
                            capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_an_eager_cell_is_estimated_as_the_run_will_measure_it(runner, tmp_path):
    grid = cells()
    eager = grid[("resnet", "eager", 1)]
    shared = record(eager, ENV, {"cell_s": 0.5, "timed_s": 0.0})
    shared["shared_measurement"] = {"with_compile_mode": "default"}
    standalone = record(eager, ENV, {"cell_s": 9.0, "timed_s": 6.0, "warmup_s": 2.0})
    assert estimate_cell_seconds(eager, Rs([shared]), shares_pairs=True) == 0.5
    assert estimate_cell_seconds(eager, Rs([shared]), shares_pairs=False) is None  # timed elsewhere then
    assert estimate_cell_seconds(eager, Rs([standalone]), shares_pairs=True) == pytest.approx(1.0)  # no runs
    assert estimate_cell_seconds(eager, Rs([standalone, shared]), shares_pairs=False) == pytest.approx(9.0)
    assert estimate_cell_seconds(eager, Rs([record(eager, ENV, {"cell_s": 3.0}, status="error")])) is None


# --- a priori, for a named GPU ----------------------------------------------------

H100 = {"torch_version": "2.11.0", "driver_version": "580.1", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}


def test_a_device_model_prices_unrecorded_cells_a_priori_and_recorded_ones_by_their_records(tmp_path):
    from bench_utils.study.pricing.prior import CellShape, Span

    runner = Runner(parse_grid({**GRID, "devices": ["cuda"], "replicates": 1}), tmp_path / "study")
    grid = {(c.model, c.compile_mode, c.batch_size): c for c in runner.grid.cells}
    on_h100 = record(grid[("resnet", "default", 1)], H100, {"startup_s": 7.0, "load_s": 3.0, "cell_s": 123.0})
    write(tmp_path / "reports" / "other" / "results.jsonl", on_h100,
          record(grid[("resnet", "default", 4)], {**H100, "gpus": [{"index": 0, "name": "NVIDIA L4"}]},
                 {"cell_s": 999.0}))  # another GPU's: neither a record of this one nor its calibration
    plan = runner.plan(reports_dir=tmp_path / "reports", device_model="H100")
    resnet, segformer = plan.kernels
    assert plan.prior.device == "H100 SXM" and plan.prior.calibrated_on == 1 and plan.records_used == 1
    assert resnet.prior_cells[0] == Span.exact(123.0) and resnet.prior_start == Span.exact(10.0)
    # the work scaled as the recorded cell's was (its record has no energy phase), the energy windows as they are
    ratio = 123.0 / plan.prior.parts(CellShape.of_cell(grid[("resnet", "default", 1)]), False, False)[0].point
    # a GPU's host has cores to spare: compile processes keep its cells' cold compiles, which compile warm
    assert plan.compile_ahead and CellShape.of_cell(grid[("resnet", "default", 4)], ahead=True).cold_kept
    work, energy = plan.prior.parts(CellShape.of_cell(grid[("resnet", "default", 4)], ahead=True), False, False)
    default_4 = [(c.compile_mode, c.batch_size) for c in resnet.group.cells].index(("default", 4))
    assert resnet.prior_cells[default_4].point == pytest.approx(work.point * ratio + energy.point)
    assert all(span.low <= span.point <= span.high for span in resnet.prior_cells + segformer.prior_cells)
    text = format_plan(plan)
    assert "estimates from 1 earlier record on H100 SXM" in text
    assert "  estimate: a-priori for H100 SXM: ~" in text and "1 cell from records on H100 SXM" in text
    assert "a-priori estimate for H100 SXM (a model, not a measurement): ~" in text
    assert "for 7 of 7 cells, 2 kernel starts included" in text and "calibrated on 1 cell recorded there" in text
    assert "compile process(es) beside the kernels" in text
    assert "the kernel waiting for the compile processes and compiling cold itself" in text
    own, _ = plan.kernel_work()
    assert own.point == pytest.approx(plan.pipeline_at_point.kernel_work_s)  # the replay's kernel: the cells priced
    shared = plan.process_work.point
    assert shared == pytest.approx(plan.pipeline_at_point.process_work_s) and shared > 0
    assert (f"the work to share: the kernel's own {minutes(own)}, its waits apart; each compile process's "
            f"{minutes(plan.process_work)}") in text


def test_a_later_replicate_whose_first_an_earlier_run_measured_is_priced_with_its_cold_compile(tmp_path):
    from bench_utils.study.pricing.prior import CellShape

    grid = parse_grid({**GRID, "devices": ["cuda"], "replicates": 2, "blocks": 2, "compile_ahead": False})
    by_name = {(c.model, c.compile_mode, c.batch_size, c.settings.replicate): c for c in grid.cells}
    runner = Runner(grid, tmp_path / "study", environment=H100)

    def price(plan, cell):
        kernel = next(k for k in plan.kernels if cell in k.group.cells)
        return kernel.prior_cells[kernel.group.cells.index(cell)]

    later = by_name[("resnet", "default", 4, "r2")]
    both = runner.plan(reports_dir=tmp_path / "reports", device_model="H100")
    # the first replicate measured, by an earlier run (no kept caches on a fresh machine): the second compiles cold
    write(runner.results_path, *(record(cell, H100) for cell in grid.cells if cell.settings.replicate == "r1"))
    alone = runner.plan(reports_dir=tmp_path / "reports", device_model="H100")
    assert later in [c for k in alone.kernels for c in k.group.cells] and alone.cells_to_run < both.cells_to_run
    prior = alone.prior
    assert price(both, later).point == pytest.approx(prior.cell(CellShape.of_cell(later), False, True).point)
    cold = prior.cell(CellShape.of_cell(later, kept_before=False), False, False).point  # not its mode's first batch
    assert price(alone, later).point == pytest.approx(cold) and cold > price(both, later).point + 1.0


def test_the_time_limit_prices_a_later_replicate_warm_only_where_its_cold_compile_is_kept_here(tmp_path, monkeypatch):
    import tempfile

    from bench_utils.study.pricing.cell_costs import CellCosts
    from bench_utils.study.pricing.prior import Prior
    from bench_utils.study.grid.kernel_groups import kernel_groups
    from bench_utils.variants.kept_caches import KeptCaches, default_root, kept_cell

    grid = parse_grid({**GRID, "devices": ["cuda"], "replicates": 2, "blocks": 2, "compile_ahead": False})
    later = [c for c in grid.cells if c.model == "resnet" and c.settings.replicate == "r2"]
    group = next(g for g in kernel_groups(later))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the kept caches' root, this test's own
    (tmp_path / "tmp").mkdir()
    results = tmp_path / "study" / "results.jsonl"
    costs = CellCosts(results, H100, Prior("H100 SXM"), reports_dir=tmp_path / "reports")
    default_4 = next(i for i, c in enumerate(group.cells) if (c.compile_mode, c.batch_size) == ("default", 4))
    cold = costs.of_kernel(group, list(group.cells))[1][default_4]
    cell = group.cells[default_4]
    caches = KeptCaches(default_root(results.parent))
    kept = kept_cell(caches, cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.settings, cell.dtype,
                     cell.device)
    assert caches.root.is_relative_to(tmp_path)
    kept.folder.mkdir(parents=True)
    kept.keep([1000.0], {"graphs": 1}, "replicate r1")  # its first replicate measured here, earlier in this run
    warm = costs.of_kernel(group, list(group.cells))[1][default_4]
    assert cold > warm + 1.0


def test_with_compile_ahead_every_kernel_but_the_first_pays_only_what_follows_its_gate(tmp_path):
    from bench_utils.study.pricing.prior import ENDS

    plans = {ahead: Runner(parse_grid({**GRID, "devices": ["cuda"], "replicates": 1, "compile_ahead": ahead}),
                           tmp_path / "study").plan(reports_dir=tmp_path / "reports", device_model="H100")
             for ahead in (True, False)}
    assert plans[True].compile_ahead and not plans[False].compile_ahead
    (first, second), (cold_first, cold_second) = plans[True].kernels, plans[False].kernels
    assert first.prior_start == cold_first.prior_start  # the run's first kernel: a full start
    saved = [cold - ahead for cold, ahead in zip(
        (cold_second.prior_start.low, cold_second.prior_start.point, cold_second.prior_start.high),
        (second.prior_start.low, second.prior_start.point, second.prior_start.high))]
    build = plans[True].prior.costs[second.group.first.model]["build_s_cpu"]
    assert saved == pytest.approx([ends.start_s + build * ends.build_factor - ends.ahead_start_s
                                   for ends in ENDS])  # its boot and its model's build on the host, off the path
    assert all(value > 0 for value in saved)
    # the total: its cells (priced warm where compiled ahead) and the starts, the second's boot gone, and what the
    # pipeline adds (the kernel's waits for the processes, its own cold compiles): none without compile processes
    cells = sum(span.point for span in second.prior_cells + first.prior_cells)
    pipeline = plans[True].pipeline
    assert plans[False].pipeline is None and pipeline is not None and pipeline.point > 0
    assert plans[True].span()[0].point == pytest.approx(cells + first.prior_start.point + second.prior_start.point
                                                        + pipeline.point)
    # the point's simulation: on its own figures, what it adds is what it found
    at_point = plans[True].pipeline_at_point
    assert at_point.total_s - (cells + first.prior_start.point + second.prior_start.point) == pytest.approx(
        pipeline.point)


def test_the_pipeline_is_simulated_on_the_cells_compile_processes_take_at_the_priors_figures(tmp_path):
    from bench_utils.study.pricing.pipeline_prices import BESIDE_COMPILE_FACTOR, PROCESS_SETUP_S, kernel_runs
    from bench_utils.study.pricing.prior import ENDS

    plan = Runner(parse_grid({**GRID, "devices": ["cuda"], "replicates": 2, "blocks": 2, "compile_ahead": True}),
                  tmp_path / "study").plan(reports_dir=tmp_path / "reports", device_model="H100")
    prior = plan.prior
    for end, ends in enumerate(ENDS):
        runs = kernel_runs(plan.kernels, prior, end)
        for kernel, run in zip(plan.kernels, runs):
            cells = kernel.group.cells
            # a first replicate's compiled cells, none of the second's and no eager cell
            assert sorted(run.ahead) == [i for i, cell in enumerate(cells) if cell.compile_mode != "eager"
                                         and cell.settings.replicate == "r1"]
            row = prior.costs[cells[0].model]
            modes: set[str] = set()
            for i, ahead in run.ahead.items():
                alone = prior.compile_seconds(row, cells[i].compile_mode, ends)  # nothing recorded: uncalibrated
                # compiled cold by the kernel: the cold compile, less the warm one it then skips after the first
                # batch size of its mode
                own = alone * (1 - ends.warm_compile_share) if cells[i].compile_mode in modes else alone
                modes.add(cells[i].compile_mode)
                assert (ahead.own_cold_s, ahead.cold_s) == pytest.approx((own, alone * BESIDE_COMPILE_FACTOR[end]))
                assert ahead.row == cells[i].batch_size
            assert run.process_setup_s == pytest.approx(PROCESS_SETUP_S[end] + row["build_s_cpu"] * ends.build_factor)
            assert run.cells_s == [span.at(end) for span in kernel.prior_cells]
    assert any(run.ahead for run in kernel_runs(plan.kernels, prior, 1))
    assert not all(run.ahead for run in kernel_runs(plan.kernels, prior, 1))  # the second replicates' kernels
    # the second replicates alone (their firsts measured by an earlier run): compiled ahead, as the runner does
    later = [kernel for kernel in plan.kernels if kernel.group.first.settings.replicate == "r2"]
    assert [sorted(run.ahead) for run in kernel_runs(later, prior, 1)] == [
        [i for i, cell in enumerate(kernel.group.cells) if cell.compile_mode != "eager"] for kernel in later]


def test_a_kernel_started_ahead_is_estimated_from_kernels_started_ahead_only(tmp_path):
    grid = cells()
    cold = record(grid[("resnet", "eager", 1)], ENV, {"startup_s": 7.0, "load_s": 1.0, "cell_s": 1.0})
    ahead = record(grid[("resnet", "eager", 4)], ENV, {"startup_s": 0.5, "started_ahead_s": 6.0, "gate_wait_s": 2.0,
                                                       "load_s": 1.0, "cell_s": 1.0})
    records = records_of_environment([write(tmp_path / "results.jsonl", cold, ahead)], ENV)
    first = grid[("resnet", "eager", 1)]
    assert estimate_kernel_start_seconds(first, records) == 8.0
    assert estimate_kernel_start_seconds(first, records, ahead=True) == 1.5
    assert estimate_kernel_start_seconds(first, records[:1], ahead=True) is None  # no cold start stands for one


def test_dry_run_prices_the_guides_grid_on_an_h100_in_minutes_with_a_range(tmp_path):
    import re

    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", "params/hf-guide.yaml", "--dry-run",
                             "--device-model", "H100", "--out", str(tmp_path)], capture_output=True, text=True,
                            cwd=PROJECT_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    total = next(line for line in result.stdout.splitlines() if line.startswith("a-priori estimate for"))
    # the guide's 80 cells in 3 replicates each on a GPU: 240 cells in 36 kernels
    assert re.fullmatch(r"a-priori estimate for H100 SXM \(a model, not a measurement\): ~(\d+) min \((\d+)-(\d+) "
                        r"min\) for 240 of 240 cells, 36 kernel starts included", total), total
    point, low, high = map(int, re.search(r"~(\d+) min \((\d+)-(\d+) min\)", total).groups())
    assert 0 < low < point < high
    assert result.stdout.count("  estimate: a-priori for H100 SXM: ~") == 36
    assert "uncalibrated: no cell recorded on it yet" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_device_model_is_one_line_naming_the_known_ones_and_exit_2():
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", "params/hf-guide.yaml", "--dry-run",
                             "--device-model", "RTX 4090"], capture_output=True, text=True, cwd=PROJECT_ROOT,
                            timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --device-model 'RTX 4090' is not a GPU with datasheet peaks here; known: H100 SXM, H100 NVL, "
        "H100 PCIe, H200 SXM, H200 NVL, A100 SXM, A100 PCIe, L4, T4, V100 SXM2, V100 PCIe, V100S PCIe"]
