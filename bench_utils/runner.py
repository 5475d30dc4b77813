"""The grid runner: a whole study from one YAML file, crash-proof and resumable.

``python -m bench_utils run PARAMS.yaml [--out DIR] [--force] [--devices cuda:0,cuda:1]``

Each cell runs as its own papermill execution of its task notebook, in its own
kernel process (a papermill subprocess that dies with the runner), so an
out-of-memory error, a segfault or a killed kernel loses at most that cell:

- the notebook records ``ok``, ``oom`` or ``error`` itself; a cell that ends with no
  record (the kernel died) is recorded as ``error`` with the end of its log;
- after an ``oom``, the larger batch sizes of the same model, mode and dtype are
  recorded as ``oom`` without running (a group of cells runs in batch order on
  one worker, so this holds with several devices too);
- cells already recorded ``ok`` or ``oom`` for the same environment (torch version,
  and the GPU model or CPU model) are skipped: running again resumes;
- one worker per device, each pinned with CUDA_VISIBLE_DEVICES: never two
  measurements on one device at once.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .env import PROJECT_ROOT, capture_environment
from .grid import Cell, Grid
from .lease import RunnerLease
from .records import append_record, cell_identity, environment_key, iter_records, locked, record_key
from .task import failure_record, skipped_after_oom

KERNEL_NAME = "bench-utils"
LOG_TAIL_LINES = 40
NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
DONE_STATUSES = ("ok", "oom")


@dataclass
class Outcome:
    cell: Cell
    status: str            # ok, oom, error; "skipped" for cells not run after an OOM
    seconds: float
    device: str
    message: str = ""


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)
    resumed: int = 0
    total: int = 0

    def counts(self) -> Counter:
        return Counter(outcome.status for outcome in self.outcomes)


# --- resuming -------------------------------------------------------------------------

def read_done(results_path: Path) -> set[tuple]:
    """Keys of the cells that have an ok or oom record."""
    if not results_path.exists():
        return set()
    with locked(results_path, shared=True):  # never read a line while it is being written
        return {record_key(record) for _, record in iter_records(results_path)
                if record.get("status") in DONE_STATUSES}


# --- executing one cell -------------------------------------------------------------

def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the papermill child is killed when the runner dies, even by SIGKILL.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def ensure_kernel() -> str:
    """Install the project's kernel (this interpreter) into the environment if missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL_NAME not in KernelSpecManager().find_kernel_specs():
        from ipykernel.kernelspec import install

        install(kernel_name=KERNEL_NAME, display_name="Python (bench-utils)", prefix=sys.prefix)
    return KERNEL_NAME


def notebook_parameters(cell: Cell, results_path: Path, run_id: str) -> dict[str, Any]:
    return {"study": cell.study, "models": [cell.model], "batch_sizes": [cell.batch_size],
            "compile_modes": [cell.compile_mode], "dtypes": [cell.dtype], "device": cell.device,
            "runs": cell.runs, "warmup": cell.warmup, "blocks": cell.blocks,
            "weights": cell.weights, "seed": cell.seed, "tf32": cell.tf32,
            "backend": cell.backend, "fullgraph": cell.fullgraph, "dynamic": cell.dynamic,
            "results_path": str(results_path), "runner_pid": os.getpid(), "run_id": run_id}


def execute_with_papermill(cell: Cell, device: str, parameters: dict[str, Any], out_dir: Path,
                           timeout: int | None = None) -> tuple[int, Path]:
    """Run the cell's notebook; return papermill's exit status and the log's path."""
    executed = out_dir / "notebooks" / f"{cell.cell_id}.ipynb"
    log_path = out_dir / "logs" / f"{cell.cell_id}.log"
    executed.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "papermill", str(NOTEBOOK_DIR / cell.notebook), str(executed),
               "-k", KERNEL_NAME, "--cwd", str(PROJECT_ROOT), "--no-progress-bar",
               "--log-level", "WARNING", "-y", json.dumps(parameters)]
    if timeout:
        command += ["--execution-timeout", str(timeout)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if device.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = device.split(":")[1] if ":" in device else "0"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=PROJECT_ROOT, preexec_fn=_die_with_parent)
        return process.wait(), log_path


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])


