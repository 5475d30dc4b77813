"""Following one kernel while it runs: the records it appends, and a cell that stalls.

The runner learns which cells a kernel has measured from the results file alone (the
records are the kernel's only report), so a kernel that dies leaves no doubt about
which cell it was on: the first of its cells without a record.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Any, Callable

from ..records import cell_identity
from ..results import iter_records, locked
from .grid import Cell


class KernelWatch:
    """Follows the results file while one kernel runs: which cells it has recorded, and
    whether the cell it is measuring has run past the timeout."""

    def __init__(self, results_path: Path, cells: list[Cell], offset: int, timeout: float,
                 stop_requested: Callable[[], bool],
                 on_record: Callable[[Cell, dict[str, Any], float], None]) -> None:
        self.results_path, self.remaining, self.offset = results_path, list(cells), offset
        self.timeout, self.stop_requested, self.on_record = timeout, stop_requested, on_record
        self.last_event = time.monotonic()  # the kernel's launch, then each record's arrival
        self.timed_out = False

    def poll(self) -> bool:
        """Take the records written since the last poll; True when the kernel must be stopped."""
        self.read_new_records()
        if self.remaining and time.monotonic() - self.last_event > self.timeout:
            self.timed_out = True
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
            self.on_record(cell, record, now - self.last_event)
            self.last_event = now
