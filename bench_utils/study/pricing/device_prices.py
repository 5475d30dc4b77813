"""Cells priced for a GPU: by their records on it, else by the prior calibrated on those records.

``run GRID --dry-run --device-model H100`` prices each kernel cell by cell: a cell recorded on that GPU costs
what its record says (``recorded.estimate_cell_seconds``), any other cell what the prior (``prior``) says,
calibrated by the recorded ones; the same for the kernel's start. Cells the prior has no figures for (a
model outside the table, a dtype the GPU lacks) are counted and left out. No torch is imported here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable

from ...measurement.peaks import gpu_key
from ...records.results_file import read_records
from ...records.schema import Record
from .prior import ZERO, CellShape, Prior, Span, device_key

if TYPE_CHECKING:
    from ..grid.grid_file import Cell
    from ..grid.kernel_groups import KernelGroup


def records_on_device(records: Iterable[Record], device: str) -> list[Record]:
    """The ``ok`` CUDA records with ``phases`` that were measured on a GPU of ``device``'s key."""
    return [record for record in records
            if record.ok and record.phases is not None and record.cell.device_kind == "cuda"
            and gpu_key(record.environment.gpu_name("cuda:0")) == device]


def device_prior(device_model: str, files: Iterable[str | os.PathLike]) -> tuple[Prior, list[Record]]:
    """The prior for ``device_model`` calibrated by the records of ``files`` measured on it, and those records."""
    prior = Prior(device_key(device_model))
    records = records_on_device(read_records([f for f in map(Path, files) if f.is_file()]), prior.device)
    return prior.calibrate(records), records


def device_environment(results_path: str | os.PathLike, device_model: str) -> dict[str, Any] | None:
    """The environment of the latest record of the study folder measured on a GPU of ``device_model``'s kind:
    a dry run priced for that GPU from another machine resumes as that GPU would (its cells already measured
    are not planned again). None where the folder holds none."""
    path = Path(results_path)
    records = records_on_device(read_records([path]) if path.is_file() else [], device_key(device_model))
    return records[-1].environment.to_json() if records else None


def prior_figures(group: KernelGroup, cell_seconds: list[float | None], start_seconds: float | None,
                  start_includes_load: bool, prior: Prior,
                  firsts: Collection[Cell] | None = None) -> tuple[list[Span | None], Span | None]:
    """A kernel's cells and start priced: their records where they have some, else the prior (``firsts``: the run's
    first replicates of their cells, ``kernel_groups.first_replicates_in``, the others finding their cold compile
    kept; None: as their replicates say)."""
    sharing = group.eager_sharing_pairs()
    modes: set[str] = set()
    cells = []
    for cell, seconds in zip(group.cells, cell_seconds):
        warm = cell.compile_mode not in modes  # the first batch size of a mode also compiles warm
        modes.add(cell.compile_mode)
        cells.append(Span.exact(seconds) if seconds is not None
                     else prior.cell(CellShape.of_cell(cell, None if firsts is None else cell not in firsts),
                                     cell in sharing, warm))
    start = (Span.exact(start_seconds) if start_seconds is not None and start_includes_load
             else prior.start(group.first.model))
    return cells, start


def span_of(cells: list[Span | None], start: Span | None) -> tuple[Span | None, int]:
    """A kernel's start and priced cells, and how many cells nothing priced."""
    priced = [span for span in cells if span is not None]
    if not priced and start is None:
        return None, len(cells)
    total = start or ZERO
    for span in priced:
        total = total + span
    return total, len(cells) - len(priced)
