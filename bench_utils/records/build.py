"""Result records: one JSON object per line of a ``results.jsonl``; what a record holds: docs/records.md.

Building records lives here, as the JSON a line holds (``make_record`` and the blocks' builders); the typed record in
``records.schema``, its check in ``records.check``, its identity in ``records.key``, the results file in
``records.results_file``. No torch and no pandas are imported: the runner, the lease and the report read records
without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping
import uuid

from ..environment.capture import capture_environment
from .check import InvalidRecord, cell_problem
from .schema import CELL_FIELDS, SCHEMA_VERSION, Record
from .key import VARIANT_FIELDS, record_name
from ..settings import COMPILE, HASHED, WHEN_SET, Settings, setting_fields
from ..vocabulary import Status

if TYPE_CHECKING:  # the measurement layer imports torch; records are read without it
    from ..measurement.timing import Measurement

JsonBlock = dict[str, Any]  # a block as a record's JSON holds it (``records.schema`` types it)
MAX_ERROR_CHARS = 8_000


# --- building ---------------------------------------------------------------------

def latency_block(measurement: Measurement) -> JsonBlock:
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


def make_record(cell: Mapping[str, Any], *, status: str = Status.OK, measurement: Measurement | None = None,
                memory: JsonBlock | None = None, compile: JsonBlock | None = None,
                config: JsonBlock | None = None, error: str | None = None,
                environment: JsonBlock | None = None, extra: dict | None = None) -> dict[str, Any]:
    """A record for one cell, as its JSON line holds it, checked (``records.check``: ``Record.from_json`` reads it
    back as it was); the environment is captured when not given.

    ``cell`` is the record's ``cell`` block: the identity (``CELL_FIELDS``) and the variant (the settings a
    cell's identity takes, ``records.key.VARIANT_FIELDS``: a ``CellIdentity.cell_block()``, say), each
    variant setting its default where ``cell`` has none. The other settings travel in ``config``."""
    cell = record_cell(cell)
    reason = cell_problem(cell)  # before anything is computed from it
    if reason:
        raise InvalidRecord(reason)
    compile_block: JsonBlock = {**(compile or {})}
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
        "throughput": ({"unit": "samples/s", "value": measurement.throughput(cell["batch_size"])}
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


def record_cell(cell: Mapping[str, Any]) -> JsonBlock:
    """``cell`` as a record's ``cell`` block, in the schema's order: the identity fields, then the variant's,
    each its default where ``cell`` gives none; ValueError naming a key that is neither."""
    unknown = sorted(set(cell) - set(CELL_FIELDS) - set(VARIANT_FIELDS))
    if unknown:
        raise ValueError(f"no cell field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: the cell's "
                         f"fields are {', '.join((*CELL_FIELDS, *VARIANT_FIELDS))}")
    block = {name: cell.get(name) for name in CELL_FIELDS}
    block.update({name: cell.get(name) or allowed[0] for name, allowed in VARIANT_FIELDS.items()})
    return block


def _tail(text: str) -> str:
    # Tracebacks name files under the home directory, and so the user: published reports must not.
    text = str(text).replace(str(Path.home()), "~")
    return text if len(text) <= MAX_ERROR_CHARS else "..." + text[-MAX_ERROR_CHARS:]


def validate_record(record: Any) -> Record:
    """The record ``record`` (a JSON object of the current schema) is, checked (``records.check``);
    ``InvalidRecord`` (a ValueError) naming the first field that makes it invalid."""
    if not isinstance(record, Mapping):
        raise InvalidRecord(f"a record must be a dict, got {type(record).__name__}")
    if record.get("schema_version") != SCHEMA_VERSION:
        raise InvalidRecord(f"schema_version must be {SCHEMA_VERSION}, got {record.get('schema_version')!r}")
    return Record.from_json(record)


# --- a record's config -------------------------------------------------------------

def measurement_settings(settings: Settings) -> JsonBlock:
    """How a cell is measured, as its record's ``config`` carries it: each setting a record keeps
    (``settings``: its ``record``), under its record name (``weights_requested``: the weights asked
    for)."""
    return {record_name(item): getattr(settings, item.name) for item in setting_fields()
            if item.metadata["record"] in (HASHED, COMPILE, WHEN_SET)}


def unmeasured_config(settings: Settings) -> JsonBlock:
    """The ``config`` of a record a runner writes for a cell no kernel measured: no weights were."""
    return {**measurement_settings(settings), "weights": None}


# --- records of cells that were not measured -------------------------------------

def failure_record(cell: Mapping[str, Any], *, status: str, error: str, config: JsonBlock,
                   environment: JsonBlock | None = None, **extra: Any) -> dict[str, Any]:
    """The record of a cell that was not measured (oom, error or skipped); ``cell`` as ``make_record`` takes it."""
    return make_record(cell, status=status, error=error, config=config, environment=environment,
                       extra=extra or None)


def skipped_after_oom(cell: Mapping[str, Any], oom_at: int, config: JsonBlock,
                      environment: JsonBlock | None = None) -> dict[str, Any]:
    """The record of a cell not run because a smaller batch of its group ran out of memory."""
    return failure_record(cell, status=Status.OOM, config=config, environment=environment,
                          error=f"not run: batch size {oom_at} ran out of memory for this model, "
                                "mode, dtype and variant",
                          skipped_after_oom=oom_at)


def with_phases(record: dict[str, Any], phases: JsonBlock) -> dict[str, Any]:
    """``record`` (its JSON) with the seconds its kernel spent on it (``study.cell.time_by_phase``); the writer
    (``results_file.append_record``) checks it, as every record it appends."""
    return {**record, "phases": phases}
