"""The dry run's plan (``pricing.plan``): its kernels, what it resumes and rules out, its prices and its listing."""

from dataclasses import replace
import re
import subprocess
import sys

import pytest

from bench_utils.measurement.timing import Measurement
from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.build import failure_record, make_record, measurement_settings
from bench_utils.records.results_file import append_record
from bench_utils.study.grid.grid_file import load_grid, parse_grid
from bench_utils.study.pricing.plan import format_plan, minutes
from bench_utils.study.pricing.prior import Prior, Shape, Span
from bench_utils.study.runner.grid_runner import Runner

GRID = {"study": "t", "runs": 30, "warmup": 10, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4, 16], "compile_modes": ["eager", "default"]},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager"]}]}
H100 = {"torch_version": "2.11.0", "driver_version": "580.1", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}


def cells(grid):
    return {(c.model, c.compile_mode, c.batch_size, c.settings.replicate): c for c in grid.cells}


def record(cell, environment, phases=None, status="ok", runs=None):
    """The record a kernel writes for ``cell``, measured with ``runs`` (default: the cell's)."""
    fields = cell.identity().cell_block()
    config = measurement_settings(replace(cell.settings, runs=runs or cell.settings.runs))
    extra = {"phases": phases} if phases is not None else {}
    if status == "ok":
        return make_record(fields, measurement=Measurement([1.0, 2.0, 3.0], 5.0), config=config,
                           environment=environment, extra=extra or None)
    return failure_record(fields, status=status, error=f"{status}!", config=config, environment=environment, **extra)


def ends(span):
    return span.low, span.point, span.high


def write(path, *records):
    for one in records:
        append_record(path, one)


@pytest.fixture
def runner(tmp_path):
    return Runner(parse_grid(GRID), tmp_path / "study")


def test_a_cpu_plan_prices_what_records_cover_and_counts_the_rest(runner, tmp_path):
    grid, env = cells(runner.grid), runner.environment
    write(tmp_path / "reports" / "other" / "results.jsonl",  # another study on this machine
          record(grid[("resnet", "default", 1, "r1")], env, {"startup_s": 20.0, "ready_s": 2.0, "load_s": 8.0,
                                                              "cell_s": 60.0}),
          record(grid[("resnet", "default", 4, "r1")], env, {"cell_s": 90.0}),
          record(grid[("segformer", "eager", 1, "r1")], {**env, "torch_version": "9.9"}, {"cell_s": 5.0}))
    plan = runner.plan(reports_dir=tmp_path / "reports")
    assert plan.records_used == 2 and plan.gpu is None  # another environment's record is not this one's
    resnet, segformer = plan.kernels
    assert [(c.compile_mode, c.batch_size) for c in resnet.group.cells] == [
        ("default", 1), ("eager", 1), ("default", 4), ("eager", 4), ("default", 16), ("eager", 16)]
    # batch by batch, eager after the modes; a CPU has no prior: what no record prices is None
    assert resnet.cells == [Span.exact(60.0), None, Span.exact(90.0), None, None, None] and resnet.recorded == 2
    assert resnet.start == Span.exact(30.0) and segformer.start is None and segformer.cells == [None]
    assert resnet.span() == (Span.exact(180.0), 4) and segformer.span() == (None, 2)
    text = format_plan(plan)
    assert "  to run: 7 cells in 2 kernels, priced from 2 earlier records of this environment\n" in text
    assert ("(cpu): default 1, eager 1, default 4, eager 4, default 16, eager 16\n  estimate: ~3.0 min (3.0-3.0 min); "
            "2 cells from their records; 4 without an estimate (cells, or its start)\n") in text
    assert "segformer__float32__cpu (cpu): eager 1\n  estimate: no estimate\n" in text
    assert text.endswith("estimated duration: ~3.0 min (3.0-3.0 min) for 2 of 7 cells and 1 of 2 kernel starts\n"
                         "  2 cells from their own records\n"
                         "  not included, without an estimate: 5 cells, 1 kernel start")


