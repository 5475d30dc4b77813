"""Kernels whose start fails, one group after another: the environment, not a cell, and the run stops.

A kernel that ends before it begins any cell is tried again, then its group's cells are errors (``grid_runner``).
When that happens to several groups in a row, no cell is at fault: a package the image lacks, an API its torch
lacks, a full disk. The first pipelined H200 lease spent the 5.5 minutes after its checks starting 22 kernels (11
groups) that each died on the same missing torch hook, and wrote 60 error records. So after ``GROUPS_IN_A_ROW`` such groups the run stops:
the cells left are not recorded (a later run, once the cause is fixed, measures them), and the run's output ends
with why. Any kernel that begins a cell starts the count again.
"""

from __future__ import annotations

import threading

GROUPS_IN_A_ROW = 3   # kernel groups whose every start failed, one after another, before the run stops


class StartFailures:
    """How many kernel groups in a row failed to start (shared by the run's workers)."""

    def __init__(self, limit: int = GROUPS_IN_A_ROW) -> None:
        self.limit, self.in_a_row = limit, 0
        self._lock = threading.Lock()

    def began(self) -> None:
        """A kernel began a cell: the environment works."""
        with self._lock:
            self.in_a_row = 0

    def failed(self, group_id: str, tail: str) -> str | None:
        """A group none of whose kernels began a cell; where it makes ``limit`` in a row, why the run stops."""
        with self._lock:
            self.in_a_row += 1
            in_a_row = self.in_a_row
        if in_a_row < self.limit:
            return None
        return (f"{in_a_row} kernel groups in a row (the last: {group_id}) ended before they began any cell: "
                "the environment fails, not a cell, so the run stops; the cells left are not recorded, and a later "
                f"run measures them once the cause is fixed. Last lines of the last kernel's log:\n{tail}")
