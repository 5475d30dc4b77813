"""A study grid on a cluster: one task per kernel group and accelerator type, one results file.

``python -m bench_utils run GRID --executor ray [--address ...]``. The driver sends each kernel
group (``study.groups``) of each accelerator type the grid names to the cluster as one task
(``node``), which runs the local runner on the node it lands on and streams back each cell's
record as soon as it is measured. The driver alone writes the study's results file, under the
study folder's lease, as a local run does:

- **exactly once.** A record is appended only if the study has no record of that cell (and kind)
  from this run, nor an ``ok`` or ``oom`` one from an earlier run on the same environment; a
  record that comes twice is dropped. The driver killed at any moment loses only the cells whose
  records it had not appended yet: run it again and it resumes, as locally;
- **a node lost mid-task** (a dead machine, a killed worker) loses none of the group's recorded
  cells: the driver sends its unrecorded cells to another node of the same kind. Ray's own retry
  would replay the whole task and expect the same outputs, which measurements never are, so the
  driver retries, and a group whose node is lost ``MAX_NODE_LOSSES`` times has its cells
  recorded as ``error``; a task that raises (a node without the project, say) is tried
  ``MAX_TASK_FAILURES`` times;
- **progress** over the whole cluster: one line per cell with what each node is measuring and an
  ETA; the same summary and exit status as the local runner.

The cluster itself (Ray) is behind ``Cluster``: ``nodes()``, ``submit(task, options)`` (an
iterator of the node's events; ``NodeLost``, ``TaskFailed`` or ``Cancelled`` when it ends
otherwise) and ``cancel_all()``; ``ray_cluster.RayCluster`` is Ray's, tests bring their own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
import os
from pathlib import Path
import sys
import threading
from typing import Any, Callable, Iterator, Protocol

from ..env import capture_environment
from ..paths import PROJECT_ROOT, REPORTS_DIR
from ..records import cell_identity, failure_record, record_key
from ..results import append_record, iter_records, locked
from ..study.grid import Cell, Grid
from ..study.groups import KernelGroup, kernel_groups
from ..study.lease import RunnerLease
from ..study.progress import Outcome, Progress, RunOutcome
from ..study.resume import DONE_STATUSES
from ..study.runner import cell_fields, default_cell_timeout, unmeasured_config
from ..study.stopping import StopOnSignal
from .node import GroupTask
from .placement import task_resources

MAX_NODE_LOSSES = 3     # a group whose node is lost this often: its cells are errors, not bad luck
MAX_TASK_FAILURES = 2   # a task that raised this often: the nodes of its kind cannot run it


class NodeLost(RuntimeError):
    """The task's node or worker died under it (Ray's system errors)."""


class TaskFailed(RuntimeError):
    """The task raised (its message is the node's error)."""


class Cancelled(RuntimeError):
    """The task was cancelled (the run was stopped)."""


class Cluster(Protocol):
    def nodes(self) -> list[dict[str, Any]]: ...
    def submit(self, task: GroupTask, options: dict[str, Any]) -> Iterator[dict[str, Any]]: ...
    def cancel_all(self) -> None: ...


@dataclass
class _Work:
    """One kernel group on one accelerator type, until each of its cells has a record."""

    kind: str | None
    group: KernelGroup
    cells: list[Cell] = field(default_factory=list)   # not recorded yet
    tries: int = 0
    losses: int = 0
    failures: int = 0
    node: str = "a node"

    @property
    def label(self) -> str:
        return self.group.group_id + (f" on {self.kind}" if self.kind else "")


class ClusterRunner:
    """Runs a Grid's cells on a cluster; ``run(cluster)`` returns a RunOutcome."""

    def __init__(self, grid: Grid, out_dir: str | os.PathLike | None = None, *, force: bool = False,
                 timeout: int | None = None, stream=None,
                 progress: Callable[[int, Any], Progress] = Progress) -> None:
        self.grid = grid
        self.out_dir = Path(out_dir).resolve() if out_dir else REPORTS_DIR / grid.study
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise ValueError(f"--out {self.out_dir} is a file, not a study folder")
        self.results_path = self.out_dir / "results.jsonl"
        self.force = force
        self.timeout = timeout or default_cell_timeout(grid)
        self.stream = stream or sys.stderr
        self.progress = progress
        self.kinds: list[str | None] = list(grid.accelerators) or [None]
        self._lock = threading.Lock()
        self.duplicates = 0   # records that came twice and were dropped

    def run(self, cluster: Cluster) -> RunOutcome:
        options = task_resources(self.grid, cluster.nodes())  # ValueError before anything runs
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
            tally.not_run = tally.total - tally.resumed - len(tally.outcomes)
            tally.signal = self.stop.signal
        return tally

    # --- the study's records ------------------------------------------------------

    def _read_study(self) -> None:
        """What the study knows: records by cell (sent to nodes) and the keys already done."""
        self.records: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
        self.done: set[tuple] = set()
        self.recorded: set[tuple] = set()          # (kind, cell identity) recorded in this run
        if self.force or not self.results_path.exists():
            return  # --force: every cell is measured again, whatever the study holds
        with locked(self.results_path, shared=True):
            for _, record in iter_records(self.results_path):
                self.records[cell_identity(record)].append(record)
                if record.get("status") in DONE_STATUSES:
                    self.done.add(record_key(record))

    def _append(self, work: _Work, record: dict[str, Any]) -> bool:
        """Append a node's record unless the study already has it; True if appended."""
        with self._lock:
            identity, key = cell_identity(record), record_key(record)
            if (work.kind, identity) in self.recorded or key in self.done:
                self.duplicates += 1
                return False
            append_record(self.results_path, record)
            self.recorded.add((work.kind, identity))
            if record.get("status") in DONE_STATUSES:
                self.done.add(key)
            self.records[identity].append(record)
            return True

    def _task(self, work: _Work) -> GroupTask:
        with self._lock:
            seeds = [record for cell in work.cells for record in self.records.get(cell.identity(), [])]
        return GroupTask(study=self.grid.study, cells=[cell.to_parameters() for cell in work.cells],
                         timeout=self.timeout, accelerator=work.kind, seed_records=seeds)

    # --- following one group ---------------------------------------------------------

    def _follow(self, work: _Work, cluster: Cluster, options: dict, tally: RunOutcome,
                progress: Progress) -> None:
        try:
            while work.cells and not self.stop.requested.is_set():
                work.tries += 1
                try:
                    for event in cluster.submit(self._task(work), options[(work.kind, work.group.device)]):
                        self._on_event(work, event, tally, progress)
                    return  # cells it left unrecorded were not run (the node was stopped)
                except Cancelled:
                    return
                except NodeLost as exc:
                    progress.idle(work.node)
                    if self.stop.requested.is_set():
                        return
                    work.losses += 1
                    if work.losses >= MAX_NODE_LOSSES:
                        self._fail(work, f"its node was lost {work.losses} times while measuring its group "
                                   f"(last: {exc})", tally, progress)
                        return
                    self._say(f"{work.node} was lost while measuring {work.label} ({exc}): its "
                              f"{len(work.cells)} unrecorded cell(s) go to another node")
                except TaskFailed as exc:
                    progress.idle(work.node)
                    work.failures += 1
                    if work.failures >= MAX_TASK_FAILURES:
                        self._fail(work, f"its task failed on the cluster {work.failures} times: {exc}",
                                   tally, progress)
                        return
                    self._say(f"the task of {work.label} failed on {work.node} ({exc}); trying again")
        except BaseException as exc:  # a full disk, say: stop the run and say so, never die silently
            with self._lock:
                tally.worker_errors.append(f"{work.label}: {type(exc).__name__}: {exc}")
            self.stop.requested.set()
            cluster.cancel_all()

    def _on_event(self, work: _Work, event: dict[str, Any], tally: RunOutcome, progress: Progress) -> None:
        name = event["event"]
        by_id = {cell.cell_id: cell for cell in work.cells}
        if name == "plan":
            work.node = f"node {str(event.get('node') or '?')[:8]}" + (f" ({work.kind})" if work.kind else "")
            pending = set(event["pending"])
            resumed = [cell for cell in work.cells if cell.cell_id not in pending]
            work.cells = [cell for cell in work.cells if cell.cell_id in pending]
            with self._lock:
                tally.resumed += len(resumed)
            progress.resolve(len(resumed))
        elif name == "start" and event["cell_id"] in by_id:
            progress.start(by_id[event["cell_id"]], work.node)
        elif name == "cell":
            cell = by_id.get(event["cell_id"])
            if cell is None:  # recorded already (a record that came twice)
                with self._lock:
                    self.duplicates += 1
                return
            record = event["record"]
            work.cells.remove(cell)
            if record is not None:
                if record.get("log"):  # the node's log, as the driver keeps it
                    record = {**record, "log": str(self.out_dir / self._kept_name(work, record["log"]))}
                if not self._append(work, record):
                    return  # recorded already: counted where it was
            outcome = Outcome(cell, event["status"], event["seconds"], work.node, event.get("message") or "")
            with self._lock:
                tally.outcomes.append(outcome)
            progress.finish(outcome)
        elif name == "say":
            self._say(f"{work.node}: {event['text']}")
        elif name == "files":
            self._keep_files(work, event["files"], event.get("folder"))
        elif name == "end":
            with self._lock:
                tally.worker_errors += [f"{work.node}: {error}" for error in event.get("worker_errors", [])]

    def _fail(self, work: _Work, reason: str, tally: RunOutcome, progress: Progress) -> None:
        """Record the group's unrecorded cells as errors the cluster caused (no node measured them)."""
        environment = {**capture_environment(), "accelerator_type": work.kind, "cluster_node_id": None}
        for cell in list(work.cells):
            record = failure_record(**cell_fields(cell), status="error", error=reason,
                                    config=unmeasured_config(cell), environment=environment)
            if self._append(work, record):
                outcome = Outcome(cell, "error", 0.0, work.node, reason.splitlines()[0][:160])
                with self._lock:
                    tally.outcomes.append(outcome)
                progress.finish(outcome)
            work.cells.remove(cell)

    # --- the audit trail ---------------------------------------------------------------

    def _kept_name(self, work: _Work, relative: str) -> Path:
        """Where the driver keeps a node's notebook or log: its name, tagged with the accelerator
        type and the try, so that kinds and retries never overwrite each other."""
        path = Path(relative)
        tags = [tag for tag in (work.kind, f"try{work.tries}" if work.tries > 1 else None) if tag]
        stem = path.name[:-len(path.suffix)] if path.suffix else path.name
        return path.with_name("__".join([stem, *tags]) + path.suffix)

    def _keep_files(self, work: _Work, files: dict[str, str], folder: str | None) -> None:
        here = os.path.relpath(self.out_dir, PROJECT_ROOT)
        for relative, text in files.items():
            target = self.out_dir / self._kept_name(work, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.replace(folder, here) if folder else text, encoding="utf-8")

    def _say(self, line: str) -> None:
        print(f"[run] {line}", file=self.stream, flush=True)
