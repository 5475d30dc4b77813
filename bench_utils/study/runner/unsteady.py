"""Unsteady cells, measured once more: a compiled cell whose block means changed regime inside its timed runs
(``docs/study.md``, "Unsteady cells are measured once more"; on the H200, BEiT at batch 1's compiled blocks went
from about 6.3 ms to 3.6 ms at block 12, the GPU clock unchanged). Once: an extra replicate that shifts too is not
measured again.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from ...measurement.regime import RegimeShift, block_regime
from ...records.key import RecordKey, record_key
from ...records.schema import Record
from ...vocabulary import MAX_REPLICATES
from ..grid.grid_file import Cell


def regime_shifts(record: Record) -> dict[str, RegimeShift]:
    """The sides (``eager``, ``compiled``) of an ``ok`` compiled record whose block means changed regime."""
    speedup, latency = record.speedup, record.latency
    if not record.ok or speedup is None or latency is None or not speedup.block_runs:
        return {}
    shifts = {side: block_regime(values, speedup.block_runs)
              for side, values in (("eager", speedup.eager_values), ("compiled", latency.values))}
    return {side: shift for side, shift in shifts.items() if shift is not None}


def remeasures(cell: Cell) -> bool:
    """Whether ``cell``'s grid measures an unsteady cell once more (its setting; by default on a GPU only)."""
    setting = cell.settings.remeasure_unsteady
    return cell.device == "cuda" if setting is None else setting


def keeps_compiles(cells: Iterable[Cell]) -> bool:
    """Whether a later process may compile warm from a cell's kept cold compile (``variants.kept_caches``): a later
    replicate, or a cell measured once more; where neither can come, the kernels keep none (nothing piles up)."""
    return any((cell.settings.replicates or 1) > 1 or remeasures(cell) for cell in cells)


def once_more(cells: Iterable[Cell], records: Iterable[Record], key: Callable[[Cell], RecordKey]) -> list[Cell]:
    """The cells of ``cells`` (a grid's) to measure once more: each compiled cell that remeasures, one of whose
    replicates' records shifted regime, as the replicate after its last, where none such was recorded yet."""
    by_key = {record_key(record).without_study(): record for record in records}
    grid = [cell for cell in cells if cell.compile_mode != "eager" and remeasures(cell)]
    found: dict[tuple, tuple[int, Cell]] = {}  # in the grid's order
    for cell in grid:
        record = by_key.get(key(cell).without_study())
        if record is None or not regime_shifts(record):
            continue
        # a row's modes (the same cell but for its compile mode) were timed beside one eager series: all of them
        # once more, in one row again
        row = set(record.speedup.timed_with or []) if record.speedup else set()
        same_row = [other for other in grid if other.compile_mode in row
                    and dataclasses.replace(other, compile_mode=cell.compile_mode) == cell]
        for member in [cell] + same_row:
            count = member.settings.replicates or 1
            extra = member.as_replicate(count + 1)
            if count < MAX_REPLICATES and key(extra).without_study() not in by_key:
                found.setdefault(key(extra).without_study(), (grid.index(member), extra))
    return [extra for _, extra in sorted(found.values(), key=lambda item: item[0])]
