"""The grid runner: a whole study from one YAML file, crash-proof and resumable (``docs/study.md``, "Running a grid").

One kernel per kernel group (``grid.kernel_groups``), followed through the results file (``kernel_watch``), so that a
kernel that dies, is OOM-killed or stalls costs one cell. ``START_FAILURES_IN_A_ROW`` groups in a row that fail to
start stop the run: the environment fails, not a cell (the first pipelined H200 lease started 22 kernels that all
died on one missing torch hook).
"""

from __future__ import annotations

from collections import Counter, defaultdict
import dataclasses
import os
from pathlib import Path
import queue
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ...errors import UserError
from ...environment.capture import capture_environment
from ...kernel import ensure_kernel
from ...records.key import RecordKey
from ...records.build import failure_record, skipped_after_oom, unmeasured_config
from ...records.results_file import append_record, locked, read_records
from ...records.schema import Record
from .device_lock import device_lock, split_cpus
from .papermill_execution import execute_with_papermill, log_tail, notebook_parameters
from ..grid.grid_file import Cell, Grid, keep_grid_copy
from ..grid.kernel_groups import KernelGroup, for_workers, kernel_groups
from ..grid.pending import Pending
from ..pricing.plan import plan_run
from .device_workers import check_workers, workers_of
from .kernel_watch import CELL_DIED, DONE, OOM_KILLED, STOPPED, TIMED_OUT, KernelWatch, default_cell_timeout
from .study_folder import study_folder
from ..lease import RunnerLease
from .progress_display import Outcome, Progress, ProgressView, RunOutcome
from .resume import oom_batches, read_done
from .unsteady import keeps_compiles, once_more
from .clean_stop import RunningProcesses, StopOnSignal
from ...vocabulary import Status
from ...zoo.hub import expected_weights

if TYPE_CHECKING:
    from .time_limit import TimeLimit

# executor(group, device, parameters, out_dir, poll, attempt) -> (exit status, log path);
# it calls poll() every second or so while the kernel runs, and ends the kernel when it is True.
Executor = Callable[[KernelGroup, str, dict[str, Any], Path, Callable[[], bool], int], "tuple[int, Path]"]
KILLS_BEFORE_ERROR = 2   # a cell that ends its kernel this often is an error, not bad luck
START_FAILURES_IN_A_ROW = 3   # kernel groups in a row none of whose kernels began a cell: the run stops


