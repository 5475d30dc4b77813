"""Kernel groups: the cells one kernel measures, and the order it measures them in (docs/study.md: *The task
notebooks*, *Running a grid*). Batch sizes ascend, so that an out-of-memory error skips a mode's larger batches;
eager comes last, taking the eager series its batch size's compiled cells were timed against.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
import re
from typing import Any, Iterable

from ...variants.cell_plan import eager_side_stands
from ...vocabulary import Shapes
from .grid_file import Cell, kernel_key

EAGER = "eager"
STATIC = Shapes.STATIC.value


def execution_order(pairs: Iterable[tuple[str, int]], by_batch: bool = True) -> list[tuple[str, int]]:
    """``(compile_mode, batch_size)`` pairs in the order a kernel measures them, each once.

    ``by_batch`` (static shapes): batch sizes ascending, and within each the compiled modes in their first-seen
    order, eager last. Otherwise (a dynamic batch) mode by mode in that order, batch sizes ascending in each.
    """
    pairs = list(dict.fromkeys((str(mode), int(batch)) for mode, batch in pairs))
    modes = list(dict.fromkeys(mode for mode, _ in pairs))
    modes = [mode for mode in modes if mode != EAGER] + [mode for mode in modes if mode == EAGER]
    if by_batch:
        return sorted(pairs, key=lambda pair: (pair[1], modes.index(pair[0])))
    return sorted(pairs, key=lambda pair: (modes.index(pair[0]), pair[1]))


@dataclass(frozen=True)
class KernelGroup:
    """The cells of one kernel, in execution order; ``group_id`` names its notebook and log."""

    group_id: str
    cells: tuple[Cell, ...]

    @property
    def first(self) -> Cell:
        return self.cells[0]

    @property
    def device(self) -> str:
        return self.first.device

    def eager_sharing_pairs(self) -> set[Cell]:
        """Eager cells that take their latency from a compiled cell of this group at the same
        batch size (the eager side of its interleaved pairs, ``task``), where that side stands for the eager cell
        (``variants.cell_plan.eager_side_stands``: warmed up as it is): they time nothing of their own."""
        compiled = {cell.batch_size for cell in self.cells
                    if eager_side_stands(cell.compile_mode, cell.settings.warmup)}
        return {cell for cell in self.cells if cell.compile_mode == EAGER and cell.batch_size in compiled}

    def pairs(self) -> list[list]:
        """The notebook's ``only_cells`` parameter: ``[compile_mode, batch_size]`` in order."""
        return [[cell.compile_mode, cell.batch_size] for cell in self.cells]

    def without(self, done: Iterable[Cell]) -> "KernelGroup":
        done = set(done)
        return KernelGroup(self.group_id, tuple(cell for cell in self.cells if cell not in done))


def kernel_groups(cells: Iterable[Cell]) -> list[KernelGroup]:
    """The cells grouped by kernel, groups in the order their first cell appears."""
    grouped: dict[tuple, list[Cell]] = defaultdict(list)
    for cell in cells:
        grouped[kernel_key(cell)].append(cell)
    groups, used = [], set()
    for members in grouped.values():
        first = members[0]
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", "__".join((first.task, first.model, first.dtype, *first.variant,
                                                            first.device)))
        group_id, suffix = base, 2
        while group_id in used:  # the same model in sub-grids of different settings
            group_id, suffix = f"{base}__{suffix}", suffix + 1
        used.add(group_id)
        by_pair = {(cell.compile_mode, cell.batch_size): cell for cell in members}
        order = execution_order(by_pair, by_batch=first.settings.shapes == STATIC)
        groups.append(KernelGroup(group_id, tuple(by_pair[pair] for pair in order)))
    return groups


def for_workers(groups: list[KernelGroup], workers: int) -> list[KernelGroup]:
    """``groups`` in the order ``workers`` workers on one queue take them: the grid's for one; for several, every
    first replicate before any second, since a kernel's next replicate could otherwise start while its first runs
    (its caches not yet kept, its out-of-memory errors not yet recorded)."""
    if workers <= 1:
        return list(groups)
    return sorted(groups, key=lambda group: group.first.replicate.number)


def first_replicates_in(cells: Iterable[Cell]) -> set[Cell]:
    """Those of ``cells`` that are the first of their cell's replicates among them: every first replicate, and a
    later one whose earlier ones are not there (measured by an earlier run, maybe on another machine: a GPU
    lease's kept caches go with it, so there this one compiles cold, ``variants.kept_caches``)."""
    first: dict[Any, Cell] = {}
    for cell in cells:
        same = cell.identity().without_replicate()
        if same not in first or cell.replicate.number < first[same].replicate.number:
            first[same] = cell
    return set(first.values())
