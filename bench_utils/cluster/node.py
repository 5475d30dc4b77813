"""One kernel group measured on a cluster node, its records streamed back to the driver (docs/cluster.md).

The node runs the local runner over the group's cells in a folder of its own, seeded with the study's earlier records
of them, so that it decides what is measured already on its own environment as a local run does. It never writes the
study's results file: each record goes to the driver as an event. Events are plain dicts, ``{"event": name, ...}``:

- ``plan``: ``node`` (its id), ``slot`` (the GPU it was given, or None), ``pending`` (cell ids to measure),
  ``resumed`` (how many were measured already) and ``environment`` (the node's, as its records carry it);
- ``start``: ``cell_id``, the cell a kernel begins;
- ``cell``: ``cell_id``, ``status``, ``seconds``, ``message`` and ``record``, once per cell;
- ``say``: ``text``, a line the runner would have printed;
- ``files``: ``files``, the executed notebooks and logs by path relative to the node's folder, and ``folder``, that
  folder relative to the project (the notebooks name it);
- ``end``: ``not_run`` and ``worker_errors``, as the node's run ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import fcntl
import os
from pathlib import Path
import queue
import shutil
import tempfile
import threading
from typing import Any, Callable, Iterator

from ..environment.capture import ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV
from ..paths import PROJECT_ROOT, REPORTS_DIR
from ..records.key import cell_identity
from ..records.results_file import append_record, iter_records
from ..records.schema import Record
from ..study.grid.grid_file import Cell, Grid
from ..study.runner.progress_display import Outcome
from ..study.runner.grid_runner import Executor, Runner

POLL_S = 0.25
SCRATCH_ENV = "BENCH_UTILS_SCRATCH_DIR"   # where the nodes' folders go (tests: a temporary folder)
SCRATCH_DIR = Path(os.environ.get(SCRATCH_ENV) or REPORTS_DIR / "_scratch")   # ignored by git
OWNER_LOCK = ".owner.lock"


@dataclass
class GroupTask:
    """What the driver sends a node: one kernel group's cells and what the study knows of them."""

    study: str
    cells: list[dict[str, Any]]           # ``Cell.to_parameters()``, in the group's order
    timeout: int                          # seconds a cell may go without a record
    accelerator: str | None = None        # the kind Ray placed it on (records carry it)
    seed_records: list[dict[str, Any]] = field(default_factory=list)  # the study's records of these cells (JSON)


class _Events:
    """The runner's progress and messages, as events (``Runner(progress=..., stream=...)``)."""

    def __init__(self, events: queue.Queue, results_path: Path, offset: int) -> None:
        self.events, self.results_path, self.offset = events, results_path, offset
        self.limit_left: Callable[[], float] | None = None  # a node runs under no time limit of its own

    def progress(self, total: int, stream) -> "_Events":
        return self

    def start(self, cell: Cell, device: str) -> None:
        self.events.put({"event": "start", "cell_id": cell.cell_id})

    def finish(self, outcome: Outcome) -> None:
        # The runner calls this once the cell's record is in the node's results file.
        records = [record for _, record in iter_records(self.results_path, start=self.offset)
                   if cell_identity(record) == outcome.cell.identity()]
        self.events.put({"event": "cell", "cell_id": outcome.cell.cell_id, "status": outcome.status,
                         "seconds": outcome.seconds, "message": outcome.message,
                         "record": _relative_log(records[-1], self.results_path.parent) if records else None})

    def close(self) -> None:
        pass

    def write(self, text: str) -> int:
        if text.strip():
            self.events.put({"event": "say", "text": text.strip()})
        return len(text)

    def flush(self) -> None:
        pass


def _relative_log(record: Record, folder: Path) -> dict[str, Any]:
    """The record as the driver is sent it (its JSON), a failure record's log named relative to the node's folder
    (the driver keeps the file)."""
    if record.log and Path(record.log).is_relative_to(folder):
        record = record.model_copy(update={"log": str(Path(record.log).relative_to(folder))})
    return record.to_json()


def stream_group(task: GroupTask, node_id: str | None = None, slot: str | None = None,
                 executor: Executor | None = None) -> Iterator[dict[str, Any]]:
    """Measure ``task``'s cells on this machine; yield the events above (the Ray task's body). ``slot``: the node's
    GPU the task was given; ``executor`` stands in for papermill in tests, as for ``Runner``."""
    for name, value in ((ACCELERATOR_TYPE_ENV, task.accelerator), (CLUSTER_NODE_ENV, node_id)):
        if value:  # the kernels inherit them: every record says where it was measured
            os.environ[name] = value
        else:
            os.environ.pop(name, None)
    folder, owner = _scratch_folder(node_id)
    try:
        yield from _measure(task, folder, slot, executor)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(owner)


