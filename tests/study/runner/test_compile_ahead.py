"""Compile processes beside the measuring kernel, on cores of their own (``runner.compile_ahead``)."""

import io
import tempfile
import json
import os
import subprocess
import sys

from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner import compile_ahead
from bench_utils.study.runner.compile_ahead import CompileAhead, jobs_for, wanted
from bench_utils.study.runner.grid_runner import Runner
from fake_notebook import FakeNotebook

GRID = {"study": "t", "runs": 4, "warmup": 1, "blocks": 2, "replicates": 2, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager", "default", "reduce-overhead"]},
    {"models": ["detr"], "batch_sizes": [1], "compile_modes": ["eager", "aot-inductor", "default"]},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager", "default"], "shapes": ["dynamic"]}]}

# a compile process that compiles nothing: it notes the job it was given and the cores it ran on
FAKE = """
import json, os, sys
job = json.load(open(sys.argv[1]))
with open(job["log"], "a") as log:
    log.write(json.dumps({"model": job["model"], "cells": job["cells"], "cpus": sorted(os.sched_getaffinity(0)),
                          "token": os.path.basename(job["token"]), "measured_in": job["measured_in"]}) + "\\n")
"""


def test_on_a_gpu_with_cores_to_spare_and_where_a_grid_says_so():
    cells = parse_grid(GRID).cells
    gpu = parse_grid({**GRID, "devices": ["cuda"]}).cells
    assert wanted(gpu, set(range(16))) and not wanted(gpu, set(range(4)))  # a small host keeps its cores
    assert not wanted(cells, set(range(16)))  # a CPU study: compiling beside timing would disturb it
    assert wanted(parse_grid({**GRID, "compile_ahead": True}).cells, {0, 1})
    assert not wanted(parse_grid({**GRID, "devices": ["cuda"], "compile_ahead": False}).cells, set(range(16)))
    assert not wanted(gpu, set(range(16)), devices=2)  # several GPUs' kernels split the cores already


def test_only_a_static_torch_compile_cells_first_replicate_is_compiled_ahead_in_the_kernels_order():
    jobs = jobs_for(parse_grid(GRID).cells)
    assert [(group.first.model, cells) for group, cells in jobs] == [
        ("resnet", [["default", 1], ["reduce-overhead", 1], ["default", 4], ["reduce-overhead", 4]]),
        ("detr", [["default", 1]])]  # not aot-inductor, not a dynamic batch, not r2 (it finds r1's kept)
    capped = parse_grid({**GRID, "devices": ["cuda"], "gpu_memory_gib": 16}).cells
    assert jobs_for(capped) == []  # a compile process's memory would be outside the share
    # a run whose first replicates an earlier run measured (a lease before this one: its kept caches went with
    # it): the second replicates are the first here, and compiled ahead
    later = [cell for cell in parse_grid(GRID).cells if cell.settings.replicate == "r2"]
    assert [(group.first.settings.replicate, group.first.model, cells) for group, cells in jobs_for(later)] == [
        ("r2", "resnet", [["default", 1], ["reduce-overhead", 1], ["default", 4], ["reduce-overhead", 4]]),
        ("r2", "detr", [["default", 1]])]


def test_the_measuring_kernel_and_the_compile_processes_get_disjoint_cores(tmp_path):
    ahead = CompileAhead(parse_grid(GRID).cells, tmp_path, set(range(16)))
    assert ahead.measuring_cpus == {0, 1, 2, 3} and ahead.compile_cpus == [set(range(4, 10)), set(range(10, 16))]
    small = CompileAhead(parse_grid(GRID).cells, tmp_path, {0, 1})
    assert small.measuring_cpus == {0} and small.compile_cpus == [{1}]
    shown = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                           preexec_fn=lambda: compile_ahead._apart({0}), capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[0]"  # set before it starts: its threads, and any it starts, follow


def test_a_forced_run_compiles_ahead_on_its_own_cores_and_the_kernels_hold_the_token(tmp_path, monkeypatch):
    seen = []
    notebook = FakeNotebook()

    def executor(group, device, parameters, out_dir, poll, attempt):
        seen.append((parameters["compile_ahead"], parameters["settings"]["pause_compiles"],
                     frozenset(runner.affinity[device])))
        return notebook(group, device, parameters, out_dir, poll, attempt)

    real_init = CompileAhead.__init__

    def with_fake_processes(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.command = [sys.executable, "-c", FAKE]

    monkeypatch.setattr(CompileAhead, "__init__", with_fake_processes)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the kept caches' root: nothing left in /tmp
    stream = io.StringIO()
    runner = Runner(parse_grid({**GRID, "compile_ahead": True}), tmp_path, executor=executor, stream=stream)
    runner.uses_papermill = True  # as the local executor: the one a compile process works beside
    monkeypatch.setattr("bench_utils.study.runner.grid_runner.ensure_kernel", lambda: None)
    summary = runner.run()
    assert summary.counts()["ok"] == len(parse_grid(GRID).cells)
    # every kernel: told to hold the token, on the same measuring cores, and to pause the compile processes through
    # its timed windows: the study folder holds no interference check that passed here
    ((told, pause, kernel_cpus),) = set(seen)
    assert told is True and pause is True and kernel_cpus < set(os.sched_getaffinity(0))
    assert "the compile processes pause through the kernel's timed windows: no interference check" in stream.getvalue()
    lines = [json.loads(line) for line in (tmp_path / "logs" / compile_ahead.LOG_FILE).read_text().splitlines()]
    assert sorted(line["model"] for line in lines) == ["detr", "resnet"]
    for line in lines:  # each on cores apart from the kernel's, with the token beside the kept caches
        assert not set(line["cpus"]) & kernel_cpus and line["token"] == "gpu.token"
        assert "compile process beside the measuring kernel" in line["measured_in"]
    assert runner.ahead is None and runner.affinity == {}  # only while the grid's pass ran
    # the fake processes kept nothing: the run says so, and that the token saw no overlap
    assert "[run] compile ahead: 0 cell(s) compiled cold by compile processes" in stream.getvalue()
    assert "GPU token: 0 overlap(s)" in stream.getvalue()