class Runner:
    """Runs a Grid's pending cells; ``run()`` returns a RunOutcome."""

    _view: ProgressView  # the pass's progress view, set by ``_pass``

    def __init__(self, grid: Grid, out_dir: str | os.PathLike | None = None, *,
                 force: bool = False, devices: list[str] | None = None,
                 executor: Executor | None = None, timeout: int | None = None,
                 stream=None, progress: Callable[[int, Any], ProgressView] = Progress,
                 grid_file: str | os.PathLike | None = None, grid_copy: str | None = None,
                 environment: dict[str, Any] | None = None, time_limit: TimeLimit | None = None) -> None:
        """``environment``: the machine's as the records will say it (``environment.capture``; a dry run priced for
        another GPU gives that GPU's); ``time_limit``: the deadline, and which cells may still start
        (``time_limit.time_limit_for``)."""
        if grid.accelerators:
            raise UserError(f"{grid.path}: accelerators: the grid covers a cluster's accelerator types "
                            f"({', '.join(grid.accelerators)}): run it with --executor ray")
        self.grid = grid
        self.grid_file = grid_file  # copied into the study folder once the run has started (``keep_grid_copy``)
        self.grid_copy = grid_copy  # under that name (None: grid.yaml)
        self.out_dir = study_folder(grid, out_dir)
        self.results_path = self.out_dir / "results.jsonl"
        self.force = force
        self.devices = devices
        # A stuck cell must not stall the grid for ever: bounded by default, from the cells' size.
        self.timeout = timeout or default_cell_timeout(grid)
        self.uses_papermill = executor is None
        self.running = RunningProcesses()
        self.affinity: dict[str, set[int]] = {}
        self.executor = executor or (lambda group, device, params, out, poll, attempt: execute_with_papermill(
            group, device, params, out, poll=poll, attempt=attempt, running=self.running,
            cpus=self.affinity.get(device)))
        self.stream = stream or sys.stderr
        self.progress = progress  # (pending cells, stream) -> what the person watching sees
        self.environment = environment if environment is not None else capture_environment()
        self.time_limit = time_limit  # cells that fit, and the stop at its deadline; None: no limit
        self.stop = StopOnSignal(self.running.end_all, time_limit)  # SIGINT, SIGTERM, the limit: entered by run()
        self.run_id: str | None = None  # the lease's, while run() holds the study folder
        self._lock = threading.Lock()
        self._tally = RunOutcome()  # run()'s, which its workers add to
        self._start_failures = 0    # kernel groups in a row that failed to start

    def key(self, cell: Cell) -> RecordKey:
        """The key its record will have, measured on this machine (``records.key.RecordKey``)."""
        return RecordKey.of(cell.identity(), unmeasured_config(cell.settings), self.environment)

    def done_keys(self, cell: Cell) -> set[RecordKey]:
        """The keys (``without_study``) a record measuring ``cell`` here may have: its own and, where it asks
        for ``auto`` weights, that of a request for what ``auto`` comes to here (``zoo.hub.expected_weights``:
        random where the hub is out of reach), the same measurement."""
        keys = {self.key(cell).without_study()}
        expected = expected_weights(cell.settings.weights, cell.model)
        if expected != cell.settings.weights:
            settings = dataclasses.replace(cell.settings, weights=expected)
            keys.add(RecordKey.of(cell.identity(), unmeasured_config(settings), self.environment).without_study())
        return keys

    def pending(self) -> Pending:
        """What of the grid the study folder lacks, as its records say now (``--force``: all of it)."""
        done = set() if self.force else read_done(self.results_path)
        cells = tuple(cell for cell in self.grid.cells if not self.done_keys(cell) & done)
        return Pending(cells, len(self.grid.cells) - len(cells), tuple(self._ruled_out(cells).items()))

    def _ruled_out(self, cells: Iterable[Cell]) -> dict[Cell, int]:
        """Those of ``cells`` an out-of-memory error recorded so far rules out, with the batch size that ran out
        (not with --force: all is measured again)."""
        ooms = {} if self.force else oom_batches(self.results_path)
        found = {cell: ooms.get(self.key(cell).without_study().without_batch_size()) for cell in cells}
        return {cell: oom_at for cell, oom_at in found.items() if oom_at is not None and cell.batch_size > oom_at}

    def plan(self, reports_dir: str | os.PathLike | None = None, device_model: str | None = None):
        """The dry run's plan of what is pending (``pricing.plan.plan_run``)."""
        return plan_run(self.pending(), self.grid, results_path=self.results_path, environment=self.environment,
                        devices=list(self.devices or self.grid.devices), reports_dir=reports_dir,
                        device_model=device_model)

    def run(self, announce: Callable[[], None] | None = None) -> RunOutcome:
        """Run the pending cells; ``announce`` is called once this runner holds the study folder (a runner
        refused it says only why)."""
        workers = check_workers(self.grid, self.devices, self.environment)
        self._start_failures = 0  # each run counts its own (a runner may run again after a stop)
        if len(workers) > 1:  # disjoint cores per worker: two kernels never share one
            self.affinity = dict(zip(workers, split_cpus(os.sched_getaffinity(0), len(workers))))
        if self.uses_papermill:
            ensure_kernel()
        with RunnerLease(self.out_dir, self.results_path) as lease, self.stop:
            self.run_id = lease.run_id
            if announce is not None:
                announce()
            if self.grid_file is not None:  # the run has started: the folder now keeps the grid it runs
                keep_grid_copy(self.grid_file, self.out_dir, *([self.grid_copy] if self.grid_copy else []))
            # a runner killed outright (SIGKILL) left its kernels' progress files: this run holds the lease now
            for stale in (*self.out_dir.glob("logs/*.progress"), *self.out_dir.glob("logs/*.progress.partial")):
                stale.unlink(missing_ok=True)
            pending = self.pending()
            tally = self._tally = RunOutcome(resumed=pending.resumed, total=len(self.grid.cells))
            if not pending.cells:
                return tally
            self._pass(list(pending.cells))
            tally.not_run = len(pending.cells) - len(tally.outcomes)
            read = not self.stop.requested.is_set() and self.results_path.exists()
            again = once_more(self.grid.cells, read_records(self.results_path) if read else [], self.key)
            if again:  # unsteady cells (``unsteady``): once more each, where the time limit lets them start
                self.stream.write(f"[run] {len(again)} cell(s) whose block means changed regime: measured once more, "
                                  "as one more replicate each\n")
                done = len(tally.outcomes)
                self._pass(again)
                tally.again = len(tally.outcomes) - done
            tally.signal = self.stop.signal
        return tally

    def _pass(self, cells: list[Cell]) -> None:
        """``cells``, kernel group by kernel group, one worker per device, with a progress view of their own."""
        self._view = view = self.progress(len(cells), self.stream)
        if self.time_limit is not None:
            view.limit_left = self.time_limit.left
        by_kind: dict[str, list[KernelGroup]] = defaultdict(list)
        for group in kernel_groups(cells):
            by_kind[group.device].append(group)
        threads = []
        for kind, groups in by_kind.items():
            workers = workers_of(self.grid, self.devices, kind)
            queued: queue.Queue = queue.Queue()
            for group in for_workers(groups, len(workers)):
                queued.put(group)
            threads += [threading.Thread(target=self._work, args=(queued, device), name=f"worker-{device}")
                        for device in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()  # the lease is held until every worker has stopped
        view.close()

    def _work(self, groups: queue.Queue, device: str) -> None:
        try:
            while not self.stop.requested.is_set():
                try:
                    group = groups.get_nowait()
                except queue.Empty:
                    return
                self._run_group(group, device)
        except BaseException as exc:  # a full disk, say: stop the run and say so, never die silently
            with self._lock:
                self._tally.worker_errors.append(f"worker {device}: {type(exc).__name__}: {exc}")
            self.stop.requested.set()
            self.running.end_all()

    def _finish(self, outcome: Outcome) -> None:
        with self._lock:
            self._tally.outcomes.append(outcome)
        self._view.finish(outcome)

    def _record_skipped(self, cell: Cell, oom_at: int, device: str) -> None:
        self._append(skipped_after_oom(cell.identity().cell_block(), oom_at, unmeasured_config(cell.settings),
                                       environment=self.environment))
        self._finish(Outcome(cell, "skipped", 0.0, device, f"after OOM at batch {oom_at}"))

    def _record_failure(self, outcome: Outcome, error: str, log: str | None) -> None:
        """``outcome``'s cell recorded as it failed (``error``, ending with its kernel's log), and ended so."""
        cell = outcome.cell
        self._append(failure_record(cell.identity().cell_block(), status=outcome.status, error=error,
                                    config=unmeasured_config(cell.settings), environment=self.environment, log=log))
        self._finish(outcome)

    def _run_group(self, group: KernelGroup, device: str) -> None:
        """Measure a group's cells in as few kernels as its failures allow. Before each kernel, the cells an
        out-of-memory error recorded so far rules out are recorded as skipped (a kernel cut short by a time limit
        leaves its larger batch sizes to the next kernel: they must not run there)."""
        remaining, kills, attempt = list(group.cells), Counter[Cell | None](), 0
        while True:
            ruled_out = self._ruled_out(remaining)  # read afresh: what every kernel so far recorded
            for cell, oom_at in ruled_out.items():
                self._record_skipped(cell, oom_at, device)
            remaining = [cell for cell in remaining if cell not in ruled_out]
            if not remaining or self.stop.requested.is_set():
                return
            attempt += 1
            if not (fit := self.time_limit.fitting(group, remaining) if self.time_limit else remaining):
                return  # none would finish before the time limit: left for a later run
            with device_lock(device, say=lambda line: print(f"[run] {line}", file=self.stream),
                             cancelled=self.stop.requested.is_set) as held:
                if not held:
                    return  # a stop request while waiting for the device
                remaining = (self._run_kernel(group, fit, device, attempt, kills)
                             + [cell for cell in remaining if cell not in fit])

    def _run_kernel(self, group: KernelGroup, cells: list[Cell], device: str, attempt: int,
                    kills: Counter[Cell | None]) -> list[Cell]:
        """One kernel over ``cells``; returns the cells left for the next kernel."""
        this_kernel = KernelGroup(group.group_id, tuple(cells))
        view = self._view

        def on_record(cell: Cell, record: Record, seconds: float) -> None:
            status = Status.SKIPPED if record.skipped_after_oom is not None else record.status
            self._finish(Outcome(cell, status, seconds, device, (record.error_line or "")[:160]))
            if watch.remaining:
                view.start(watch.remaining[0], device)

        progress_path = self.out_dir / "logs" / f"{group.group_id}.{attempt}.progress"
        progress_path.unlink(missing_ok=True)
        watch = KernelWatch(self.results_path, progress_path, cells, self._size(), self.timeout,
                            self.stop.requested.is_set, on_record)
        parameters = notebook_parameters(this_kernel, self.results_path, str(self.run_id), progress_path,
                                         keep_compiles=keeps_compiles(self.grid.cells))
        view.start(cells[0], device)
        log_path: Path | None
        failure: str | None = None
        try:
            returncode, log_path = self.executor(this_kernel, device, parameters, self.out_dir, watch.poll, attempt)
        except Exception as exc:  # the executor itself failed: the cells still get their records
            returncode, log_path, failure = -1, None, f"{type(exc).__name__}: {exc}"
        watch.read_new_records()
        ending, cell = watch.ending(returncode)
        progress_path.unlink(missing_ok=True)
        if ending in (DONE, STOPPED) or cell is not None:
            with self._lock:
                self._start_failures = 0  # a kernel began a cell: the environment works
        if ending in (DONE, STOPPED):
            return watch.remaining
        tail = failure or (log_tail(log_path) if log_path else "(no log)")
        log = str(log_path) if log_path else None
        seconds = time.monotonic() - watch.last_event
        rest = [other for other in watch.remaining if other != cell]
        if ending == CELL_DIED or cell is None:  # a failed (or hung) start too: tried again, then charged
            kills[cell] += 1
            if kills[cell] < KILLS_BEFORE_ERROR:
                if cell is not None:
                    print(f"[run] the kernel of {group.group_id} ended (exit status {returncode}) while "
                          f"measuring {cell.cell_id}: a new kernel takes up its {len(watch.remaining)} unfinished "
                          "cell(s)", file=self.stream, flush=True)
                return watch.remaining
        if cell is None:  # it began no cell: its start failed, not a cell's measurement
            for each in watch.remaining:
                self._record_failure(Outcome(each, Status.ERROR, seconds, device, "the kernel did not start"),
                                     f"the notebook's kernel ended (exit status {returncode}) before it began any "
                                     f"cell, {kills[None]} times: its start fails. Last lines of its log:\n{tail}", log)
            self._start_failed(group.group_id, tail)
            return []
        if ending == TIMED_OUT:
            self._record_failure(Outcome(cell, Status.ERROR, seconds, device, f"timed out after {self.timeout} s"),
                                 f"the cell recorded nothing for {self.timeout} s (--timeout) and its kernel was "
                                 f"stopped.\n{tail}", log)
            return rest
        if ending == OOM_KILLED:  # the cell is oom, and the larger batches of its mode skipped
            self._record_failure(Outcome(cell, Status.OOM, seconds, device, "killed by the OOM killer"),
                                 "the kernel was ended by the operating system's out-of-memory killer: it ran out "
                                 f"of host memory. Last lines of its log:\n{tail}", log)
            larger = [c for c in rest if c.compile_mode == cell.compile_mode and c.batch_size > cell.batch_size]
            for skipped in larger:
                self._record_skipped(skipped, cell.batch_size, device)
            return [c for c in rest if c not in larger]
        self._record_failure(Outcome(cell, Status.ERROR, seconds, device, f"no record (exit status {returncode})"),
                             f"the notebook's kernel ended (exit status {returncode}) while measuring this cell, "
                             f"{kills[cell]} times; the kernel may have died. Last lines of its log:\n{tail}", log)
        return rest

    def _start_failed(self, group_id: str, tail: str) -> None:
        """A group none of whose kernels began a cell: where it makes ``START_FAILURES_IN_A_ROW``, the run stops,
        its cells left unrecorded for a later run, once the cause is fixed."""
        with self._lock:
            self._start_failures += 1
            if self._start_failures < START_FAILURES_IN_A_ROW:
                return
            self._tally.worker_errors.append(
                f"{self._start_failures} kernel groups in a row (the last: {group_id}) ended before they began any "
                "cell: the environment fails, not a cell, so the run stops; the cells left are not recorded, and a "
                f"later run measures them once the cause is fixed. Last lines of the last kernel's log:\n{tail}")
        self.stop.stop_now()  # the groups left are not started

    def _size(self) -> int:
        if not self.results_path.exists():
            return 0
        with locked(self.results_path, shared=True):  # a size between whole lines
            return self.results_path.stat().st_size

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            append_record(self.results_path, record)