def test_earlier_oom_cells_are_skipped_and_measured_cells_not_listed(runner, tmp_path):
    grid, env = cells(runner.grid), runner.environment
    write(runner.results_path, record(grid[("resnet", "default", 1, "r1")], env, {"cell_s": 50.0}),
          record(grid[("resnet", "eager", 4, "r1")], env, {"cell_s": 8.0}, status="oom"),
          record(grid[("resnet", "default", 4, "r1")], env, {"cell_s": 3.0}, status="error"))
    plan = runner.plan(reports_dir=tmp_path / "reports")
    assert plan.already_measured == 2  # ok and oom are done; the error is measured again
    assert [(c.compile_mode, c.batch_size, at) for c, at in plan.skipped_after_oom] == [("eager", 16, 4)]
    resnet = plan.kernels[0]
    assert [(c.compile_mode, c.batch_size) for c in resnet.group.cells] == [("eager", 1), ("default", 4),
                                                                            ("default", 16)]
    assert resnet.cells == [None, None, None] and plan.cells_to_run == 4  # an error's time says nothing
    text = format_plan(plan)
    assert "  resnet float32 cpu: eager 16 (out of memory at batch 4)" in text
    assert "already measured on this environment (skipped): 2" in text
    assert text.endswith("no estimate: no record prices these cells on this environment")


def test_a_kernel_whose_cells_an_earlier_oom_all_rules_out_does_not_start(runner, tmp_path):
    grid = cells(runner.grid)
    write(runner.results_path, record(grid[("resnet", "eager", 1, "r1")], runner.environment, status="oom"),
          *[record(grid[("resnet", "default", batch, "r1")], runner.environment) for batch in (1, 4, 16)])
    plan = runner.plan(reports_dir=tmp_path / "reports")
    assert [k.group.group_id for k in plan.kernels] == ["image-segmentation__segformer__float32__cpu"]
    assert [(c.batch_size, at) for c, at in plan.skipped_after_oom] == [(4, 1), (16, 1)]
    forced = Runner(parse_grid(GRID), runner.out_dir, force=True).plan(reports_dir=tmp_path / "reports")
    assert forced.already_measured == 0 and forced.skipped_after_oom == [] and forced.cells_to_run == 7


def test_a_fully_measured_grid_has_nothing_to_run(runner, tmp_path):
    write(runner.results_path, *[record(cell, runner.environment, {"cell_s": 5.0}) for cell in runner.grid.cells])
    plan = runner.plan(reports_dir=tmp_path / "reports")
    assert plan.kernels == [] and plan.already_measured == 7
    assert format_plan(plan).endswith("estimated duration: nothing to run")


def test_a_device_model_prices_recorded_cells_by_their_records_and_the_rest_by_the_calibrated_prior(tmp_path):
    runner = Runner(parse_grid({**GRID, "devices": ["cuda"], "replicates": 1}), tmp_path / "study")
    grid, prior = cells(runner.grid), Prior("H100 SXM")
    default_1 = grid[("resnet", "default", 1, "r1")]
    shape = Shape.of_cell(default_1, warm=False)  # as its record says: no warm compile
    work = (prior.cell(shape) - prior.energy(shape)).point
    write(tmp_path / "reports" / "other" / "results.jsonl",
          record(default_1, H100, {"startup_s": 7.0, "load_s": 3.0, "cell_s": 2 * work}),  # twice the prior's work
          record(grid[("resnet", "default", 4, "r1")], {**H100, "gpus": [{"index": 0, "name": "NVIDIA L4"}]},
                 {"cell_s": 999.0}))  # another GPU's: neither a record of this one nor its calibration
    plan = runner.plan(reports_dir=tmp_path / "reports", device_model="H100")
    assert plan.gpu == "H100 SXM" and plan.calibrated_on == 1 and plan.records_used == 1
    resnet, segformer = plan.kernels
    order = [(c.compile_mode, c.batch_size) for c in resnet.group.cells]
    # its own record, today's energy windows in place of none; a kernel start of its record
    assert resnet.cells[0].point == pytest.approx(2 * work + prior.energy(shape).point) and resnet.recorded == 1
    assert resnet.start == Span.exact(10.0)
    default_4 = Shape.of_cell(grid[("resnet", "default", 4, "r1")], warm=False)
    work_4, energy_4 = (prior.cell(default_4) - prior.energy(default_4)).point, prior.energy(default_4)
    assert ends(resnet.cells[order.index(("default", 4))]) == pytest.approx(ends(Span(1.6, 2, 2.5) * work_4 + energy_4))
    assert segformer.start.point == pytest.approx(10.0 / prior.start("resnet").point * prior.start("segformer").point)
    text = format_plan(plan)
    assert "  to run: 7 cells in 2 kernels, priced from 1 earlier record on H100 SXM\n" in text
    assert "1 cell from their records" in text
    total = sum((span for kernel in plan.kernels for span in (kernel.start, *kernel.cells)), Span.exact(0.0))
    assert (f"estimated duration: {minutes(total)} for 7 of 7 cells and 2 of 2 kernel starts\n  1 cell from their own "
            "records; the rest a priori for H100 SXM, a model, not a measurement (calibrated on 1 cell recorded "
            "there; bench_utils/study/pricing/prior.py says how)") in text


