"""Following one kernel while it runs, and saying why it ended: its records come through the results file, the cell
it is on through the progress file (``progress_file``), so a kernel that died is charged to its cell, or to its start.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Callable

from ...records.key import cell_identity
from ...records.results_file import iter_records, locked
from ...records.schema import Record
from .papermill_execution import oom_kill_count
from ..grid.grid_file import Cell, Grid
from ..progress_file import read_progress

DONE, STOPPED, TIMED_OUT, OOM_KILLED, CELL_DIED, START_FAILED = (
    "done", "stopped", "timed out", "oom-killed", "cell died", "start failed")


def default_cell_timeout(grid: Grid) -> int:
    """Seconds a cell may go without a record before it is stopped: 30 minutes to load and compile,
    plus 20 s per call it times (warm-up and runs): hours where a cell may need them, never unbounded."""
    return max(1800 + 20 * (cell.settings.warmup + cell.settings.runs) for cell in grid.cells)


class KernelWatch:
    """Follows the results file and the progress file while one kernel runs."""

    def __init__(self, results_path: Path, progress_path: Path, cells: list[Cell], offset: int,
                 timeout: float, stop_requested: Callable[[], bool],
                 on_record: Callable[[Cell, Record, float], None]) -> None:
        self.results_path, self.progress_path = results_path, progress_path
        self.remaining, self.offset = list(cells), offset
        self.timeout, self.stop_requested, self.on_record = timeout, stop_requested, on_record
        self.last_event = time.monotonic()  # the kernel's launch, then each record's arrival
        self.oom_kills = oom_kill_count()   # the system's count at the last record: one cell's window
        self.stalled: Cell | None = None    # the cell in progress when the timeout struck
        self.timed_out = False

    def poll(self) -> bool:
        """Take the records written since the last poll; True when the kernel must be stopped."""
        self.read_new_records()
        if self.remaining and not self.timed_out and time.monotonic() - self.last_event > self.timeout:
            self.timed_out, self.stalled = True, self.cell_in_progress()
        return self.timed_out or self.stop_requested()

    def read_new_records(self) -> None:
        path = self.results_path
        if not path.exists() or path.stat().st_size <= self.offset:
            return
        with locked(path, shared=True):  # whole lines only
            size = path.stat().st_size
            new = [record for _, record in iter_records(path, start=self.offset)]
        self.offset = size
        for record in new:
            cell = next((c for c in self.remaining if c.identity() == cell_identity(record)), None)
            if cell is None:
                continue  # another worker's cell, or a record not of this kernel's cells
            now = time.monotonic()
            self.remaining.remove(cell)
            self.oom_kills = oom_kill_count()
            self.on_record(cell, record, now - self.last_event)
            self.last_event = now

    def cell_in_progress(self) -> Cell | None:
        """The unrecorded cell the kernel said it began, or None (it began none, or ended between cells)."""
        said = read_progress(self.progress_path)
        return next((cell for cell in self.remaining if (cell.compile_mode, cell.batch_size) == said), None)

    def ending(self, returncode: int) -> tuple[str, Cell | None]:
        """Why the kernel ended, and the cell that ending is charged to (after ``read_new_records``)."""
        if not self.remaining:
            return DONE, None
        if self.stop_requested():
            return STOPPED, None  # the cell cut short is measured on the next run
        if self.timed_out:
            # a stalled cell that recorded after all: the next one was cut short by the stop
            stalled = self.stalled if self.stalled in self.remaining else None
            return (TIMED_OUT, stalled) if stalled or self.stalled is None else (STOPPED, None)
        cell = self.cell_in_progress()
        if cell is None:
            return START_FAILED, None
        killed = self.oom_kills is not None and (oom_kill_count() or 0) > self.oom_kills
        return (OOM_KILLED if returncode != 0 and killed else CELL_DIED), cell
