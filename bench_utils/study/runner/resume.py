"""What earlier runs left behind: the cells already measured, and the OOMs that rule out larger batches.

A cell is done when it has an ``ok`` or ``oom`` record with the same identity on
the same environment. An ``oom`` at batch size B also stands for every larger batch
of its model, mode and dtype: a resumed run skips them as the first run would have.
"""

from __future__ import annotations

from pathlib import Path

from ...record_key import RecordKey, record_key
from ...results import iter_records, locked
from ...vocabulary import DONE_STATUSES, Status


def _records(results_path: Path):
    if not results_path.exists():
        return []
    with locked(results_path, shared=True):  # never read a line while it is being written
        return [record for _, record in iter_records(results_path)]


def read_done(results_path: Path) -> set[RecordKey]:
    """Keys of the cells that have an ok or oom record."""
    return {record_key(record) for record in _records(results_path)
            if record.get("status") in DONE_STATUSES}


def oom_batches(results_path: Path) -> dict[RecordKey, int]:
    """The smallest batch size that ran out of memory, per group (``RecordKey.without_batch_size``: model,
    mode, dtype, variant, settings and environment)."""
    smallest: dict[RecordKey, int] = {}
    for record in _records(results_path):
        if record.get("status") == Status.OOM:
            key = record_key(record)
            group, batch = key.without_batch_size(), key.identity.batch_size
            smallest[group] = min(batch, smallest.get(group, batch))
    return smallest