# --- the runner ----------------------------------------------------------------------------

Executor = Callable[[Cell, str, dict[str, Any], Path], "tuple[int, Path]"]


class Runner:
    """Runs a Grid's pending cells; ``run()`` returns a Summary."""

    def __init__(self, grid: Grid, out_dir: str | os.PathLike | None = None, *,
                 force: bool = False, devices: list[str] | None = None,
                 executor: Executor | None = None, timeout: int | None = None,
                 stream=None) -> None:
        self.grid = grid
        self.out_dir = Path(out_dir) if out_dir else PROJECT_ROOT / "reports" / grid.study
        self.results_path = self.out_dir / "results.jsonl"
        self.force = force
        self.devices = devices
        self.timeout = timeout
        self.uses_papermill = executor is None
        self.executor = executor or (lambda cell, device, params, out:
                                     execute_with_papermill(cell, device, params, out, self.timeout))
        self.stream = stream or sys.stderr
        self.environment = capture_environment()
        self._lock = threading.Lock()

    def workers(self, kind: str) -> list[str]:
        if self.devices:
            chosen = [device for device in self.devices if device.split(":")[0] == kind]
            if chosen:
                return chosen
        return self.grid.workers(kind)

    def pending(self) -> tuple[list[Cell], int]:
        done = set() if self.force else read_done(self.results_path)
        pending = []
        for cell in self.grid.cells:
            key = (*cell.identity(), *environment_key(self.environment, cell.device))
            if key not in done:
                pending.append(cell)
        return pending, len(self.grid.cells) - len(pending)

    def run(self) -> Summary:
        if self.uses_papermill:
            ensure_kernel()
        with RunnerLease(self.out_dir, self.results_path) as lease:
            self.run_id = lease.run_id
            pending, resumed = self.pending()
            summary = Summary(resumed=resumed, total=len(self.grid.cells))
            if not pending:
                return summary
            progress = Progress(len(pending), self.stream)
            groups: dict[str, queue.Queue] = defaultdict(queue.Queue)
            by_group: dict[tuple, list[Cell]] = defaultdict(list)
            for cell in pending:
                by_group[cell.group].append(cell)
            for group_cells in by_group.values():
                groups[group_cells[0].device].put(sorted(group_cells, key=lambda c: c.batch_size))
            threads = [threading.Thread(target=self._work, args=(groups[kind], device, summary, progress),
                                        name=f"worker-{device}")
                       for kind in groups for device in self.workers(kind)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            progress.close()
        return summary

    def _work(self, groups: queue.Queue, device: str, summary: Summary, progress: "Progress") -> None:
        while True:
            try:
                cells = groups.get_nowait()
            except queue.Empty:
                return
            oom_at = None
            for cell in cells:
                progress.start(cell, device)
                started = time.monotonic()
                if oom_at is not None:
                    self._append(skipped_after_oom(self._cell_fields(cell), oom_at, self._config(cell),
                                                   environment=self.environment))
                    outcome = Outcome(cell, "skipped", 0.0, device, f"after OOM at batch {oom_at}")
                else:
                    outcome = self._execute(cell, device, started)
                    if outcome.status == "oom":
                        oom_at = cell.batch_size
                with self._lock:
                    summary.outcomes.append(outcome)
                progress.finish(outcome)

    def _execute(self, cell: Cell, device: str, started: float) -> Outcome:
        parameters = notebook_parameters(cell, self.results_path, self.run_id)
        offset = self._size()  # the notebook's record, if any, is appended after this
        try:
            returncode, log_path = self.executor(cell, device, parameters, self.out_dir)
        except Exception as exc:  # the executor itself failed: still one record for the cell
            returncode, log_path = -1, None
            failure = f"{type(exc).__name__}: {exc}"
        else:
            failure = None
        seconds = time.monotonic() - started
        record = self._new_record(cell, offset)
        if record is not None:
            return Outcome(cell, record["status"], seconds, device,
                           (record.get("error") or "").strip().splitlines()[-1][:160]
                           if record.get("error") else "")
        tail = failure or (log_tail(log_path) if log_path else "(no log)")
        message = (f"the notebook ended (exit status {returncode}) without recording the cell; "
                   f"the kernel may have died. Last lines of its log:\n{tail}")
        self._append(failure_record(**self._cell_fields(cell), status="error", error=message,
                                    config=self._config(cell), environment=self.environment,
                                    log=str(log_path) if log_path else None))
        return Outcome(cell, "error", seconds, device, f"no record (exit status {returncode})")

    def _size(self) -> int:
        if not self.results_path.exists():
            return 0
        with locked(self.results_path, shared=True):  # a size between whole lines
            return self.results_path.stat().st_size

    def _new_record(self, cell: Cell, offset: int) -> dict[str, Any] | None:
        """The record the notebook appended for ``cell`` after ``offset``, if any."""
        if not self.results_path.exists():
            return None
        with locked(self.results_path, shared=True):
            for _, record in iter_records(self.results_path, start=offset):
                if cell_identity(record) == cell.identity():
                    return record
        return None

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            append_record(self.results_path, record)

    @staticmethod
    def _cell_fields(cell: Cell) -> dict[str, Any]:
        return dict(study=cell.study, task=cell.task, model=cell.model, batch_size=cell.batch_size,
                    compile_mode=cell.compile_mode, dtype=cell.dtype, device=cell.device)

    @staticmethod
    def _config(cell: Cell) -> dict[str, Any]:
        return {"weights": cell.weights, "seed": cell.seed, "runs": cell.runs,
                "warmup": cell.warmup, "blocks": cell.blocks, "tf32": cell.tf32}


# --- progress and summary -------------------------------------------------------------------

class Progress:
    """One bar over all cells (tqdm on a terminal; one plain line per cell in logs)."""

    def __init__(self, total: int, stream) -> None:
        self.total, self.stream, self.done = total, stream, 0
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.bar = None
        if getattr(stream, "isatty", lambda: False)():
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=stream, unit="cell", dynamic_ncols=True)

    def start(self, cell: Cell, device: str) -> None:
        with self.lock:
            text = f"{cell.model} bs{cell.batch_size} {cell.compile_mode} {cell.dtype} on {device}"
            if self.bar is not None:
                self.bar.set_description(text)
            else:
                print(f"[{self.done + 1}/{self.total}] measuring {text}", file=self.stream, flush=True)

    def finish(self, outcome: Outcome) -> None:
        with self.lock:
            self.done += 1
            if self.bar is not None:
                self.bar.update(1)
                return
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.done * (self.total - self.done)
            detail = f": {outcome.message}" if outcome.message and outcome.status != "ok" else ""
            print(f"[{self.done}/{self.total}] {outcome.cell.cell_id}: {outcome.status} "
                  f"({outcome.seconds:.0f} s){detail}; ETA {eta / 60:.1f} min",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def format_summary(summary: Summary, results_path: Path, slowest: int = 3) -> str:
    counts = summary.counts()
    if not summary.outcomes:
        return (f"all {summary.total} cells already measured for this environment; nothing to do "
                f"(--force measures again). Results: {results_path}")
    lines = [f"cells: {summary.total} in the grid, {summary.resumed} already measured, "
             f"{len(summary.outcomes)} run now: {counts.get('ok', 0)} ok, {counts.get('oom', 0)} oom, "
             f"{counts.get('error', 0)} error, {counts.get('skipped', 0)} skipped after an OOM"]
    ranked = sorted(summary.outcomes, key=lambda outcome: outcome.seconds, reverse=True)[:slowest]
    lines.append("slowest: " + ", ".join(f"{o.cell.cell_id} ({o.seconds:.0f} s)" for o in ranked))
    for outcome in summary.outcomes:
        if outcome.status == "error":
            lines.append(f"error: {outcome.cell.cell_id} on {outcome.device}: {outcome.message}")
    lines.append(f"results: {results_path}  executed notebooks: {results_path.parent / 'notebooks'}")
    return "\n".join(lines)
