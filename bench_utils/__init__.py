"""bench_utils: measure, explain and publish torch.compile inference speed-ups on vision models.

Public API (``from bench_utils import measure, compare``): ``measure`` / ``Measurement``
``compare`` / ``Comparison`` and ``compare_many`` / ``RowComparison`` (timing), ``MemoryProbe`` (memory),
``capture_environment`` (environment), ``make_record``, ``append_record``,
``read_records`` and ``read_results`` (result records), ``load_model`` and
``list_models`` (the model zoo).

Subpackages, lowest layer first (a layer never imports a higher one):
``measurement`` (timing and statistics), ``zoo`` (models and inputs), ``variants``
(compile modes, precision, accuracy gate), ``study`` (grids, runner, task
notebooks' entry point), ``cluster`` (the study on a Ray cluster), ``report`` (tables,
plots, i18n, rendering). At the top:
``records`` and ``results`` (the record schema and the results file), ``env``,
``paths``, ``kernel`` and ``cli``.

The names are imported on first use, so ``import bench_utils.records.build`` (or the
lease) does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "Comparison": "measurement.compare", "compare": "measurement.compare",
    "RowComparison": "measurement.compare", "compare_many": "measurement.compare",
    "Measurement": "measurement.timing", "measure": "measurement.timing",
    "MemoryProbe": "measurement.memory",
    "capture_environment": "environment.capture",
    "make_record": "records.build",
    "append_record": "records.results_file", "read_records": "records.results_file",
    "read_results": "records.results_file",
    "load_model": "zoo.loading", "list_models": "zoo.registry",
}
_RENAMED = {"load_model": "load"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bench_utils' has no attribute {name!r}")
    module = importlib.import_module(f".{_PUBLIC[name]}", __name__)
    value = getattr(module, _RENAMED.get(name, name))
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
