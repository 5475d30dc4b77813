"""A study grid on a cluster: one task per kernel group and accelerator type, one results file (docs/cluster.md).

Each task (``node``) runs the local runner where it lands and streams back each cell's record as it is measured; the
driver alone appends them, under the study folder's lease, exactly once. A lost node's unrecorded cells go to another
task of the same kind (Ray's own retry would measure the whole group again); the cell in progress is charged as a dead
kernel's is locally (``MAX_NODE_LOSSES``). The cluster is behind ``Cluster``: Ray's, or the tests' own.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
import os
import sys
import threading
from typing import Any, Callable

from ..paths import scrub
from ..records.key import CellIdentity, RecordKey, cell_identity, record_key
from ..records.build import failure_record, unmeasured_config
from ..records.results_file import append_record, iter_records, locked
from ..records.schema import Record
from ..study.grid.grid_file import Cell, Grid
from ..study.grid.kernel_groups import KernelGroup, kernel_groups
from ..study.lease import RunnerLease
from ..study.runner.progress_display import Outcome, Progress, RunOutcome
from ..study.runner.resume import DONE_STATUSES
from ..study.runner.grid_runner import default_cell_timeout, study_folder
from ..study.runner.clean_stop import StopOnSignal
from .node import GroupTask
from .audit_trail import keep_files, kept_name
from .cluster_api import Cancelled, Cluster, HostOutOfMemory, NodeLost, TaskFailed
from .placement import live_nodes, task_resources

MAX_NODE_LOSSES = 3     # a group whose node is lost this often: its cells are errors, not bad luck
MAX_TASK_FAILURES = 2   # a task that raised this often: the nodes of its kind cannot run it


@dataclass
class _Work:
    """One kernel group on one accelerator type, until each of its cells has a record."""

    kind: str | None
    group: KernelGroup
    cells: list[Cell] = field(default_factory=list)   # not recorded yet
    tries: int = 0
    losses: Counter = field(default_factory=Counter)  # node losses per cell in progress (None: none)
    failures: int = 0
    node: str = "a node"
    current: str | None = None                     # the cell id its node began last
    environment: dict[str, Any] | None = None      # its node's, from the plan

    @property
    def label(self) -> str:
        return self.group.group_id + (f" on {self.kind}" if self.kind else "")


class ClusterRunner:
    """Runs a Grid's cells on a cluster; ``run(cluster)`` returns a RunOutcome."""

    def __init__(self, grid: Grid, out_dir: str | os.PathLike | None = None, *, force: bool = False,
                 timeout: int | None = None, stream=None,
                 progress: Callable[[int, Any], Progress] = Progress) -> None:
        self.grid = grid
        self.out_dir = study_folder(grid, out_dir)
        self.results_path = self.out_dir / "results.jsonl"
        self.force = force
        self.timeout = timeout or default_cell_timeout(grid)
        self.stream = stream or sys.stderr
        self.progress = progress
        self.kinds: list[str | None] = list(grid.accelerators) or [None]
        self._lock = threading.Lock()
        self.duplicates = 0   # records that came twice and were dropped

    def run(self, cluster: Cluster) -> RunOutcome:
        options = task_resources(self.grid, cluster.nodes())  # UserError before anything runs
        with RunnerLease(self.out_dir, self.results_path), StopOnSignal(cluster.cancel_all) as self.stop:
            self._read_study()
            tally = RunOutcome(total=len(self.grid.cells) * len(self.kinds))
            progress = self.progress(tally.total, self.stream)
            works = [_Work(kind, group, list(group.cells)) for kind in self.kinds
                     for group in kernel_groups(self.grid.cells)]
            threads = [threading.Thread(target=self._follow, args=(work, cluster, options, tally, progress),
                                        name=f"group-{work.label}") for work in works]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()  # the lease is held until every task is followed to its end
            progress.close()
            # cells of groups no node planned (a stop, a failed task) are counted here, resumed or not
            tally.not_run = tally.total - tally.resumed - len(tally.outcomes)
            tally.signal = self.stop.signal
        return tally

    # --- the study's records ------------------------------------------------------

    def _read_study(self) -> None:
        """What the study knows: records by cell (sent to nodes) and the keys already done."""
        self.records: dict[CellIdentity, list[Record]] = defaultdict(list)
        self.done: set[RecordKey] = set()
        self.recorded: set[tuple[str | None, CellIdentity]] = set()  # (kind, identity) recorded in this run
        if self.force or not self.results_path.exists():
            return  # --force: every cell is measured again, whatever the study holds
        with locked(self.results_path, shared=True):
            for _, record in iter_records(self.results_path):
                self.records[cell_identity(record)].append(record)
                if record.status in DONE_STATUSES:
                    self.done.add(record_key(record))

    def _append(self, work: _Work, record: Record) -> bool:
        """Append a node's record unless the study already has it; True if appended."""
        with self._lock:
            identity, key = cell_identity(record), record_key(record)
            if (work.kind, identity) in self.recorded or key in self.done:
                self.duplicates += 1
                return False
            append_record(self.results_path, record)
            self.recorded.add((work.kind, identity))
            if record.status in DONE_STATUSES:
                self.done.add(key)
            self.records[identity].append(record)
            return True

    def _task(self, work: _Work) -> GroupTask:
        with self._lock:
            # the whole group's: an oom of a cell recorded earlier still rules out its larger batches
            seeds = [record.to_json() for cell in work.group.cells for record in self.records.get(cell.identity(), [])]
        return GroupTask(study=self.grid.study, cells=[cell.to_parameters() for cell in work.cells],
                         timeout=self.timeout, accelerator=work.kind, seed_records=seeds)

    # --- following one group ---------------------------------------------------------

    def _follow(self, work: _Work, cluster: Cluster, options: dict, tally: RunOutcome,
                progress: Progress) -> None:
        try:
            while work.cells and not self.stop.requested.is_set():
                work.tries, work.current = work.tries + 1, None
                try:
                    for event in cluster.submit(self._task(work), options[(work.kind, work.group.device)]):
                        if self.stop.requested.is_set():
                            return  # the task is cancelled as its events are let go
                        self._on_event(work, event, tally, progress)
                    return  # cells it left unrecorded were not run (the node was stopped)
                except Cancelled:
                    if not self.stop.requested.is_set():
                        self._worker_error(tally, work, "its task was cancelled from outside this run")
                    return
                except (NodeLost, HostOutOfMemory, TaskFailed) as exc:
                    progress.idle(work.node)
                    if self.stop.requested.is_set():
                        return
                    self._after_failure(work, exc, cluster, tally, progress)
        except BaseException as exc:  # a full disk, say: stop the run and say so, never die silently
            self._worker_error(tally, work, f"{type(exc).__name__}: {exc}")
            self.stop.requested.set()
            cluster.cancel_all()

    def _after_failure(self, work: _Work, exc: Exception, cluster: Cluster, tally: RunOutcome,
                       progress: Progress) -> None:
        """What a failed task leaves: the cell it was on charged as the local runner charges a dead
        kernel's, the rest sent again (to a node of the same type, if one is left)."""
        cell = next((c for c in work.cells if c.cell_id == work.current), None)
        if isinstance(exc, HostOutOfMemory) and cell is not None:
            # as a local OOM kill: this cell is oom, and the next node, sent its record, skips the mode's larger batches
            self._record(work, cell, "oom", f"the host ran out of memory: Ray's memory monitor ended the "
                         f"node's worker while it measured this cell ({exc})", tally, progress)
        elif isinstance(exc, TaskFailed):
            work.failures += 1
            if work.failures >= MAX_TASK_FAILURES:
                return self._give_up(work, f"its task failed on the cluster {work.failures} times: {exc}",
                                     tally, progress)
            self._say(f"the task of {work.label} failed on {work.node} ({exc}); trying again")
        else:
            work.losses[cell] += 1
            if work.losses[cell] >= MAX_NODE_LOSSES:
                if cell is None:
                    return self._give_up(work, f"its node was lost {work.losses[cell]} times before it "
                                         f"began a cell (last: {exc})", tally, progress)
                self._record(work, cell, "error", f"its node was lost {work.losses[cell]} times while it "
                             f"measured this cell (last: {exc})", tally, progress)
            elif work.cells:
                self._say(f"{work.node} was lost while measuring {work.label} ({exc}): its "
                          f"{len(work.cells)} unrecorded cell(s) go to another node")
        if work.cells and not live_nodes(cluster.nodes(), work.kind, work.group.device):
            self._give_up(work, f"no live node{f' of accelerator type {work.kind}' if work.kind else ''} "
                          f"that can run it is left in the cluster (last failure: {exc})", tally, progress)

    def _on_event(self, work: _Work, event: dict[str, Any], tally: RunOutcome, progress: Progress) -> None:
        name = event["event"]
        by_id = {cell.cell_id: cell for cell in work.cells}
        if name == "plan":
            # what progress shows it measuring by: two tasks on one node differ by their GPU
            work.node = (f"node {str(event.get('node') or '?')[:8]}" + (f" {event['slot']}" if event.get("slot") else "")
                         + (f" ({work.kind})" if work.kind else ""))
            work.environment = event.get("environment")
            pending = set(event["pending"])
            self._resumed([cell for cell in work.cells if cell.cell_id not in pending], tally, progress)
            work.cells = [cell for cell in work.cells if cell.cell_id in pending]
        elif name == "start" and event["cell_id"] in by_id:
            work.current = event["cell_id"]
            progress.start(by_id[event["cell_id"]], work.node)
        elif name == "cell":
            cell, sent = by_id.get(event["cell_id"]), event["record"]
            if cell is None:  # recorded already (a record that came twice)
                with self._lock:
                    self.duplicates += 1
                return
            work.current = None
            if sent is None:
                self._worker_error(tally, work, f"{work.node} sent no record for {cell.cell_id}")
                return
            record = Record.from_json(sent)  # the node's line, as it wrote it
            if record.log:  # the node's log, as the driver keeps it
                record = record.model_copy(update={"log": str(self.out_dir / kept_name(
                    work.group, work.kind, work.tries, record.log))})
            self._count(work, cell, record, Outcome(cell, event["status"], event["seconds"], work.node,
                                                    event.get("message") or ""), tally, progress)
        elif name == "say":
            self._say(f"{work.node}: {event['text']}")
        elif name == "files":
            keep_files(self.out_dir, work.group, work.kind, work.tries, event["files"], event.get("folder"))
        elif name == "end":
            for error in event.get("worker_errors", []):
                self._worker_error(tally, work, f"{work.node}: {error}")

    # --- counting cells ------------------------------------------------------------------

    def _count(self, work: _Work, cell: Cell, record: Record, outcome: Outcome, tally: RunOutcome,
               progress: Progress) -> None:
        """Append ``cell``'s record and count its outcome; a record the study holds already counts
        the cell as measured before (resumed), never twice."""
        work.cells.remove(cell)
        if not self._append(work, record):
            return self._resumed([cell], tally, progress)
        with self._lock:
            tally.outcomes.append(outcome)
        progress.finish(outcome)

    def _resumed(self, cells: list[Cell], tally: RunOutcome, progress: Progress) -> None:
        with self._lock:
            tally.resumed += len(cells)
        progress.resolve(len(cells))

    def _record(self, work: _Work, cell: Cell, status: str, reason: str, tally: RunOutcome,
                progress: Progress) -> None:
        """A record the driver writes for a cell its node could not record, in that node's environment."""
        record = Record.from_json(failure_record(cell.identity().cell_block(), status=status, error=scrub(reason),
                                                 config=unmeasured_config(cell.settings), environment=work.environment))
        self._count(work, cell, record, Outcome(cell, status, 0.0, work.node, reason.splitlines()[0][:160]),
                    tally, progress)

    def _give_up(self, work: _Work, reason: str, tally: RunOutcome, progress: Progress) -> None:
        """The group's unrecorded cells end here: as errors where a node said what environment they
        would have been measured in; else not run (a record of the driver's own machine would lie)."""
        if work.environment is None:
            self._worker_error(tally, work, f"{reason}; its {len(work.cells)} cell(s) were not run")
            work.cells = []
        for cell in list(work.cells):
            self._record(work, cell, "error", reason, tally, progress)

    def _worker_error(self, tally: RunOutcome, work: _Work, message: str) -> None:
        with self._lock:
            tally.worker_errors.append(f"{work.label}: {message}")

    def _say(self, line: str) -> None:
        print(f"[run] {line}", file=self.stream, flush=True)
