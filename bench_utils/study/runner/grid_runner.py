"""The grid runner: a whole study from one YAML file, crash-proof and resumable.

``python -m bench_utils run PARAMS.yaml [--out DIR] [--force] [--devices cuda:0,cuda:1] [--time-limit 9m]``

The cells are run in kernel groups (``groups``): one papermill execution of the task notebook, in its own kernel
process, measures every pending cell of one (task, model, dtype, device), so torch is imported and the model built
once per group, not once per cell. The kernel appends one record per cell as soon as it is measured (``ok``, ``oom``
or ``error``; the notebook's own OOM rule skips larger batches), and the runner follows the results file while it runs:

- a kernel that dies (a segfault, a killed process) loses only the cell it was measuring: a new kernel takes up the
  group's unfinished cells; a cell that kills its kernel twice is recorded ``error`` with its log's end;
- a kernel ended by the operating system's OOM killer records that cell ``oom``, its mode's larger batches skipped;
- a cell that records nothing for ``timeout`` seconds is stopped and recorded as ``error``, the group going on;
- cells recorded ``ok`` or ``oom`` for the same environment (torch version, GPU or CPU model) are skipped: running
  again resumes; an OOM recorded so far, in this run or an earlier one, rules out larger batches;
- one worker per device (CUDA_VISIBLE_DEVICES); with a ``time_limit`` a kernel starts only the cells that fit.
- after the grid, a compiled cell whose block means changed regime is measured once more, as one more replicate
  (``unsteady``; on a GPU by default), where the time limit lets it start;
- nothing runs beside a timed window: one kernel a device, one after another (several devices: each kernel on cores
  of its own, ``device_lock.split_cpus``).

Executing a notebook is ``papermill_execution``, following it ``kernel_watch``; the person watching sees
``progress_display``."""

from __future__ import annotations

from collections import Counter, defaultdict
import dataclasses
from dataclasses import dataclass
import os
from pathlib import Path
import queue
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

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
from .device_workers import check_workers, workers_of
from .kernel_watch import DONE, OOM_KILLED, STOPPED, TIMED_OUT, KernelWatch, default_cell_timeout
from .study_folder import study_folder
from ..lease import RunnerLease
from .progress_display import Outcome, Progress, ProgressView, RunOutcome
from .resume import oom_batches, read_done
from .unsteady import keeps_compiles, once_more
from .clean_stop import RunningProcesses, StopOnSignal
from .start_failures import StartFailures
from ...vocabulary import Status
from ...zoo.hub import expected_weights

if TYPE_CHECKING:
    from .time_limit import TimeLimit

# executor(group, device, parameters, out_dir, poll, attempt) -> (exit status, log path);
# it calls poll() every second or so while the kernel runs, and ends the kernel when it is True.
Executor = Callable[[KernelGroup, str, dict[str, Any], Path, Callable[[], bool], int], "tuple[int, Path]"]
KILLS_BEFORE_ERROR = 2   # a cell that ends its kernel this often is an error, not bad luck


