"""benchmarks/study_cost.py on synthetic outcomes and records: nothing is run or built."""

import importlib.util
from pathlib import Path
import sys

import pytest

from bench_utils.measurement.timing import Measurement
from bench_utils.records.build import make_record
from bench_utils.records.results_file import append_record
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner.progress_display import Outcome, RunOutcome

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("study_cost", ROOT / "benchmarks" / "study_cost.py")
study_cost = importlib.util.module_from_spec(_spec)
sys.modules["study_cost"] = study_cost  # its dataclasses look their module up there
_spec.loader.exec_module(study_cost)

H100_ENV = {"torch_version": "2.9.0", "cpu_model": "Test CPU",
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}
CPU_ENV = {"torch_version": "2.9.0", "cpu_model": "Test CPU", "gpus": []}

# This run: resnet at batch 1 and 2, eager and default, 10 runs after 2 warm-up calls, on the CPU.
RUN_GRID = parse_grid({"study": "bench", "runs": 10, "warmup": 2, "devices": ["cpu"],
                       "grids": [{"models": ["resnet"], "batch_sizes": [1, 2],
                                  "compile_modes": ["eager", "default"]}]})
# A small guide-like grid on CUDA: resnet eager and compiled at 1 and 4 (the eager cells share
# the compiled cells' pairs), and vit eager alone at 1 (nothing to share): 5 cells, 2 kernels.
GUIDE = parse_grid({"study": "guide", "runs": 300, "warmup": 10, "devices": ["cuda"],
                    "grids": [{"models": ["resnet"], "batch_sizes": [1, 4],
                               "compile_modes": ["eager", "default"]},
                              {"models": ["vit"], "batch_sizes": [1], "compile_modes": ["eager"]}]})


def run_cell(mode, batch):
    return next(c for c in RUN_GRID.cells if (c.compile_mode, c.batch_size) == (mode, batch))


def guide_cell(model, mode, batch):
    return next(c for c in GUIDE.cells if (c.model, c.compile_mode, c.batch_size) == (model, mode, batch))


def record(cell, *, phases=None, device=None, study=None, status="ok", times_ms=(9.0, 10.0, 11.0),
           runs=10, warmup=2, compile=None, eager_mean_ms=None, environment=CPU_ENV):
    """A record of ``cell`` (mean latency 10 ms by default), with phases and figures as given."""
    extra = {}
    if phases is not None:
        extra["phases"] = phases
    if eager_mean_ms is not None:
        extra["speedup"] = {"eager_mean_ms": eager_mean_ms}
    ok = status == "ok"
    return make_record(dict(study=study or cell.study, task=cell.task, model=cell.model,
                            batch_size=cell.batch_size, compile_mode=cell.compile_mode, dtype=cell.dtype,
                            device=device or cell.device), status=status,
                       measurement=Measurement(times_ms=list(times_ms), first_call_ms=1.0) if ok else None,
                       error=None if ok else "CUDA out of memory", compile=compile,
                       config={"runs": runs, "warmup": warmup}, environment=environment,
                       extra=extra or None)


FULL_PHASES = {"startup_s": 1.5, "load_s": 1.0, "cell_s": 7.0, "timed_s": 2.0, "warmup_s": 0.5,
               "compile_s": 3.0, "parity_s": 0.25, "memory_s": 0.25, "flops_s": 0.5, "energy_s": 0.5}


# --- breakdown of this run ----------------------------------------------------------------

def test_overhead_is_wall_minus_the_measured_parts():
    cell = run_cell("default", 1)
    [row] = study_cost.breakdown([Outcome(cell, "ok", 10.0, "cpu")], [record(cell, phases=FULL_PHASES)])
    assert (row.timed_s, row.warmup_s, row.compile_s, row.parity_s, row.memory_s) == (2.0, 0.5, 3.0, 0.25, 0.25)
    assert row.other_s == pytest.approx(1.0)        # flops + energy
    assert row.measured_s == pytest.approx(7.0)
    assert row.overhead_s == pytest.approx(3.0)     # startup and load are not measured parts
    assert row.start_s == pytest.approx(2.5)


