"""Result records: one JSON object per line of a ``results.jsonl``.

A record names its cell (study, task, model, batch size, compile mode, dtype,
device), its ``status`` (``ok``, ``oom``, ``error``, ``skipped``; the error text
when not ok), the latency block in optimum-benchmark's shape (seconds), the
throughput, memory and compile blocks, the run's configuration (weights, seed...)
and the environment. A record that was not measured carries no latency at all:
no number is ever written that was not measured.

Appends are crash-safe: the whole line goes out in one ``write`` under an
exclusive lock, then ``fsync``; a torn line left by a killed writer is fenced off
by a newline so the next record still starts on its own line. The reader skips
torn or corrupt lines with a warning naming the file and line.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pandas as pd

from .env import capture_environment, gpu_name
from .timing import Measurement

SCHEMA_VERSION = 1
STATUSES = ("ok", "oom", "error", "skipped")
CELL_FIELDS = ("study", "task", "model", "batch_size", "compile_mode", "dtype", "device")
MAX_ERROR_CHARS = 8_000


class CorruptRecordWarning(UserWarning):
    """A line of a results file could not be read as a record and was skipped."""


# --- building ---------------------------------------------------------------------

def latency_block(measurement: Measurement) -> dict[str, Any]:
    """optimum-benchmark's latency block (seconds), plus p999, median, ci95 and more."""
    seconds = [t / 1000.0 for t in measurement.times_ms]
    mean = measurement.mean_ms / 1000.0
    stdev = measurement.stdev_ms / 1000.0
    return {
        "unit": "s",
        "values": seconds,
        "count": measurement.runs,
        "total": float(sum(seconds)),
        "mean": mean,
        "p50": measurement.p50_ms / 1000.0,
        "p90": measurement.p90_ms / 1000.0,
        "p95": measurement.p95_ms / 1000.0,
        "p99": measurement.p99_ms / 1000.0,
        "stdev": stdev,
        "stdev_": stdev / mean * 100.0,  # relative stdev in percent, as optimum-benchmark
        "p999": measurement.p999_ms / 1000.0,
        "median": measurement.median_ms / 1000.0,
        "ci95": [bound / 1000.0 for bound in measurement.ci95_mean_ms],
        "min": measurement.min_ms / 1000.0,
        "max": measurement.max_ms / 1000.0,
        "outliers": measurement.outliers,
        "timer": measurement.timer,
        "warmup": measurement.warmup,
    }


def make_record(*, study: str, task: str, model: str, batch_size: int, compile_mode: str,
                dtype: str, device: str, status: str = "ok",
                measurement: Measurement | None = None, memory: dict | None = None,
                compile: dict | None = None, config: dict | None = None,
                error: str | None = None, environment: dict | None = None,
                extra: dict | None = None) -> dict[str, Any]:
    """A validated record for one cell; the environment is captured when not given."""
    cell = {"study": study, "task": task, "model": model, "batch_size": batch_size,
            "compile_mode": compile_mode, "dtype": dtype, "device": device}
    validate_cell(cell)  # before anything is computed from it
    compile_block = dict(compile or {})
    if measurement is not None:
        compile_block.setdefault("first_call_ms", measurement.first_call_ms)
    record = {
        "schema_version": SCHEMA_VERSION,
        "record_id": uuid.uuid4().hex,
        "cell": cell,
        "status": status,
        "error": _tail(error) if error is not None else None,
        "config": dict(config or {}),
        "latency": latency_block(measurement) if measurement is not None else None,
        "throughput": ({"unit": "samples/s", "value": measurement.throughput(batch_size)}
                       if measurement is not None else None),
        "memory": memory,
        "compile": compile_block or None,
        "environment": environment if environment is not None else capture_environment(),
    }
    if extra:
        clashes = set(extra) & set(record)
        if clashes:
            raise ValueError(f"extra fields clash with record fields: {sorted(clashes)}")
        record.update(extra)
    validate_record(record)
    return record


