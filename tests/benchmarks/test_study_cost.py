"""benchmarks/study_cost.py on synthetic outcomes and records: nothing is run or built."""

from pathlib import Path

import pytest

from bench_utils.records.results_file import append_record
from bench_utils.study.runner.progress_display import Outcome, RunOutcome
from bench_records import FULL_PHASES, benchmark, record, run_cell

study_cost = benchmark("study_cost")


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