def test_missing_phase_keys_and_missing_records_count_as_overhead():
    partial, absent = run_cell("eager", 1), run_cell("eager", 2)
    rows = study_cost.breakdown([Outcome(partial, "ok", 4.0, "cpu"), Outcome(absent, "error", 6.0, "cpu")],
                                [record(partial, phases={"timed_s": 1.0})])
    assert [row.overhead_s for row in rows] == [pytest.approx(3.0), pytest.approx(6.0)]
    assert rows[1].status == "error"


def test_records_match_outcomes_by_cell_identity_not_order():
    first, second = run_cell("eager", 1), run_cell("eager", 2)
    records = [record(second, phases={"timed_s": 2.0}),
               record(first, phases={"timed_s": 1.0}),
               record(first, study="other", phases={"timed_s": 9.0})]  # another study: not this cell
    rows = study_cost.breakdown([Outcome(first, "ok", 5.0, "cpu"), Outcome(second, "ok", 5.0, "cpu")], records)
    assert [row.timed_s for row in rows] == [1.0, 2.0]


def test_the_last_record_of_a_cell_is_this_runs():
    cell = run_cell("eager", 1)
    older, newer = record(cell, phases={"timed_s": 4.0}), record(cell, phases={"timed_s": 1.0})
    [row] = study_cost.breakdown([Outcome(cell, "ok", 5.0, "cpu")], [older, newer])
    assert row.timed_s == 1.0
    assert study_cost.run_records([Outcome(cell, "ok", 5.0, "cpu")], [older, newer]) == [newer]


def test_totals_amortize_the_overhead_over_the_cells():
    a, b = run_cell("eager", 1), run_cell("eager", 2)
    rows = study_cost.breakdown(
        [Outcome(a, "ok", 10.0, "cpu"), Outcome(b, "ok", 6.0, "cpu")],
        [record(a, phases={"startup_s": 2.0, "load_s": 1.0, "timed_s": 7.0}),  # overhead 3, start 3
         record(b, phases={"timed_s": 1.0})])                                 # overhead 5
    summary = study_cost.totals(rows)
    assert (summary.cells, summary.wall_s, summary.measured_s) == (2, 16.0, 8.0)
    assert summary.overhead_per_cell_s == pytest.approx(4.0)
    assert summary.overhead_per_cell_without_start_s == pytest.approx(2.5)
    assert study_cost.mean_kernel_start_s(rows, kernels=1) == pytest.approx(3.0)
    assert study_cost.mean_kernel_start_s(rows, kernels=0) is None


def test_kernels_started_counts_records_with_a_startup():
    a, b, c = run_cell("eager", 1), run_cell("eager", 2), run_cell("default", 1)
    records = [record(a, phases={"startup_s": 1.2, "load_s": 0.5}), record(b, phases={"timed_s": 1.0}),
               record(c, phases={"startup_s": 0.9}), record(c)]
    assert study_cost.kernels_started(records) == 2


@pytest.mark.parametrize("per_cell, verdict", [(2.5, "[target <= 3 s: met]"),
                                               (3.0, "[target <= 3 s: met]"),
                                               (4.25, "[target <= 3 s: missed by 1.2 s]")])
def test_overhead_line_says_whether_the_target_is_met(per_cell, verdict):
    summary = study_cost.Totals(cells=4, wall_s=40.0, measured_s=40.0 - 4 * per_cell,
                                overhead_s=4 * per_cell, start_s=0.0)
    line = study_cost.overhead_line(summary)
    assert line == f"overhead per cell (amortized over 4 cells): {per_cell:.1f} s  {verdict}"