def _tail(text: str) -> str:
    # Tracebacks name files under the home directory, and so the user: published reports must not.
    text = str(text).replace(str(Path.home()), "~")
    return text if len(text) <= MAX_ERROR_CHARS else "..." + text[-MAX_ERROR_CHARS:]


def _non_finite_path(value: Any, path: str = "record") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite_path(item, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def validate_cell(cell: Any) -> None:
    """Raise ValueError naming the first cell field that is missing or malformed."""
    if not isinstance(cell, dict):
        raise ValueError("record has no 'cell' block")
    for name in CELL_FIELDS:
        value = cell.get(name)
        if name == "batch_size":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"cell.batch_size must be an integer >= 1, got {value!r}")
        elif not isinstance(value, str) or not value:
            raise ValueError(f"cell.{name} must be a non-empty string, got {value!r}")


def validate_record(record: dict[str, Any]) -> None:
    """Raise ValueError naming the first field that makes ``record`` invalid."""
    if not isinstance(record, dict):
        raise ValueError(f"a record must be a dict, got {type(record).__name__}")
    if record.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version must be {SCHEMA_VERSION}, got {record.get('schema_version')!r}")
    validate_cell(record.get("cell"))
    status = record.get("status")
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    if status == "ok" and not record.get("latency"):
        raise ValueError("a record with status 'ok' needs a latency block")
    if status != "ok":
        if record.get("latency") is not None or record.get("throughput") is not None:
            raise ValueError(f"a record with status {status!r} must not carry latency or "
                             "throughput: those were not measured")
        if not record.get("error"):
            raise ValueError(f"a record with status {status!r} needs the error text or reason")
    bad = _non_finite_path(record)
    if bad:
        raise ValueError(f"{bad} is NaN or infinite: JSON cannot hold it and it is not a measurement")


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


# --- identity -------------------------------------------------------------------

def cell_identity(record: dict[str, Any]) -> tuple:
    """(study, task, model, batch_size, compile_mode, dtype, device kind) of a record."""
    cell = record["cell"]
    return (cell["study"], cell["task"], cell["model"], cell["batch_size"], cell["compile_mode"],
            cell["dtype"], cell["device"].split(":")[0])


def environment_key(environment: dict[str, Any], kind: str) -> tuple[str | None, str | None]:
    """What a cell's identity takes from the environment: torch version and processor."""
    processor = (gpu_name(environment, "cuda:0") if kind == "cuda"
                 else environment.get("cpu_model"))
    return environment.get("torch_version"), processor


def record_key(record: dict[str, Any]) -> tuple:
    """A cell's identity on its environment: the same key means the same measurement."""
    identity = cell_identity(record)
    return (*identity, *environment_key(record.get("environment") or {}, identity[-1]))


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
                elif not isinstance(record.get("cell"), dict):
                    reason = "record has no cell block"
            if reason:
                warnings.warn(f"{path}:{number}: skipped a torn or corrupt line: {reason}",
                              CorruptRecordWarning, stacklevel=2)
                continue
            yield number, record


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
                 include_values: bool = False) -> pd.DataFrame:
    """One flat row per record: cell fields as plain columns, blocks as 'latency.mean' etc.

    The per-run latency values are left out unless ``include_values`` (they are
    long lists; every summary statistic is already a column).
    """
    records = read_records(paths)
    if not records:
        return pd.DataFrame(columns=[*CELL_FIELDS, "status"])
    frame = pd.json_normalize(records, sep=".")
    frame = frame.rename(columns={f"cell.{name}": name for name in CELL_FIELDS})
    frame = frame.rename(columns={"_source": "source", "_line": "line"})
    if not include_values and "latency.values" in frame:
        frame = frame.drop(columns=["latency.values"])
    leading = [c for c in (*CELL_FIELDS, "status", "error") if c in frame]
    return frame[leading + [c for c in frame.columns if c not in leading]]
