"""How much of a study folder's grid its records hold: "21 of the grid's 80 cells" at the top of the report.

Per environment of its records, a cell of the folder's ``grid.yaml`` is measured as resume counts it (``resume``),
whatever study name or settings the record carries; a cell measured in replicates counts once. No torch.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ...records.key import cell_identity, eager_side_key
from ...records.results_file import read_records
from ...vocabulary import DONE_STATUSES, Replicate
from ..grid.grid_file import GRID_COPY, load_grid


def grid_coverage(folder: str | Path) -> list[dict[str, Any]]:
    """Per environment of the folder's records: the grid's name and file, its cells of that device kind, and
    how many are measured, and the grid's models none of whose cells is measured (their keys). Empty where the
    folder keeps no grid or no record."""
    folder = Path(folder)
    grid_path, results = folder / GRID_COPY, folder / "results.jsonl"
    if not grid_path.is_file() or not results.is_file():
        return []
    grid = load_grid(grid_path)
    recorded: dict[tuple, set] = defaultdict(set)   # cells with a record of their own
    paired: dict[tuple, set] = defaultdict(set)     # eager cells a compiled cell's pairs measured
    for record in read_records([results]):
        on, kind = record.environment, record.cell.device_kind
        environment = (on.gpu_name("cuda:0") if kind == "cuda" else on.cpu_model, on.torch_version, kind)
        if record.status in DONE_STATUSES:
            recorded[environment].add(cell_identity(record).without_study().without_replicate())
        eager = eager_side_key(record)
        if eager is not None:
            paired[environment].add(eager.identity.without_study().without_replicate())
    coverage = []
    for environment in sorted(set(recorded) | set(paired), key=str):
        name, torch_version, kind = environment
        # a cell is one row of the page whatever its replicates: measured where any of them is
        of_kind = [cell for cell in grid.cells if cell.device.split(":")[0] == kind
                   and cell.settings.replicate == Replicate.R1]
        cells = [cell.identity().without_study() for cell in of_kind]
        own = {identity for identity in cells if identity in recorded[environment]}
        from_pairs = {identity for identity in cells if identity in paired[environment]} - own
        measured = own | from_pairs
        # the grid's models none of whose cells is measured yet: the page names them, not only counts them
        measured_models = {cell.model for cell, identity in zip(of_kind, cells) if identity in measured}
        unmeasured = sorted({cell.model for cell in of_kind} - measured_models)
        coverage.append({"folder": folder.name, "grid": grid.study, "device": name, "torch_version": torch_version,
                         "cells": len(cells), "measured": len(measured), "from_pairs": len(from_pairs),
                         "unmeasured_models": unmeasured})
    return coverage