def _scratch_folder(node_id: str | None) -> tuple[Path, int]:
    """The task's own study folder (in the project where it can be written) and the lock that says it is in use,
    held for the task's life. A task removes only its own node's folders whose lock nobody holds (their task was
    killed): a lock is trusted on the node that took it, never across a shared file system."""
    prefix = f"node-{(node_id or 'local')[:12]}-"
    for parent in (SCRATCH_DIR, Path(tempfile.gettempdir()) / "bench_utils-nodes"):
        try:
            parent.mkdir(parents=True, exist_ok=True)
            hidden = Path(tempfile.mkdtemp(prefix="." + prefix, dir=parent))
        except OSError:  # a read-only project on this node
            continue
        owner = os.open(hidden / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        locked = _try_lock(owner, wait=True)
        folder = hidden.with_name(hidden.name[1:])
        hidden.rename(folder)  # visible to other tasks only once locked
        if locked:
            _remove_abandoned(parent, prefix, keep=folder)
        return folder, owner
    raise OSError("no writable folder for the node's study (the project, the temporary folder)")


def _try_lock(fd: int, wait: bool = False) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        return True
    except OSError:  # held by another task, or a file system without locks
        return False


def _remove_abandoned(parent: Path, prefix: str, keep: Path) -> None:
    for other in parent.glob(prefix + "*"):
        if other == keep:
            continue
        try:
            fd = os.open(other / OWNER_LOCK, os.O_RDWR)
        except OSError:
            continue
        try:
            if _try_lock(fd):
                shutil.rmtree(other, ignore_errors=True)
        finally:
            os.close(fd)


def _measure(task: GroupTask, folder: Path, slot: str | None, executor: Executor | None) -> Iterator[dict[str, Any]]:
    results_path = folder / "results.jsonl"
    for record in task.seed_records:
        append_record(results_path, record)
    offset = results_path.stat().st_size if results_path.exists() else 0
    cells = [Cell.from_parameters(cell) for cell in task.cells]
    grid = Grid(path=f"<{task.study} on a cluster node>", study=task.study, description="",
                devices=sorted({cell.device for cell in cells}), cells=cells)
    events: queue.Queue = queue.Queue()
    sink = _Events(events, results_path, offset)
    runner = Runner(grid, folder, timeout=task.timeout, executor=executor, stream=sink, progress=sink.progress)
    pending = runner.pending()
    yield {"event": "plan", "node": os.environ.get(CLUSTER_NODE_ENV), "slot": slot,
           "pending": [cell.cell_id for cell in pending.cells], "resumed": pending.resumed,
           "environment": runner.environment}
    ended: list = []

    def run() -> None:
        try:
            ended.append(runner.run())
        except BaseException as exc:  # a node that cannot measure (no GPU here, say): the driver is told
            ended.append(exc)

    thread = threading.Thread(target=run, name="node-runner")
    thread.start()
    try:
        while thread.is_alive() or not events.empty():
            try:
                yield events.get(timeout=POLL_S)
            except queue.Empty:
                continue
    finally:
        while thread.is_alive():  # the driver let go of this task: end the kernel, measure nothing more
            stop = getattr(runner, "stop", None)  # there once the runner has begun
            if stop is not None:
                stop.requested.set()
            runner.running.end_all()
            thread.join(timeout=POLL_S)
    outcome = ended[0]
    if isinstance(outcome, BaseException):
        raise outcome
    # the notebooks name the node's folder relative to the project: the driver puts its own there
    yield {"event": "files", "files": _files(folder), "folder": os.path.relpath(folder, PROJECT_ROOT)}
    yield {"event": "end", "not_run": outcome.not_run, "worker_errors": outcome.worker_errors}


def _files(folder: Path) -> dict[str, str]:
    """The executed notebooks and logs (already free of the node's absolute paths)."""
    found = {}
    for sub, pattern in (("notebooks", "*.ipynb"), ("logs", "*.log")):
        for path in sorted((folder / sub).glob(pattern)):
            found[f"{sub}/{path.name}"] = path.read_text(encoding="utf-8", errors="replace")
    return found
