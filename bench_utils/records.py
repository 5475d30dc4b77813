"""Result records: one JSON object per line of a ``results.jsonl``.

A record names its cell (study, task, model, batch size, compile mode, dtype,
device), its ``status`` (``ok``, ``oom``, ``error``, ``skipped``; the error text
when not ok), the latency block in optimum-benchmark's shape (seconds), the
throughput, memory and compile blocks, the run's configuration (weights, seed...)
and the environment. A record that was not measured carries no latency at all:
no number is ever written that was not measured.
Building and validating records, and a cell's identity, live here; writing and
reading the results file live in ``results``. No torch and no pandas are imported:
the runner, the lease and the report read records without them.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import Field
from pathlib import Path
from typing import TYPE_CHECKING, Any
import uuid

from .env import capture_environment, gpu_name
from .settings import COMPILE, HASHED, IDENTITY, WHEN_SET, Settings, setting_fields
from .vocabulary import CompileMode, Status

if TYPE_CHECKING:  # the measurement layer imports torch; records are read without it
    from .measurement.timing import Measurement

# 2: per-call latency, paired speed-up, TF32 policy names, cold/warm compile, fp64 gate
SCHEMA_VERSION = 2
STATUSES = tuple(Status)
CELL_FIELDS = ("study", "task", "model", "batch_size", "compile_mode", "dtype", "device")
# A cell's variant beyond the guide's way, with the value a record without it means (records
# written before variants existed are the guide's cells).
VARIANT_FIELDS = {item.name: (item.default, *(name for name in item.metadata["choices"] if name != item.default))
                  for item in setting_fields() if item.metadata["record"] == IDENTITY}
MAX_ERROR_CHARS = 8_000


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
        "sync": measurement.sync,  # per-call: each run from an idle device; pipelined: host ran ahead
        "warmup": measurement.warmup,
    }


def make_record(*, study: str, task: str, model: str, batch_size: int, compile_mode: str,
                dtype: str, device: str, memory_format: str = "contiguous", shapes: str = "static",
                status: str = Status.OK, measurement: Measurement | None = None, memory: dict | None = None,
                compile: dict | None = None, config: dict | None = None,
                error: str | None = None, environment: dict | None = None,
                extra: dict | None = None) -> dict[str, Any]:
    """A validated record for one cell; the environment is captured when not given."""
    cell = {"study": study, "task": task, "model": model, "batch_size": batch_size,
            "compile_mode": compile_mode, "dtype": dtype, "device": device,
            "memory_format": memory_format, "shapes": shapes}
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
    for name, allowed in VARIANT_FIELDS.items():
        if name in cell and cell[name] not in allowed:
            raise ValueError(f"cell.{name} must be one of {', '.join(allowed)}, got {cell[name]!r}")


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
    if status == Status.OK and not record.get("latency"):
        raise ValueError("a record with status 'ok' needs a latency block")
    if status != Status.OK:
        if record.get("latency") is not None or record.get("throughput") is not None:
            raise ValueError(f"a record with status {status!r} must not carry latency or "
                             "throughput: those were not measured")
        if not record.get("error"):
            raise ValueError(f"a record with status {status!r} needs the error text or reason")
    bad = _non_finite_path(record)
    if bad:
        raise ValueError(f"{bad} is NaN or infinite: JSON cannot hold it and it is not a measurement")


# --- identity -------------------------------------------------------------------

def cell_variant(record: dict[str, Any]) -> tuple[str, str]:
    """(memory_format, shapes) of a record's cell; the guide's (contiguous, static) when not said."""
    cell = record["cell"]
    return tuple(cell.get(name) or allowed[0] for name, allowed in VARIANT_FIELDS.items())


def cell_identity(record: dict[str, Any]) -> tuple:
    """(study, task, model, batch_size, compile_mode, dtype, memory_format, shapes, device kind)."""
    cell = record["cell"]
    return (cell["study"], cell["task"], cell["model"], cell["batch_size"], cell["compile_mode"],
            cell["dtype"], *cell_variant(record), cell["device"].split(":")[0])


def _record_name(item: Field) -> str:
    return item.metadata["record_name"] or item.name


def _record_keys(*kinds: str) -> tuple[str, ...]:
    return tuple(_record_name(item) for item in setting_fields() if item.metadata["record"] in kinds)


def measurement_settings(settings: Settings) -> dict[str, Any]:
    """How a cell is measured, as its record's ``config`` carries it: each setting a record keeps
    (``settings``: its ``record``), under its record name (``weights_requested``: the weights asked
    for)."""
    return {**{_record_name(item): getattr(settings, item.name) for item in setting_fields()
               if item.metadata["record"] in (HASHED, COMPILE, WHEN_SET)}}


SETTINGS_KEYS = _record_keys(HASHED, COMPILE)
COMPILE_SETTINGS = _record_keys(COMPILE)  # no part of an eager cell's measurement
# settings that enter the hash only where set: the records written before them keep their keys
OPTIONAL_SETTINGS = _record_keys(WHEN_SET)


def settings_hash(config: dict[str, Any], compile_mode: str) -> str:
    """A short hash of the settings that change a cell's measurement: change one, and the cell
    is another cell (measured again on resume, shown apart in reports)."""
    settings = {key: config.get(key) for key in SETTINGS_KEYS
                if not (compile_mode == CompileMode.EAGER and key in COMPILE_SETTINGS)}
    settings.update({key: config[key] for key in OPTIONAL_SETTINGS if config.get(key) is not None})
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:12]


def environment_key(environment: dict[str, Any], kind: str) -> tuple[Any, ...]:
    """What a cell's identity takes from the environment: the torch version, the processor, and
    the host fact that changes latency on it (the GPU driver; the CPU's core count). A CPU cell
    placed by a cluster on a declared accelerator type also takes that kind (a GPU's kind is its
    name, already there)."""
    if kind == "cuda":
        return (environment.get("torch_version"), gpu_name(environment, "cuda:0"),
                environment.get("driver_version"))
    return (environment.get("torch_version"), environment.get("cpu_model"),
            environment.get("cpu_count_logical"), environment.get("accelerator_type"))


def record_key(record: dict[str, Any]) -> tuple:
    """A cell's identity, how it was measured, and on what: the same key means the same measurement."""
    identity = cell_identity(record)
    return (*identity, settings_hash(record.get("config") or {}, identity[4]),
            *environment_key(record.get("environment") or {}, identity[-1]))


# --- records of cells that were not measured -------------------------------------

def failure_record(*, study: str, task: str, model: str, batch_size: int, compile_mode: str,
                   dtype: str, device: str, status: str, error: str, config: dict[str, Any],
                   environment: dict[str, Any] | None = None, memory_format: str = "contiguous",
                   shapes: str = "static", **extra: Any) -> dict[str, Any]:
    """The record of a cell that was not measured (oom, error or skipped)."""
    return make_record(study=study, task=task, model=model, batch_size=batch_size,
                       compile_mode=compile_mode, dtype=dtype, device=device, memory_format=memory_format,
                       shapes=shapes, status=status,
                       error=error, config=config, environment=environment,
                       extra=extra or None)


def skipped_after_oom(cell: dict[str, Any], oom_at: int, config: dict[str, Any],
                      environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of a cell not run because a smaller batch of its group ran out of memory."""
    return failure_record(**cell, status=Status.OOM, config=config, environment=environment,
                          error=f"not run: batch size {oom_at} ran out of memory for this model, "
                                "mode, dtype and variant",
                          skipped_after_oom=oom_at)
