"""What earlier runs left behind: the cells already measured, and the OOMs that rule out larger batches
(``docs/study.md``, "Resuming"). The study folder is the study: a record counts whatever study name it carries."""

from __future__ import annotations

from pathlib import Path

from ...records.key import RecordKey, eager_side_key, record_key
from ...records.results_file import iter_records, locked
from ...vocabulary import DONE_STATUSES, Status


def _records(results_path: Path):
    if not results_path.exists():
        return []
    with locked(results_path, shared=True):  # never read a line while it is being written
        return [record for _, record in iter_records(results_path)]


def read_done(results_path: Path) -> set[RecordKey]:
    """Keys (``without_study``) of the cells that have an ok or oom record, or whose eager side one holds."""
    done = set()
    for record in _records(results_path):
        if record.status in DONE_STATUSES:
            done.add(record_key(record).without_study())
        eager = eager_side_key(record)
        if eager is not None:
            done.add(eager.without_study())
    return done


def oom_batches(results_path: Path) -> dict[RecordKey, int]:
    """The smallest batch size that ran out of memory, per group (``RecordKey.without_batch_size``: model,
    mode, dtype, variant, settings and environment)."""
    smallest: dict[RecordKey, int] = {}
    for record in _records(results_path):
        if record.status == Status.OOM:
            key = record_key(record).without_study()
            group, batch = key.without_batch_size(), record.cell.batch_size
            smallest[group] = min(batch, smallest.get(group, batch))
    return smallest
