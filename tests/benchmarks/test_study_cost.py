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