def test_table_has_a_row_per_cell_and_a_total():
    a, b = run_cell("eager", 1), run_cell("eager", 2)
    rows = study_cost.breakdown([Outcome(a, "ok", 10.0, "cpu"), Outcome(b, "ok", 6.0, "cpu")],
                                [record(a, phases={"timed_s": 7.0}), record(b, phases={"timed_s": 1.0})])
    lines = study_cost.breakdown_table(rows).splitlines()
    assert len(lines) == 4  # header, two cells, total
    assert a.cell_id in lines[1] and "3.00" in lines[1]
    assert lines[3].split()[:3] == ["total", "(2", "cells)"] and "8.00" in lines[3]  # 3 + 5 s overhead


# --- projection for the guide's grid ----------------------------------------------------

def test_eager_cells_sharing_a_compiled_cells_pairs():
    sharing = study_cost.eager_cells_sharing_pairs(GUIDE.cells)
    assert sharing == {guide_cell("resnet", "eager", 1), guide_cell("resnet", "eager", 4)}


def test_phases_are_used_with_timed_parts_scaled_to_the_grids_runs():
    cell = guide_cell("resnet", "default", 1)
    result = record(cell, runs=30, warmup=1, environment=H100_ENV,
                    phases={"compile_s": 20.0, "timed_s": 3.0, "warmup_s": 0.1, "parity_s": 1.0,
                            "memory_s": 0.5, "energy_s": 0.25},
                    compile={"cold_ms": 99_000.0, "warm_ms": 1_000.0}, eager_mean_ms=20.0)
    work = study_cost.cell_work(cell, result, shares_pairs=False)
    assert work.source == "phases"                       # preferred over cold/warm and latencies
    assert work.compile_s == 20.0
    assert work.timed_s == pytest.approx(3.1 * 310 / 31)  # (300 runs + 10 warm-up) / (30 + 1)
    assert work.rest_s == pytest.approx(1.75)


def test_an_eager_cell_sharing_pairs_has_no_timed_cost():
    cell = guide_cell("resnet", "eager", 1)
    with_phases = record(cell, phases={"timed_s": 5.0, "warmup_s": 1.0, "memory_s": 0.5})
    without = record(cell)
    assert study_cost.cell_work(cell, with_phases, shares_pairs=True).timed_s == 0.0
    assert study_cost.cell_work(cell, with_phases, shares_pairs=True).rest_s == 0.5
    assert study_cost.cell_work(cell, without, shares_pairs=True).total_s == 0.0
    # the same record, standalone: its own timed runs count
    assert study_cost.cell_work(cell, with_phases, shares_pairs=False).timed_s == pytest.approx(6.0 * 310 / 12)


def test_without_phases_compile_cost_and_latencies_are_used():
    cell = guide_cell("resnet", "default", 4)
    both = record(cell, compile={"cold_ms": 40_000.0, "warm_ms": 10_000.0}, eager_mean_ms=20.0)
    work = study_cost.cell_work(cell, both, shares_pairs=False)
    assert work.source == "latencies"
    assert work.compile_s == pytest.approx(50.0)
    assert work.timed_s == pytest.approx(310 * (0.020 + 0.010))  # eager and compiled sides
    cold_only = record(cell, compile={"cold_ms": 40_000.0, "warm_ms": None}, eager_mean_ms=20.0)
    assert study_cost.cell_work(cell, cold_only, shares_pairs=False).compile_s == pytest.approx(40.0)


def test_a_standalone_eager_cell_costs_its_calls():
    cell = guide_cell("vit", "eager", 1)
    work = study_cost.cell_work(cell, record(cell, times_ms=(20.0, 20.0, 20.0)), shares_pairs=False)
    assert work.timed_s == pytest.approx(310 * 0.020)


@pytest.mark.parametrize("fields", [{"compile": None, "eager_mean_ms": 20.0},        # no cold_ms
                                    {"compile": {"cold_ms": 1.0}, "eager_mean_ms": None},  # no eager
                                    {"status": "oom"}])                              # no latency
