"""One upgrader: a record of any schema version as the current one, lifted as it is read, never rewritten in its
file (docs/records.md, "One upgrader"). A figure an old version did not measure stays absent, never made up.

- 1 -> 2: pipelined timing, an unpaired speed-up (its ``method`` says so), TF32 a boolean (read as its policy's name).
- 2 -> 3: the cell's variant fields take their defaults, ``config`` is always there, and a lone ``cuda_graphs``
  boolean (before request and outcome were told apart) is the request, ``cuda_graphs_requested``.

Nothing here imports torch or pandas.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from ..vocabulary import Sync, tf32_policy
from .value_types import VARIANT_FIELDS

OLDEST_VERSION = 1
UNPAIRED_METHOD = "ratio of means, unpaired runs (schema 1: Welch's t-test, pipelined timing)"


def upgrade(record: dict[str, Any], to_version: int) -> dict[str, Any]:
    """``record`` lifted to ``to_version`` (a copy; the same where it is that version already). ValueError for a
    version below ``OLDEST_VERSION`` or above ``to_version``: a newer bench_utils wrote it."""
    version = record.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < OLDEST_VERSION:
        raise ValueError(f"schema_version must be a version from {OLDEST_VERSION} to {to_version}, got {version!r}")
    if version > to_version:
        raise ValueError(f"schema_version {version} is newer than this bench_utils reads ({to_version}); "
                         "upgrade bench_utils")
    if version == to_version:
        return record
    record = copy.deepcopy(record)
    for step in STEPS[version - OLDEST_VERSION:to_version - OLDEST_VERSION]:
        step(record)
    return record


def _from_1(record: dict[str, Any]) -> None:
    config = _dict(record, "config")
    if isinstance(config.get("tf32"), bool):
        config["tf32"] = str(tf32_policy(config["tf32"]))
    config.setdefault("sync", str(Sync.PIPELINED))
    if isinstance(record.get("latency"), dict):
        record["latency"].setdefault("sync", str(Sync.PIPELINED))
    compiled = record.get("compile")
    if isinstance(compiled, dict):
        for name in ("backend", "fullgraph", "dynamic"):
            if name in compiled:
                config.setdefault(name, compiled[name])
    if "weights" in config:
        config.setdefault("weights_requested", config["weights"])
    speedup = record.get("speedup")
    if isinstance(speedup, dict):
        speedup.setdefault("method", UNPAIRED_METHOD)
    record["schema_version"] = 2


def _from_2(record: dict[str, Any]) -> None:
    cell = record.get("cell")
    if isinstance(cell, dict):
        for name, default in VARIANT_DEFAULTS.items():
            if cell.get(name) is None:
                cell[name] = default
    _dict(record, "config")
    compiled = record.get("compile")
    if isinstance(compiled, dict) and "cuda_graphs_requested" not in compiled \
            and isinstance(compiled.get("cuda_graphs"), bool):
        compiled["cuda_graphs_requested"] = compiled["cuda_graphs"]
    record["schema_version"] = 3


def _dict(record: dict[str, Any], name: str) -> dict[str, Any]:
    if not isinstance(record.get(name), dict):
        record[name] = {}
    return record[name]


# the settings a cell's identity takes, and the value a record written before one existed means
VARIANT_DEFAULTS = {name: allowed[0] for name, allowed in VARIANT_FIELDS.items()}
STEPS: tuple[Callable[[dict[str, Any]], None], ...] = (_from_1, _from_2)
