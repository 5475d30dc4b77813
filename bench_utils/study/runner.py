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

Executing a notebook is ``execution``; what the person watching sees is ``progress``.
"""

from __future__ import annotations

from collections import defaultdict
import os
from pathlib import Path
import queue
import sys
import threading
import time
from typing import Any, Callable

from ..env import capture_environment
from ..kernel import ensure_kernel
from ..paths import REPORTS_DIR
from ..records import (cell_identity, environment_key, failure_record, measurement_settings,
                       settings_hash, skipped_after_oom)
from ..results import append_record, iter_records, locked
from .device_lock import device_lock, split_cpus
from .execution import execute_with_papermill, log_tail, notebook_parameters, oom_kill_count
from .grid import Cell, Grid
from .lease import RunnerLease
from .progress import Outcome, Progress, RunOutcome
from .resume import group_key, oom_batches, read_done
from .stopping import RunningProcesses, StopOnSignal



Executor = Callable[[Cell, str, dict[str, Any], Path], "tuple[int, Path]"]


def default_cell_timeout(grid: Grid) -> int:
    """Seconds a cell may run before it is stopped: 30 minutes for loading and compiling, plus
    20 s for each call it times (warm-up and runs, eager and compiled interleaved): hours
    where a cell could take them, never unbounded."""
    return max(1800 + 20 * (cell.warmup + cell.runs) for cell in grid.cells)


class Runner:
    """Runs a Grid's pending cells; ``run()`` returns a RunOutcome."""

    def __init__(self, grid: Grid, out_dir: str | os.PathLike | None = None, *,
                 force: bool = False, devices: list[str] | None = None,
                 executor: Executor | None = None, timeout: int | None = None,
                 stream=None) -> None:
        self.grid = grid
        # Resolved once, here: the kernels run from the project root, not from this directory.
        self.out_dir = Path(out_dir).resolve() if out_dir else REPORTS_DIR / grid.study
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise ValueError(f"--out {self.out_dir} is a file, not a study folder")
        self.results_path = self.out_dir / "results.jsonl"
        self.force = force
        self.devices = devices
        # A stuck cell must not stall the grid for ever: bounded by default, from the cells' size.
        self.timeout = timeout or default_cell_timeout(grid)
        self.uses_papermill = executor is None
        self.running = RunningProcesses()
        self.affinity: dict[str, set[int]] = {}
        self.executor = executor or (lambda cell, device, params, out: execute_with_papermill(
            cell, device, params, out, self.timeout, self.running, self.affinity.get(device)))
        self.stream = stream or sys.stderr
        self.environment = capture_environment()
        self._lock = threading.Lock()

    def workers(self, kind: str) -> list[str]:
        if self.devices:
            chosen = [device for device in self.devices if device.split(":")[0] == kind]
            if chosen:
                return chosen
        return self.grid.workers(kind)

    def check_devices(self) -> list[str]:
        """Every worker's device, checked against this machine before anything runs.

        A GPU that is not there, or one device listed twice (two measurements on one
        device at once), is refused in one line rather than failing every cell.
        """
        kinds = sorted({cell.device for cell in self.grid.cells})
        unused = [device for device in self.devices or [] if device.split(":")[0] not in kinds]
        if unused:
            raise ValueError(f"--devices {unused[0]}: the grid has no {unused[0].split(':')[0]} cells "
                             f"(its devices: {', '.join(kinds)})")
        workers = [device for kind in kinds for device in self.workers(kind)]
        twice = sorted({device for device in workers if workers.count(device) > 1})
        if twice:
            raise ValueError(f"device {twice[0]} is listed twice: one worker per device, so that "
                             "no two measurements share it")
        visible = self.environment.get("gpu_count") or 0
        for device in workers:
            if device.startswith("cuda") and int(device.partition(":")[2] or 0) >= visible:
                raise ValueError(f"the grid needs {device}, but this machine shows {visible} CUDA "
                                 f"device(s){'' if visible else ': run a CPU grid, or on a GPU machine'}")
        return workers

    def key(self, cell: Cell) -> tuple:
        """The cell's identity on this machine's environment (see ``records.record_key``)."""
        return (*cell.identity(), settings_hash(self._config(cell), cell.compile_mode),
                *environment_key(self.environment, cell.device))

    def pending(self) -> tuple[list[Cell], int]:
        done = set() if self.force else read_done(self.results_path)
        # OOMs of earlier runs still rule out larger batches (not with --force: all is measured again)
        self.earlier_ooms = {} if self.force else oom_batches(self.results_path)
        pending = [cell for cell in self.grid.cells if self.key(cell) not in done]
        return pending, len(self.grid.cells) - len(pending)

    def run(self) -> RunOutcome:
        workers = self.check_devices()
        if len(workers) > 1:  # disjoint cores per worker: two kernels never share one
            self.affinity = dict(zip(workers, split_cpus(os.sched_getaffinity(0), len(workers))))
        if self.uses_papermill:
            ensure_kernel()
        with RunnerLease(self.out_dir, self.results_path) as lease, \
                StopOnSignal(self.running.end_all) as self.stop:
            self.run_id = lease.run_id
            pending, resumed = self.pending()
            tally = RunOutcome(resumed=resumed, total=len(self.grid.cells))
            if not pending:
                return tally
            progress = Progress(len(pending), self.stream)
            groups: dict[str, queue.Queue] = defaultdict(queue.Queue)
            by_group: dict[tuple, list[Cell]] = defaultdict(list)
            for cell in pending:
                by_group[cell.group].append(cell)
            for group_cells in by_group.values():
                groups[group_cells[0].device].put(sorted(group_cells, key=lambda c: c.batch_size))
            threads = [threading.Thread(target=self._work, args=(groups[kind], device, tally, progress),
                                        name=f"worker-{device}")
                       for kind in groups for device in self.workers(kind)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()  # the lease is held until every worker has stopped
            progress.close()
            tally.not_run = len(pending) - len(tally.outcomes)
            tally.signal = self.stop.signal
        return tally

    def _work(self, groups: queue.Queue, device: str, tally: RunOutcome, progress: "Progress") -> None:
        try:
            self._work_through(groups, device, tally, progress)
        except BaseException as exc:  # a full disk, say: stop the run and say so, never die silently
            with self._lock:
                tally.worker_errors.append(f"worker {device}: {type(exc).__name__}: {exc}")
            self.stop.requested.set()
            self.running.end_all()

    def _work_through(self, groups: queue.Queue, device: str, tally: RunOutcome,
                      progress: "Progress") -> None:
        while not self.stop.requested.is_set():
            try:
                cells = groups.get_nowait()
            except queue.Empty:
                return
            oom_at = self.earlier_ooms.get(group_key(self.key(cells[0])))
            for cell in cells:
                if self.stop.requested.is_set():
                    return  # no new cell once a stop was asked for
                progress.start(cell, device)
                started = time.monotonic()
                if oom_at is not None and cell.batch_size > oom_at:
                    self._append(skipped_after_oom(self._cell_fields(cell), oom_at, self._config(cell),
                                                   environment=self.environment))
                    outcome = Outcome(cell, "skipped", 0.0, device, f"after OOM at batch {oom_at}")
                else:
                    with device_lock(device, say=lambda line: print(f"[run] {line}", file=self.stream),
                                     cancelled=self.stop.requested.is_set) as held:
                        outcome = self._execute(cell, device, started) if held else None
                    if outcome is None:  # cut short by a stop request: no record, measured next run
                        return
                    if outcome.status == "oom":
                        oom_at = min(cell.batch_size, oom_at or cell.batch_size)
                with self._lock:
                    tally.outcomes.append(outcome)
                progress.finish(outcome)

    def _execute(self, cell: Cell, device: str, started: float) -> Outcome | None:
        parameters = notebook_parameters(cell, self.results_path, self.run_id)
        offset = self._size()  # the notebook's record, if any, is appended after this
        oom_kills = oom_kill_count()
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
        if self.stop.requested.is_set():
            return None  # ended by the stop request, not by a fault of its own
        tail = failure or (log_tail(log_path) if log_path else "(no log)")
        if "CellTimeoutError" in tail or "Cell execution timed out" in tail:
            tail = f"the cell ran longer than {self.timeout} s (--timeout) and was stopped.\n{tail}"
        killed_for_memory = returncode != 0 and oom_kills is not None and (oom_kill_count() or 0) > oom_kills
        status = "oom" if killed_for_memory else "error"
        cause = ("the operating system's out-of-memory killer ended a process meanwhile: the kernel "
                 "ran out of host memory" if killed_for_memory else "the kernel may have died")
        message = (f"the notebook ended (exit status {returncode}) without recording the cell; "
                   f"{cause}. Last lines of its log:\n{tail}")
        self._append(failure_record(**self._cell_fields(cell), status=status, error=message,
                                    config=self._config(cell), environment=self.environment,
                                    log=str(log_path) if log_path else None))
        return Outcome(cell, status, seconds, device, f"no record (exit status {returncode})")

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
        return {**measurement_settings(runs=cell.runs, warmup=cell.warmup, blocks=cell.blocks,
                                       weights=cell.weights, seed=cell.seed, tf32=cell.tf32,
                                       backend=cell.backend, fullgraph=cell.fullgraph, dynamic=cell.dynamic),
                "weights": None}  # nothing was measured
