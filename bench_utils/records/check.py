"""A record held to its schema (``records.schema``): every typed key's type and range, in one line where it fails.

``problem(record)`` is None for a record every reader can use, else why not, naming the field and what it
holds: "latency.mean: must be greater than 0, got -0.0288". Records are JSON, so the check is strict (the
string "0.03" is no latency, ``true`` no count); an integer is a number. Keys the schema does not type are
left alone. The checker is pydantic's, built once from the TypedDicts: the blocks are typed in one place and
checked against the same types (``records.build.validate_record`` calls it on every record written and read).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping

from ..parameters import quoted

@functools.cache
def _checker():
    from pydantic import TypeAdapter

    from .schema import Record

    return TypeAdapter(Record)


def problem(record: Mapping[str, Any]) -> str | None:
    """Why ``record`` does not hold to the schema's types and ranges (its first such field), or None."""
    from pydantic import ValidationError

    try:
        _checker().validate_python(record, strict=True)
    except ValidationError as exc:
        return _reason(exc.errors(include_url=False)[0])
    return _consistency(record)


def _reason(error: dict[str, Any]) -> str:
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
    return f"{where}: {message}, got {quoted(error.get('input'))}"


def _is_type_tag(part: Any) -> bool:
    # pydantic names the member of a union it tried ("latency.float"): not a field of the record
    return isinstance(part, str) and (part in ("function-after", "list", "dict", "none", "str", "int", "float",
                                               "bool", "literal") or "[" in part)


def _consistency(record: Mapping[str, Any]) -> str | None:
    """What types cannot say: an interval's bounds in order, a mean inside its runs."""
    latency = record.get("latency") or {}
    # the mean of equal runs may differ from them in its last bit
    if latency and "min" in latency and "max" in latency and not (
            latency["min"] * (1 - 1e-9) <= latency["mean"] <= latency["max"] * (1 + 1e-9)):
        return f"latency.mean {latency['mean']!r} lies outside its runs' [min, max] = [{latency['min']!r}, {latency['max']!r}]"
    speedup = record.get("speedup") or {}
    for name in ("mean_ci95", "median_ci95"):
        interval = speedup.get(name)
        if interval and interval[0] > interval[1]:
            return f"speedup.{name}: its low bound {interval[0]!r} is above its high bound {interval[1]!r}"
    return None