class Runner:
    """Runs a Grid's pending cells; ``run()`` returns a RunOutcome."""

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
        self.start_failures = StartFailures()  # kernel groups in a row that failed to start: the run stops

    def workers(self, kind: str) -> list[str]:
        return workers_of(self.grid, self.devices, kind)

    def check_devices(self) -> list[str]:
        return check_workers(self.grid, self.devices, self.environment)

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
        ooms = self._ooms()
        ruled_out = tuple((cell, oom_at) for cell in cells if (oom_at := self._oom_at(cell, ooms)) is not None)
        return Pending(cells, len(self.grid.cells) - len(cells), ruled_out)

    def _ooms(self) -> dict[RecordKey, int]:
        # OOMs recorded so far rule out larger batches (not with --force: all is measured again)
        return {} if self.force else oom_batches(self.results_path)

    def _oom_at(self, cell: Cell, ooms: dict[RecordKey, int]) -> int | None:
        """The batch size that ran out of memory, if it rules this cell out."""
        oom_at = ooms.get(self.key(cell).without_study().without_batch_size())
        return oom_at if oom_at is not None and cell.batch_size > oom_at else None

    def plan(self, reports_dir: str | os.PathLike | None = None, device_model: str | None = None):
        """The dry run's plan of what is pending (``pricing.plan.plan_run``)."""
        from ..pricing.plan import plan_run

        return plan_run(self.pending(), self.grid, results_path=self.results_path, environment=self.environment,
                        devices=list(self.devices or self.grid.devices), reports_dir=reports_dir,
                        device_model=device_model)

    def run(self, announce: Callable[[], None] | None = None) -> RunOutcome:
        """Run the pending cells; ``announce`` is called once this runner holds the study folder (a runner
        refused it says only why)."""
        workers = self.check_devices()
        self.start_failures = StartFailures()  # each run counts its own (a runner may run again after a stop)
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
            tally = RunOutcome(resumed=pending.resumed, total=len(self.grid.cells))
            if not pending.cells:
                return tally
            self._pass(list(pending.cells), tally)
            tally.not_run = len(pending.cells) - len(tally.outcomes)
            again = [] if self.stop.requested.is_set() else self.once_more()
            if again:  # unsteady cells (``unsteady``): once more each, where the time limit lets them start
                self.stream.write(f"[run] {len(again)} cell(s) whose block means changed regime: measured once more, "
                                  "as one more replicate each\n")
                done = len(tally.outcomes)
                self._pass(again, tally)
                tally.again = len(tally.outcomes) - done
            tally.signal = self.stop.signal
        return tally

    def once_more(self) -> list[Cell]:
        """The grid's unsteady cells to measure once more (``unsteady.once_more``), as its records say now."""
        return once_more(self.grid.cells, read_records(self.results_path) if self.results_path.exists() else [],
                         self.key)

    def _pass(self, cells: list[Cell], tally: RunOutcome) -> None:
        """``cells``, kernel group by kernel group, one worker per device, with a progress view of their own."""
        progress = self.progress(len(cells), self.stream)
        if self.time_limit is not None:
            progress.limit_left = self.time_limit.left
        by_kind: dict[str, list[KernelGroup]] = defaultdict(list)
        for group in kernel_groups(cells):
            by_kind[group.device].append(group)
        queues: dict[str, queue.Queue] = defaultdict(queue.Queue)
        for kind, groups in by_kind.items():
            for group in for_workers(groups, len(self.workers(kind))):
                queues[kind].put(group)
        threads = [threading.Thread(target=self._work, args=(queues[kind], device, tally, progress),
                                    name=f"worker-{device}")
                   for kind in queues for device in self.workers(kind)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()  # the lease is held until every worker has stopped
        progress.close()

    def parameters(self, group: KernelGroup, progress_path: Path) -> dict[str, Any]:
        """The task notebook's parameters for a kernel of ``group`` in this run (``notebook_parameters``)."""
        return notebook_parameters(group, self.results_path, str(self.run_id), progress_path,
                                   keep_compiles=keeps_compiles(self.grid.cells))

    def _work(self, groups: queue.Queue, device: str, tally: RunOutcome, progress: ProgressView) -> None:
        try:
            while not self.stop.requested.is_set():
                try:
                    group = groups.get_nowait()
                except queue.Empty:
                    return
                self._run_group(group, device, tally, progress)
        except BaseException as exc:  # a full disk, say: stop the run and say so, never die silently
            with self._lock:
                tally.worker_errors.append(f"worker {device}: {type(exc).__name__}: {exc}")
            self.stop.requested.set()
            self.running.end_all()

    def _finish(self, outcome: Outcome, tally: RunOutcome, progress: ProgressView) -> None:
        with self._lock:
            tally.outcomes.append(outcome)
        progress.finish(outcome)

    def _record_skipped(self, cells: list[Cell], oom_at: int, device: str, tally: RunOutcome, progress: ProgressView):
        for cell in cells:
            self._append(skipped_after_oom(cell.identity().cell_block(), oom_at, unmeasured_config(cell.settings),
                                           environment=self.environment))
            self._finish(Outcome(cell, "skipped", 0.0, device, f"after OOM at batch {oom_at}"), tally, progress)

    def _rule_out(self, cells: list[Cell], device: str, tally: RunOutcome, progress: ProgressView) -> list[Cell]:
        """``cells`` less those an out-of-memory error recorded so far rules out, recorded as skipped (a kernel
        cut short by a time limit leaves its larger batch sizes to the next kernel: they must not run there)."""
        ooms = self._ooms()  # read afresh by each worker: what every kernel so far recorded
        ruled_out = {cell: oom_at for cell in cells if (oom_at := self._oom_at(cell, ooms)) is not None}
        for cell, oom_at in ruled_out.items():
            self._record_skipped([cell], oom_at, device, tally, progress)
        return [cell for cell in cells if cell not in ruled_out]

    def _run_group(self, group: KernelGroup, device: str, tally: RunOutcome, progress: ProgressView) -> None:
        """Measure a group's cells in as few kernels as its failures allow."""
        remaining, kills, attempt = list(group.cells), Counter[Cell | None](), 0
        while (remaining := self._rule_out(remaining, device, tally, progress)) and not self.stop.requested.is_set():
            attempt += 1
            if not (fit := self.time_limit.fitting(group, remaining) if self.time_limit else remaining):
                return  # none would finish before the time limit: left for a later run
            with device_lock(device, say=lambda line: print(f"[run] {line}", file=self.stream),
                             cancelled=self.stop.requested.is_set) as held:
                if not held:
                    return  # a stop request while waiting for the device
                remaining = (self._run_kernel(group, fit, device, attempt, kills, tally, progress)
                             + [cell for cell in remaining if cell not in fit])

    def _run_kernel(self, group: KernelGroup, cells: list[Cell], device: str, attempt: int,
                    kills: Counter, tally: RunOutcome, progress: ProgressView) -> list[Cell]:
        """One kernel over ``cells``; returns the cells left for the next kernel."""
        this_kernel = KernelGroup(group.group_id, tuple(cells))

        def on_record(cell: Cell, record: Record, seconds: float) -> None:
            status = Status.SKIPPED if record.skipped_after_oom is not None else record.status
            error = record.error_line or ""
            self._finish(Outcome(cell, status, seconds, device, error[:160]), tally, progress)
            if watch.remaining:
                progress.start(watch.remaining[0], device)

        progress_path = self.out_dir / "logs" / f"{group.group_id}.{attempt}.progress"
        progress_path.unlink(missing_ok=True)
        watch = KernelWatch(self.results_path, progress_path, cells, self._size(), self.timeout,
                            self.stop.requested.is_set, on_record)
        parameters = self.parameters(this_kernel, progress_path)
        progress.start(cells[0], device)
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
            self.start_failures.began()
        if ending in (DONE, STOPPED):
            return watch.remaining
        died = _KernelEnd(group.group_id, device, returncode, cell, watch.remaining, time.monotonic() - watch.last_event,
                          failure or (log_tail(log_path) if log_path else "(no log)"), str(log_path) if log_path else None)
        if cell is None:  # it began no cell: its start failed (or hung), not a cell's measurement
            return self._start_failed(died, kills, tally, progress)
        if ending == TIMED_OUT:
            self._record_failure(cell, Status.ERROR, f"the cell recorded nothing for {self.timeout} s "
                                 f"(--timeout) and its kernel was stopped.\n{died.tail}", died.log)
            self._finish(died.outcome(cell, Status.ERROR, f"timed out after {self.timeout} s"), tally, progress)
            return died.rest
        if ending == OOM_KILLED:
            return self._host_oom(died, cell, tally, progress)
        return self._kernel_died(died, cell, kills, tally, progress)

    def _start_failed(self, died: _KernelEnd, kills: Counter[Cell | None], tally: RunOutcome, progress: ProgressView) -> list[Cell]:
        """A kernel that began no cell: a new one tries again, until the start has failed too often."""
        kills[None] += 1
        if kills[None] < KILLS_BEFORE_ERROR:
            return died.remaining
        for cell in died.remaining:
            self._record_failure(cell, Status.ERROR, f"the notebook's kernel ended (exit status "
                                 f"{died.returncode}) before it began any cell, {kills[None]} times: "
                                 f"its start fails. Last lines of its log:\n{died.tail}", died.log)
            self._finish(Outcome(cell, Status.ERROR, died.seconds, died.device, "the kernel did not start"),
                         tally, progress)
        if (why := self.start_failures.failed(died.group_id, died.tail)) is not None:
            with self._lock:
                tally.worker_errors.append(why)
            self.stop.stop_now()  # the groups left are not started
        return []

    def _host_oom(self, died: _KernelEnd, cell: Cell, tally: RunOutcome, progress: ProgressView) -> list[Cell]:
        """The OOM killer ended the kernel measuring ``cell``: it is ``oom``, and the larger batches of its mode
        skipped."""
        self._record_failure(cell, Status.OOM, "the kernel was ended by the operating system's "
                             "out-of-memory killer: it ran out of host memory. Last lines of its "
                             f"log:\n{died.tail}", died.log)
        self._finish(died.outcome(cell, Status.OOM, "killed by the OOM killer"), tally, progress)
        larger = [c for c in died.rest if c.compile_mode == cell.compile_mode and c.batch_size > cell.batch_size]
        self._record_skipped(larger, cell.batch_size, died.device, tally, progress)
        return [c for c in died.rest if c not in larger]

    def _kernel_died(self, died: _KernelEnd, cell: Cell, kills: Counter[Cell | None], tally: RunOutcome,
                     progress: ProgressView) -> list[Cell]:
        """The kernel ended measuring ``cell``: a new kernel takes up its cells, until that cell has ended one too
        often."""
        kills[cell] += 1
        if kills[cell] < KILLS_BEFORE_ERROR:
            print(f"[run] the kernel of {died.group_id} ended (exit status {died.returncode}) while "
                  f"measuring {cell.cell_id}: a new kernel takes up its {len(died.remaining)} unfinished "
                  "cell(s)", file=self.stream, flush=True)
            return died.remaining
        self._record_failure(cell, Status.ERROR, f"the notebook's kernel ended (exit status {died.returncode}) "
                             f"while measuring this cell, {kills[cell]} times; the kernel may have "
                             f"died. Last lines of its log:\n{died.tail}", died.log)
        self._finish(died.outcome(cell, Status.ERROR, f"no record (exit status {died.returncode})"), tally, progress)
        return died.rest

    def _record_failure(self, cell: Cell, status: str, message: str, log: str | None) -> None:
        self._append(failure_record(cell.identity().cell_block(), status=status, error=message,
                                    config=unmeasured_config(cell.settings), environment=self.environment, log=log))

    def _size(self) -> int:
        if not self.results_path.exists():
            return 0
        with locked(self.results_path, shared=True):  # a size between whole lines
            return self.results_path.stat().st_size

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            append_record(self.results_path, record)


@dataclass(frozen=True)
class _KernelEnd:
    """How a kernel ended before its cells were done: on which cell, and what its log said."""

    group_id: str
    device: str
    returncode: int
    cell: Cell | None          # the cell it was measuring; None: it began none
    remaining: list[Cell]      # its cells without a record, that one included
    seconds: float             # since its last record
    tail: str                  # the end of its log (or why the executor failed)
    log: str | None

    @property
    def rest(self) -> list[Cell]:
        return [c for c in self.remaining if c != self.cell]

    def outcome(self, cell: Cell, status: str, message: str) -> Outcome:
        """``cell``'s outcome (the one it was measuring), as this end makes it."""
        return Outcome(cell, status, self.seconds, self.device, message)

