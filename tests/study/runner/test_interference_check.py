"""The interference check and the runner's reading of it (``runner.interference_check``)."""

import json
import sys
import tempfile
import time

import psutil
import pytest

from bench_utils.measurement import gpu_token
from bench_utils.measurement.paused_beside import MARKER
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner import interference_check
from bench_utils.study.runner.compile_ahead import CompileAhead
from bench_utils.study.runner.interference_check import (CHECK_FILE, beside_cells, pause_wanted, time_rounds,
                                                         verdict, wait_for_compiling)

GRID = {"study": "t", "devices": ["cuda"], "grids": [{"models": ["resnet"], "batch_sizes": [1],
                                                      "compile_modes": ["eager", "default"]}]}
H200 = {"gpus": [{"index": 0, "name": "NVIDIA H200"}], "cpu_model": "some CPU"}

# a compile process as the check sees one: it logs one compiling holding of the token, then stays busy
FAKE = """
import json, sys, time
from bench_utils.measurement import gpu_token
from bench_utils.measurement.paused_beside import MARKER
job = json.load(open(sys.argv[1]))
gpu_token.use(job["token"], gpu_token.COMPILING)
with gpu_token.window("compiling calls"):
    pass
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    pass
"""


def _check(verdict_: str, machine: str = "NVIDIA H200") -> dict:
    return {"machine": machine, "verdict": verdict_, "effects": {
        "eager": {"ratio": 1.004, "ci95": [0.998, 1.01], "judged": "within"}}}


@pytest.mark.parametrize("written, pause, why", [
    (None, True, "no interference check"),
    (_check("pass"), False, "passed (eager +0.4% [-0.2%, +1.0%] within)"),
    (_check("fail"), True, "did not pass"),
    (_check("pass", machine="NVIDIA H100 80GB HBM3"), True, "on another machine"),
])
def test_the_processes_pause_unless_the_study_folders_check_passed_on_this_gpu(tmp_path, written, pause, why):
    if written is not None:
        (tmp_path / CHECK_FILE).write_text(json.dumps(written))
    paused, said = pause_wanted(parse_grid(GRID).cells, tmp_path, H200)
    assert paused is pause and why in said


def test_a_grid_that_says_so_wins_over_the_check(tmp_path):
    (tmp_path / CHECK_FILE).write_text(json.dumps(_check("fail")))
    assert pause_wanted(parse_grid({**GRID, "pause_compiles": False}).cells, tmp_path, H200) == (
        False, "pause_compiles: false in the grid")


def test_the_rounds_time_both_conditions_in_random_order_with_the_processes_stopped_in_paused_ones(
        tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the kept caches' root
    ahead = CompileAhead(beside_cells("cpu", ("resnet",)), tmp_path / "study", {0, 1}, processes=1)
    ahead.command = [sys.executable, "-c", FAKE]
    seen: list[tuple[bool, str]] = []

    def eager():  # what the compile process is doing while the cell is timed, and whether a pause is on
        (pid,) = ahead.beside.registered()
        seen.append(((ahead.beside.folder / MARKER).exists(), _settled_status(pid)))

    gpu_token.measure_beside_compiles(ahead.token, "cpu")
    try:
        with ahead.running():
            assert wait_for_compiling(ahead, 60) < 60
            found = [entry for index in range(4)
                     for entry in time_rounds(eager, lambda: None, ahead, device="cpu", rounds=1, runs=2, blocks=1,
                                              seed=index)]
    finally:
        gpu_token.use(None, gpu_token.MEASURING)
    assert {paused for paused, _ in seen} == {True, False}
    assert all((status == psutil.STATUS_STOPPED) is paused for paused, status in seen)
    assert all(sorted(entry["order"]) == ["compiling", "paused"] and entry["processes"] == 1 for entry in found)
    assert {tuple(entry["order"]) for entry in found} == {("paused", "compiling"), ("compiling", "paused")}
    assert all(set(entry[condition]) == {"eager", "compiled", "speedup", "beside_cores"} for entry in found
               for condition in ("paused", "compiling"))
    assert gpu_token.overlaps(gpu_token.holdings(ahead.token_log)) == []
    # the busy compile process used a core while compiling, next to nothing while stopped
    assert all(entry["paused"]["beside_cores"] < 0.2 < entry["compiling"]["beside_cores"] for entry in found)


def test_a_check_with_no_process_busy_beside_cannot_pass():
    rounds = [{"order": ["paused", "compiling"], "processes": 0,
               "paused": {"eager": 1.0, "compiled": 0.5, "speedup": 2.0},
               "compiling": {"eager": 1.0, "compiled": 0.5, "speedup": 2.0, "beside_cores": 1.0}}] * 4
    assert verdict(rounds)["verdict"] == "unclear"
    counted = [{**entry, "processes": 1} for entry in rounds]
    assert verdict(counted)["verdict"] == "pass" and verdict(counted)["rounds_counted"] == 4
    # processes beside that waited for the token the whole time put nothing beside the timing
    idle = [{**entry, "compiling": {**entry["compiling"], "beside_cores": 0.01}} for entry in counted]
    assert verdict(idle)["verdict"] == "unclear" and "0 of 4 round(s)" in verdict(idle)["reason"]


def test_the_check_is_a_gpu_one_by_default_and_compiles_the_guides_slowest_models():
    cells = beside_cells("cuda")
    assert {cell.model for cell in cells} == set(interference_check.BESIDE_MODELS)
    assert {cell.compile_mode for cell in cells} == {"default"} and {c.batch_size for c in cells} == {1, 4, 16}


def _settled_status(pid: int, wait_s: float = 0.3) -> str:
    """Its status once a SIGSTOP had time to take effect (when the process next runs): stopped as soon as it is."""
    deadline = time.monotonic() + wait_s
    while (status := psutil.Process(pid).status()) != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.02)
    return status
