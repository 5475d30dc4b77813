"""What holds a record to its schema beyond its types, and a failure said in one line naming the field and what it
holds (docs/records.md, "Checked against its schema"; ``Record.from_json`` asks these in turn). No torch, no pandas.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from ..parameters import quoted
from ..vocabulary import Status
from .value_types import CELL_FIELDS, VARIANT_FIELDS

STATUSES = tuple(str(status) for status in Status)


class InvalidRecord(ValueError):
    """A JSON object that is no record of the schema: the first field that fails, and what it holds."""


# --- the rules types do not say ------------------------------------------------------------------------------

def rules_problem(record: Mapping[str, Any]) -> str | None:
    """What makes ``record`` (its JSON, at the current version) no record, of what types cannot say; or None."""
    return cell_problem(record.get("cell")) or _status_problem(record) or _non_finite(record)


def cell_problem(cell: Any) -> str | None:
    """Why ``cell`` is no record's ``cell`` block (its first field missing or malformed; the variant fields may be
    absent: their defaults), or None."""
    if not isinstance(cell, dict):
        return "record has no 'cell' block"
    for name in CELL_FIELDS:
        value = cell.get(name)
        if name == "batch_size":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                return f"cell.batch_size must be an integer >= 1, got {quoted(value)}"
        elif not isinstance(value, str) or not value:
            return f"cell.{name} must be a non-empty string, got {quoted(value)}"
    for name, allowed in VARIANT_FIELDS.items():
        if name in cell and cell[name] not in allowed:
            return f"cell.{name} must be one of {', '.join(allowed)}, got {quoted(cell[name])}"
    return None


def _status_problem(record: Mapping[str, Any]) -> str | None:
    status = record.get("status")
    if status not in STATUSES:
        return f"status must be one of {', '.join(STATUSES)}, got {quoted(status)}"
    if status == "ok" and not record.get("latency"):
        return "a record with status 'ok' needs a latency block"
    if status != "ok":
        if record.get("latency") is not None or record.get("throughput") is not None:
            return f"a record with status {status!r} must not carry latency or throughput: those were not measured"
        if not record.get("error"):
            return f"a record with status {status!r} needs the error text or reason"
    return None


def _non_finite(value: Any, path: str = "record") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path} is NaN or infinite: JSON cannot hold it and it is not a measurement"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def consistency_problem(record: Any) -> str | None:
    """What types cannot say of a typed record (``records.schema.Record``, which asks this as it is built, so this
    module imports it not: the rules come first): an interval's bounds in order, a mean inside its runs."""
    latency = record.latency
    # the mean of equal runs may differ from them in its last bit
    if latency and latency.min is not None and latency.max is not None and not (
            latency.min * (1 - 1e-9) <= latency.mean <= latency.max * (1 + 1e-9)):
        return f"latency.mean {latency.mean!r} lies outside its runs' [min, max] = [{latency.min!r}, {latency.max!r}]"
    for name in ("mean_ci95", "median_ci95"):
        interval = getattr(record.speedup, name, None)
        if interval and interval[0] > interval[1]:
            return f"speedup.{name}: its low bound {interval[0]!r} is above its high bound {interval[1]!r}"
    return None


# --- pydantic's error, in one line ---------------------------------------------------------------------------

def error_reason(error: Mapping[str, Any]) -> str:
    """One pydantic error as one line: the field's dotted name, what it must be, and what it holds."""
    where = ".".join(str(part) for part in error["loc"] if not _is_type_tag(part))
    if error["type"] == "predicate_failed":  # its docstring says what the value must be
        from . import value_types

        name = re.search(r"Predicate '(\w+)'", error["msg"])
        message = getattr(getattr(value_types, name.group(1), None), "__doc__", None) if name else None
        message = " ".join((message or error["msg"]).split())
    elif error["type"] == "missing":
        return f"{where}: missing"
    else:
        message = error["msg"][:1].lower() + error["msg"][1:]
        message = re.sub(r"^(input|value|list|string|dictionary) should (be|have)", r"must \2", message)
        message = message.replace(" after validation", "")
        message = re.sub(r"^must be a valid (\w+) instance of (\w+)$", r"must be a JSON object (\2)", message)
    return f"{where}: {message}, got {quoted(error.get('input'))}"


def _is_type_tag(part: Any) -> bool:
    # pydantic names the member of a union it tried ("latency.float"): not a field of the record
    return isinstance(part, str) and (part in ("function-after", "list", "dict", "none", "str", "int", "float",
                                               "bool", "literal") or "[" in part or part[:1].isupper())
