"""The results file: records appended crash-safe, read back skipping what is torn.

Appends are crash-safe: the whole line goes out in one ``write`` under an
exclusive lock, then ``fsync``; a torn line left by a killed writer is fenced off
by a newline so the next record still starts on its own line. The reader skips
torn or corrupt lines with a warning naming the file and line. No torch is
imported, and pandas only by ``read_results``.
"""

from __future__ import annotations

from contextlib import contextmanager
import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator
import warnings

from .records import CELL_FIELDS, SCHEMA_VERSION, VARIANT_FIELDS, validate_record

if TYPE_CHECKING:
    import pandas as pd


class CorruptRecordWarning(UserWarning):
    """A line of a results file could not be read as a record and was skipped."""


# --- writing ----------------------------------------------------------------------

class StaleWriterError(RuntimeError):
    """The writer's guard refused the append (its runner is gone or was replaced)."""


@contextmanager
def locked(path: str | os.PathLike, shared: bool = False) -> Iterator[None]:
    """Hold the results file's lock (exclusive, or shared for readers)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append_record(path: str | os.PathLike, record: dict[str, Any],
                  guard: Callable[[], bool] | None = None) -> None:
    """Append ``record`` as one line of ``path``: one write, locked, flushed and fsynced.

    ``guard``, if given, runs under the lock just before the write; when it returns
    False nothing is written and StaleWriterError is raised.
    """
    validate_record(record)
    data = (json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if guard is not None and not guard():
            raise StaleWriterError(f"refused to append to {path}: this writer's runner is gone "
                                   "or was replaced")
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # fence off a torn line left by a killed writer
        written = os.write(fd, data)
        while written < len(data):  # only on exotic file systems
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)  # also releases the lock
    if created:
        _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- reading ----------------------------------------------------------------------

def iter_records(path: str | os.PathLike, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each readable record; warns on and skips the rest.

    ``start`` is a byte offset to read from (a size taken earlier, so a line boundary);
    line numbers then count from it.
    """
    path = Path(path)
    with open(path, "rb") as lines:
        lines.seek(start)
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            reason = None
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                reason = f"not valid JSON ({exc.__class__.__name__}: {exc})"
            else:
                if not isinstance(record, dict) or "schema_version" not in record:
                    reason = "not a result record (no schema_version)"
                elif not isinstance(record["schema_version"], int) or record["schema_version"] > SCHEMA_VERSION:
                    reason = (f"schema_version {record['schema_version']!r} is newer than this "
                              f"bench_utils reads ({SCHEMA_VERSION}); upgrade bench_utils")
                elif record["schema_version"] < SCHEMA_VERSION:
                    reason = (f"schema_version {record['schema_version']} is older than this "
                              f"bench_utils reads ({SCHEMA_VERSION})")
                else:
                    reason = _invalid(record)
            if reason:
                warnings.warn(f"{path}:{number}: skipped a torn or corrupt line: {reason}",
                              CorruptRecordWarning, stacklevel=2)
                continue
            yield number, record


def _invalid(record: dict[str, Any]) -> str | None:
    """Why a record of the current schema cannot be used (a missing or malformed field), or None."""
    try:
        validate_record(record)
    except ValueError as exc:
        return f"not a valid record ({exc})"
    return None


def read_records(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """Every readable record of one or more results files, in file and line order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    records = []
    for path in paths:
        for number, record in iter_records(path):
            records.append({**record, "_source": str(path), "_line": number})
    return records


def read_results(paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                 include_values: bool = False) -> "pd.DataFrame":
    """One flat row per record: cell fields as plain columns, blocks as 'latency.mean' etc.

    The per-run latency values are left out unless ``include_values`` (they are
    long lists; every summary statistic is already a column).
    """
    import pandas as pd

    records = read_records(paths)
    if not records:
        return pd.DataFrame(columns=[*CELL_FIELDS, "status"])
    frame = pd.json_normalize(records, sep=".")
    frame = frame.rename(columns={f"cell.{name}": name for name in (*CELL_FIELDS, *VARIANT_FIELDS)})
    for name, allowed in VARIANT_FIELDS.items():  # records older than variants are the guide's cells
        frame[name] = frame[name].fillna(allowed[0]) if name in frame else allowed[0]
    frame = frame.rename(columns={"_source": "source", "_line": "line"})
    if not include_values and "latency.values" in frame:
        frame = frame.drop(columns=["latency.values"])
    leading = [c for c in (*CELL_FIELDS, "status", "error") if c in frame]
    return frame[leading + [c for c in frame.columns if c not in leading]]
