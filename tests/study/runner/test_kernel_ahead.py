"""The next kernel group's kernel started ahead, on the compile cores, behind its start gate (``runner.kernel_ahead``)."""

import io
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

import psutil

from bench_utils.records.results_file import read_records
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner.grid_runner import Runner
from bench_utils.study.runner.kernel_ahead import UNUSED_LOG, KernelsAhead, move_tree
from bench_utils.study.runner.clean_stop import RunningProcesses
from bench_utils.study.runner.papermill_execution import StartedKernel

# papermill's stand-in: starts a "kernel" of two threads, which starts a "compile worker" of its own
KERNEL = """
import subprocess, sys, threading
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
threading.Thread(target=lambda: threading.Event().wait(), daemon=True).start()
print(worker.pid, flush=True)
threading.Event().wait()
"""
PAPERMILL = f"""
import subprocess, sys, time
kernel = subprocess.Popen([sys.executable, "-c", {KERNEL!r}], stdout=sys.stdout)
time.sleep(60)
"""


def threads_of(pid):
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def test_a_kernel_is_moved_thread_by_thread_and_its_own_children_stay(tmp_path):
    out = tmp_path / "out"
    with open(out, "w") as stdout:
        papermill = subprocess.Popen([sys.executable, "-c", PAPERMILL], stdout=stdout,
                                     preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    try:
        deadline = time.monotonic() + 60
        while not out.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        worker = int(out.read_text().split()[0])
        (kernel,) = psutil.Process(papermill.pid).children()
        assert len(threads_of(kernel.pid)) >= 2
        move_tree(papermill.pid, {1})
        for pid in (papermill.pid, kernel.pid):
            assert {tid: os.sched_getaffinity(tid) for tid in threads_of(pid)} == {
                tid: {1} for tid in threads_of(pid)}
        assert os.sched_getaffinity(worker) == {0}  # Inductor's compile workers stay on the compile cores
    finally:
        from bench_utils.kernel import end_tree

        end_tree(papermill.pid)


def test_a_kernel_started_ahead_and_not_used_is_ended_and_its_log_named_apart(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "notebooks").mkdir()
    log, executed = tmp_path / "logs" / "g.log", tmp_path / "notebooks" / "g.ipynb"
    log.write_text(f"booting in {tmp_path}\n")
    executed.write_text("{}")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    running = RunningProcesses()
    running.add(process)
    with KernelsAhead(tmp_path, running, {1}, {0}, lambda group, progress: {}) as ahead:
        ahead._started["g"] = StartedKernel(process, executed, log)
    assert process.poll() is not None and not executed.exists() and not log.exists()
    assert (tmp_path / "logs" / UNUSED_LOG.format(group="g")).read_text() == "booting in ..\n"


def test_a_forced_compile_ahead_run_starts_the_next_groups_kernel_ahead(tmp_path, monkeypatch):
    # two kernel groups (one a dtype) on this CPU, the real notebooks, eager cells: no compile process has a job
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the kept caches' root, here and in kernels
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    grid = parse_grid({"study": "ahead", "runs": 2, "warmup": 1, "blocks": 1, "compile_ahead": True, "grids": [
        {"models": ["timm:test_resnet"], "batch_sizes": [1, 2], "compile_modes": ["eager"],
         "dtypes": ["float32", "bfloat16"]}]})
    out = tmp_path / "study"
    summary = Runner(grid, out, stream=io.StringIO()).run()
    assert summary.counts()["ok"] == 4
    records = read_records(out / "results.jsonl")
    assert sorted((r.cell.dtype, r.cell.batch_size) for r in records) == [
        ("bfloat16", 1), ("bfloat16", 2), ("float32", 1), ("float32", 2)]  # each cell once
    first, second = (next(r.phases for r in records if r.cell.dtype == dtype) for dtype in ("float32", "bfloat16"))
    assert first.started_ahead_s is None and first.startup_s > 0  # the run's first kernel: started as ever
    assert second.started_ahead_s > 0 and second.gate_wait_s is not None  # booted while the first measured
    logs = sorted(path.name for path in (out / "logs").iterdir() if not path.name.startswith(("gpu.", "compile")))
    assert len(logs) == 2 and all(name.endswith(".log") and "unused" not in name for name in logs), logs
    assert len(list((out / "notebooks").glob("*.ipynb"))) == 2


def test_until_its_gate_opens_a_kernel_started_ahead_is_paused_with_the_compile_processes(tmp_path, monkeypatch):
    from bench_utils.measurement.paused_beside import PausedBeside
    from bench_utils.study.grid.kernel_groups import kernel_groups
    from bench_utils.study.runner import kernel_ahead

    first, second = kernel_groups(parse_grid({"study": "ahead", "grids": [
        {"models": ["resnet", "detr"], "batch_sizes": [1], "compile_modes": ["eager"]}]}).cells)
    (tmp_path / "logs").mkdir()
    booting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = StartedKernel(booting, tmp_path / "n.ipynb", tmp_path / "logs" / "n.log")
    monkeypatch.setattr(kernel_ahead, "start_papermill", lambda group, *args, **kwargs: started)
    monkeypatch.setattr(kernel_ahead, "wait_for_papermill", lambda *args, **kwargs: (0, started.log_path))
    beside = PausedBeside(tmp_path / "beside")
    parameters = {"only_cells": [["eager", 1]]}
    ahead = KernelsAhead(tmp_path, RunningProcesses(), {1}, {0}, lambda group, progress: dict(parameters),
                         next_group=lambda: second, beside=beside)
    try:
        ahead.execute(first, "cpu", parameters, tmp_path, lambda: False, 1)  # the first kernel starts the next's
        assert beside.registered() == [booting.pid]  # one more process beside the measuring kernel, for now
        ahead.next_group = lambda: None
        ahead.execute(second, "cpu", parameters, tmp_path, lambda: False, 1)  # its gate opened: it measures now
        assert beside.registered() == []
    finally:
        booting.kill()
        booting.wait()
