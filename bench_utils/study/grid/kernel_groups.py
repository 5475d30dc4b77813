"""Kernel groups: the cells one kernel measures, and the order it measures them in.

A group is every cell of one (task, model, dtype, memory format, shapes, device) with the same
measurement settings: one kernel starts, imports torch and builds the model once for all of
them. Within a group the compiled modes come first, in the grid's order, then eager;
each mode by ascending batch size, so that an out-of-memory error skips that mode's
larger batches, and an eager cell can take its latency from the eager side of the
paired comparison a compiled cell of the same batch size has just measured.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
import re
from typing import Iterable

from ...variants.cell_plan import eager_side_stands
from .grid_file import Cell

EAGER = "eager"


def kernel_key(cell: Cell) -> tuple:
    """What the cells of one kernel share: all but batch size and compile mode."""
    return (cell.study, cell.task, cell.model, cell.dtype, cell.device, cell.settings)


def execution_order(pairs: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """``(compile_mode, batch_size)`` pairs in the order a kernel measures them.

    Compiled modes in their first-seen order, eager last; batch sizes ascending; each pair once.
    """
    pairs = list(dict.fromkeys((str(mode), int(batch)) for mode, batch in pairs))
    modes = list(dict.fromkeys(mode for mode, _ in pairs))
    modes = [mode for mode in modes if mode != EAGER] + [mode for mode in modes if mode == EAGER]
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

    @property
    def label(self) -> str:
        cell = self.first
        variant = "".join(f" {part}" for part in cell.variant)
        return f"{cell.model} {cell.dtype}{variant} on {cell.device} ({len(self.cells)} cells)"

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


def _ordered(cells: list[Cell]) -> tuple[Cell, ...]:
    by_pair = {(cell.compile_mode, cell.batch_size): cell for cell in cells}
    return tuple(by_pair[pair] for pair in execution_order(by_pair))


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
        groups.append(KernelGroup(group_id, _ordered(members)))
    return groups
