"""What earlier runs left behind: the cells already measured, and the OOMs that rule out larger batches.

A cell is done when it has an ``ok`` or ``oom`` record with the same identity on
the same environment. An ``oom`` at batch size B also stands for every larger batch
of its model, mode and dtype: a resumed run skips them as the first run would have.
"""

from __future__ import annotations

from pathlib import Path

from ...records import record_key
from ...results import iter_records, locked
from ...vocabulary import DONE_STATUSES, Status


def _records(results_path: Path):
    if not results_path.exists():
        return []
    with locked(results_path, shared=True):  # never read a line while it is being written
        return [record for _, record in iter_records(results_path)]


def read_done(results_path: Path) -> set[tuple]:
    """Keys of the cells that have an ok or oom record."""
    return {record_key(record) for record in _records(results_path)
            if record.get("status") in DONE_STATUSES}


def group_key(key: tuple) -> tuple:
    """A cell's key without its batch size: the cells the OOM rule ties together."""
    return key[:3] + key[4:]


def oom_batches(results_path: Path) -> dict[tuple, int]:
    """The smallest batch size that ran out of memory, per group (model, mode, dtype, environment)."""
    smallest: dict[tuple, int] = {}
    for record in _records(results_path):
        if record.get("status") == Status.OOM:
            key = record_key(record)
            group, batch = group_key(key), key[3]
            smallest[group] = min(batch, smallest.get(group, batch))
    return smallest
