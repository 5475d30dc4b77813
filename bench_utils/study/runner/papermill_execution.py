"""Executing a kernel group's task notebook with papermill, in its own kernel process that dies with the runner
(``PR_SET_PDEATHSIG``); its log is kept per kernel.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
from typing import Any, Callable

from ...errors import UserError
from ...kernel import ENGINE_NAME, KERNEL_NAME, end_tree
from ...paths import NOTEBOOK_DIR, PROJECT_ROOT, scrub_file
from ..grid.kernel_groups import KernelGroup
from .clean_stop import RunningProcesses

LOG_TAIL_LINES = 40
POLL_S = 0.25  # how often a running kernel's records are read (the per-cell wall times' resolution)


def _in_child(cpus: set[int] | None) -> None:
    try:  # PR_SET_PDEATHSIG: the papermill child is killed when the runner dies, even by SIGKILL
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass
    if cpus:
        os.sched_setaffinity(0, cpus)  # inherited by the kernel papermill starts


def visible_devices_for(device: str, parent_mask: str | None) -> str:
    """The CUDA_VISIBLE_DEVICES value that pins a kernel to ``device`` (``cuda:N``).

    ``cuda:N`` is the runner's N-th visible GPU, so N indexes the runner's own mask
    (indices, GPU UUIDs and MIG ids alike): with ``CUDA_VISIBLE_DEVICES=3``, ``cuda:0``
    is physical GPU 3, never GPU 0, which may be someone else's.
    """
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if parent_mask is None:
        return str(index)
    visible = [entry.strip() for entry in parent_mask.split(",") if entry.strip()]
    if index >= len(visible):
        raise UserError(f"{device} is not visible here: CUDA_VISIBLE_DEVICES={parent_mask!r} "
                        f"shows {len(visible)} GPU(s)")
    return visible[index]


def oom_kill_count() -> int | None:
    """How many processes the operating system's out-of-memory killer has ended so far (Linux), or None: a kernel
    killed that way dies without a word, so a count that rose while its cell ran says the cell ran out of memory."""
    try:
        with open("/proc/vmstat", encoding="ascii") as vmstat:
            for line in vmstat:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def notebook_parameters(group: KernelGroup, results_path: Path, run_id: str,
                        progress_path: Path, keep_compiles: bool = True) -> dict[str, Any]:
    """The task notebook's parameters for one kernel group (papermill injects them; ``task.run`` reads them), paths
    relative to the project root, the kernel's folder."""
    cell = group.first
    return {"study": cell.study, "models": [cell.model],
            "batch_sizes": sorted({c.batch_size for c in group.cells}),
            "compile_modes": list(dict.fromkeys(c.compile_mode for c in group.cells)),
            "only_cells": group.pairs(), "dtypes": [cell.dtype], "device": cell.device,
            "settings": cell.settings.to_parameters(),
            "results_path": os.path.relpath(results_path, PROJECT_ROOT), "show": False,
            "progress_file": os.path.relpath(progress_path, PROJECT_ROOT),
            "runner_pid": os.getpid(), "run_id": run_id, "keep_compiles": keep_compiles}


def execute_with_papermill(group: KernelGroup, device: str, parameters: dict[str, Any], out_dir: Path, *,
                           poll: Callable[[], bool] | None = None, attempt: int = 1,
                           running: RunningProcesses | None = None,
                           cpus: set[int] | None = None) -> tuple[int, Path]:
    """Run the group's notebook in one kernel; return papermill's exit status and the log's path.

    ``poll`` is called about every ``POLL_S``, and the kernel ended when it returns True; ``running`` holds the
    process while it runs, for a stop request; ``cpus``: the only cores it and its kernel may use. A later
    ``attempt`` gets files of its own: the first one's log is evidence.
    """
    name = group.group_id if attempt == 1 else f"{group.group_id}.{attempt}"
    executed = out_dir / "notebooks" / f"{name}.ipynb"
    log_path = out_dir / "logs" / f"{name}.log"
    executed.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # papermill's command line, its kernel spoken to over Unix sockets (bench_utils.kernel); relative paths, so that
    # the executed notebook names no absolute path; what is left is scrubbed once it has run.
    command = [sys.executable, "-m", "bench_utils.kernel",
               os.path.relpath(NOTEBOOK_DIR / group.first.notebook, PROJECT_ROOT),
               os.path.relpath(executed, PROJECT_ROOT), "--engine", ENGINE_NAME,
               "-k", KERNEL_NAME, "--cwd", str(PROJECT_ROOT), "--no-progress-bar",
               "--log-level", "WARNING", "-y", json.dumps(parameters)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if device.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = visible_devices_for(device, os.environ.get("CUDA_VISIBLE_DEVICES"))
    with open(log_path, "wb") as log:  # the child holds its own copy of the file
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=PROJECT_ROOT, preexec_fn=lambda: _in_child(cpus))
    if running is not None:  # from its start: a stop request ends it, measuring or not
        running.add(process)
    try:
        returncode = _wait(process, poll)
    except BaseException:  # never leave a kernel measuring behind the runner's back
        end_tree(process.pid)
        raise
    finally:
        if running is not None:
            running.discard(process)
    for written in (executed, log_path):  # both are published with the study folder
        scrub_file(written, {str(out_dir): ".."})
    return returncode, log_path


def _wait(process: subprocess.Popen, poll: Callable[[], bool] | None) -> int:
    while True:
        try:
            return process.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if poll is not None and poll():
                end_tree(process.pid)  # papermill and the kernel it started
                return process.wait()


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])