def test_a_compiled_record_without_figures_gives_none(fields):
    cell = guide_cell("resnet", "default", 1)
    assert study_cost.cell_work(cell, record(cell, **fields), shares_pairs=False) is None
    assert study_cost.cell_work(cell, None, shares_pairs=False) is None


def test_results_prefer_an_ok_record_over_a_later_failure():
    cell = guide_cell("resnet", "default", 1)
    ok, failed = record(cell, phases={"compile_s": 1.0}), record(cell, status="error")
    key = study_cost.work_key(cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.dtype)
    assert study_cost.results_by_work_key([ok, failed])[key] is ok


def projection_results():
    """H100 results for 3 of the guide's 5 cells; the resnet cells at batch 4 have none."""
    compiled, eager, vit = (guide_cell("resnet", "default", 1), guide_cell("resnet", "eager", 1),
                            guide_cell("vit", "eager", 1))
    return [record(compiled, device="cuda", environment=H100_ENV, runs=300, warmup=10,
                   phases={"compile_s": 60.0, "timed_s": 9.0, "warmup_s": 1.0}),
            record(eager, device="cuda", environment=H100_ENV, runs=300, warmup=10,
                   phases={"timed_s": 0.0, "memory_s": 2.0}),
            record(vit, device="cuda", environment=H100_ENV, times_ms=(20.0, 20.0, 20.0))]


def test_projection_sums_kernel_starts_overhead_and_the_work_of_cells_with_figures():
    projection = study_cost.project(GUIDE.cells, projection_results(), kernel_start_s=12.0,
                                    overhead_per_cell_s=1.5)
    assert (projection.cells, projection.kernels, projection.no_figure) == (5, 2, 2)
    assert len(projection.work) == 3                       # the two without figures are left out
    assert projection.work_total_s == pytest.approx(70.0 + 2.0 + 310 * 0.020)
    assert projection.total_s == pytest.approx(2 * 12.0 + 5 * 1.5 + 70.0 + 2.0 + 6.2)
    assert projection.lower_bound
    assert projection.environments == ["NVIDIA H100 80GB HBM3, torch 2.9.0"]


def test_projection_text_says_it_is_a_projection_and_a_lower_bound():
    projection = study_cost.project(GUIDE.cells, projection_results(), kernel_start_s=12.0,
                                    overhead_per_cell_s=1.5)
    text = study_cost.format_projection(projection, "guide.yaml", "h100.jsonl")
    assert text.startswith("PROJECTION (not a measurement) of guide.yaml (5 cells)")
    assert "NVIDIA H100 80GB HBM3, torch 2.9.0" in text
    # 109.7 s, but cells are missing: below the target says nothing
    assert "projected total: at least 1.8 min  [target <= 25 min: unknown, this is a lower bound]" in text
    assert "2 cell(s) have no figure in h100.jsonl and are not included: the projection is a lower bound" in text


def test_projection_over_target_and_without_kernel_starts():
    projection = study_cost.project(GUIDE.cells, projection_results(), kernel_start_s=None,
                                    overhead_per_cell_s=360.0)     # 30 min of overhead alone
    assert projection.kernel_starts_total_s == 0.0 and projection.lower_bound
    text = study_cost.format_projection(projection, "guide.yaml", "h100.jsonl")
    assert "2 of 2 kernels not included" in text
    assert "at least 31.3 min  [target <= 25 min: missed by 6.3 min]" in text  # (1800 + 78.2) s