def test_a_later_replicate_whose_first_an_earlier_run_measured_is_priced_with_its_cold_compile(tmp_path):
    grid = parse_grid({**GRID, "devices": ["cuda"], "replicates": 2, "blocks": 2})
    later = cells(grid)[("resnet", "default", 4, "r2")]
    runner = Runner(grid, tmp_path / "study", environment=H100)

    def price(plan):
        kernel = next(k for k in plan.kernels if later in k.group.cells)
        return kernel.cells[kernel.group.cells.index(later)]

    both = runner.plan(reports_dir=tmp_path / "reports", device_model="H100")
    # the first replicate measured by an earlier run (no kept caches on a fresh machine): the second compiles cold
    write(runner.results_path, *(record(cell, H100) for cell in grid.cells if cell.settings.replicate == "r1"))
    alone = runner.plan(reports_dir=tmp_path / "reports", device_model="H100")
    assert alone.cells_to_run < both.cells_to_run
    prior = Prior("H100 SXM")
    assert ends(price(both)) == pytest.approx(ends(prior.cell(Shape.of_cell(later, kept=True, warm=False))))
    assert ends(price(alone)) == pytest.approx(ends(prior.cell(Shape.of_cell(later, warm=False))))
    assert price(alone).point > price(both).point + 1.0


def test_the_plan_modules_import_neither_torch_nor_pandas():
    code = ("import sys, bench_utils.study.pricing.plan, bench_utils.study.runner.time_limit; "
            "print(sorted({'torch', 'pandas'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_dry_run_lists_every_kernel_and_writes_nothing(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", "params/smoke.yaml", "--dry-run",
                             "--out", str(tmp_path)], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)
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


def test_dry_run_prices_the_guides_grid_on_an_h100_in_minutes_with_a_range(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", "params/hf-guide.yaml", "--dry-run",
                             "--device-model", "H100", "--out", str(tmp_path)], capture_output=True, text=True,
                            cwd=PROJECT_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    total = next(line for line in result.stdout.splitlines() if line.startswith("estimated duration"))
    # the guide's 80 cells in 3 replicates each on a GPU: 240 cells in 36 kernels, every one priced a priori
    match = re.fullmatch(r"estimated duration: ~(\d+) min \((\d+)-(\d+) min\) for 240 of 240 cells and 36 of 36 "
                         r"kernel starts", total)
    assert match, total
    low, point, high = (int(match.group(i)) for i in (2, 1, 3))
    assert 0 < low < point < high
    assert result.stdout.count("\n  estimate: ~") == 36
    assert "uncalibrated: no cell recorded there yet" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_device_model_is_one_line_naming_the_known_ones_and_exit_2():
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", "params/hf-guide.yaml", "--dry-run",
                             "--device-model", "RTX 4090"], capture_output=True, text=True, cwd=PROJECT_ROOT,
                            timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --device-model 'RTX 4090' is not a GPU with datasheet peaks here; known: H100 SXM, H100 NVL, "
        "H100 PCIe, H200 SXM, H200 NVL, A100 SXM, A100 PCIe, L4, T4, V100 SXM2, V100 PCIe, V100S PCIe"]