def test_projection_takes_the_gpu_machines_own_kernel_start_and_whole_cells():
    results = projection_results()
    results[0]["phases"].update(startup_s=9.0, load_s=21.0, cell_s=75.0)  # resnet's kernel, on the GPU
    projection = study_cost.project(GUIDE.cells, results, kernel_start_s=3.0, overhead_per_cell_s=0.0)
    assert projection.starts_from_results == {"image-classification__resnet__float32__cuda": 30.0}
    assert projection.kernel_starts_total_s == pytest.approx(30.0 + 3.0)  # vit's from this run
    # the cell's unnamed remainder (75 - 60 compile - 10 timed) counts, scaled parts apart
    compiled = next(c for c in GUIDE.cells if (c.model, c.compile_mode, c.batch_size) == ("resnet", "default", 1))
    assert projection.work[compiled].rest_s == pytest.approx(5.0)


def test_the_overhead_amortizes_the_whole_runs_wall_time():
    rows = [study_cost.CellCost("a", "ok", wall_s=10.0, timed_s=8.0), study_cost.CellCost("b", "ok", wall_s=5.0, timed_s=5.0)]
    assert study_cost.totals(rows).overhead_per_cell_s == pytest.approx(1.0)
    # 4 s more between cells (a kernel's teardown, the runner's set-up) are overhead too
    assert study_cost.totals(rows, grid_wall_s=19.0).overhead_per_cell_s == pytest.approx(3.0)


# --- main, with a stand-in runner --------------------------------------------------------

class FakeRunner:
    """Appends a record with phases for each cell, as a kernel would; the first cell fails."""

    def __init__(self, grid, out_dir, force):
        self.grid, self.out_dir = grid, Path(out_dir)
        assert force

    def run(self):
        outcomes = []
        for index, cell in enumerate(self.grid.cells):
            status = "error" if index == 0 else "ok"
            phases = {"startup_s": 2.0, "load_s": 1.0} if index == 0 else {"timed_s": 1.0, "warmup_s": 0.5}
            append_record(self.out_dir / "results.jsonl", record(cell, status=status, phases=phases))
            outcomes.append(Outcome(cell, status, 4.0, "cpu"))
        return RunOutcome(outcomes=outcomes, total=len(outcomes))


def test_main_prints_the_breakdown_removes_its_folder_and_fails_on_a_failed_cell(tmp_path, monkeypatch, capsys):
    import bench_utils.study.runner.grid_runner as runner_module

    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text("study: bench\nruns: 10\nwarmup: 2\ndevices: [cpu]\n"
                         "grids:\n  - models: [resnet]\n    batch_sizes: [1, 2]\n    compile_modes: [eager]\n")
    monkeypatch.setattr(runner_module, "Runner", FakeRunner)
    monkeypatch.setattr(study_cost.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "study"))
    assert study_cost.main([str(grid_file)]) == 1
    out = capsys.readouterr().out
    assert "overhead per cell (amortized over 2 cells): 3.2 s  [target <= 3 s: missed by 0.2 s]" in out
    assert "kernels started: 1" in out
    assert study_cost.NO_PROJECTION in out
    assert not (tmp_path / "study").exists()


def test_the_profile_is_a_measured_part_and_its_share_of_each_cells_wall_time_is_judged():
    compiled, eager = run_cell("default", 1), run_cell("eager", 1)
    rows = study_cost.breakdown([Outcome(compiled, "ok", 10.0, "cpu"), Outcome(eager, "ok", 5.0, "cpu")],
                                [record(compiled, phases={**FULL_PHASES, "profile_s": 0.5}),
                                 record(eager, phases={"timed_s": 1.0})])
    assert rows[0].profile_s == 0.5 and rows[0].measured_s == pytest.approx(7.5) and rows[1].profile_s == 0
    line = study_cost.profile_line(rows)
    assert line == ("profile cost: 0.5 s of the 1 profiled cells' 10.0 s wall time (5.0%); the most: "
                    f"{compiled.cell_id} 0.5 s of 10.0 s (5.0%) [target <= 10% per cell: met]")
    assert study_cost.profile_line(rows, target=0.04).endswith("[target <= 4% per cell: missed by 1.0 points]")
    assert study_cost.profile_line(rows[1:]).startswith("profile cost: no cell of this grid was profiled")
