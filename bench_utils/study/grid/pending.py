"""What of a grid a study folder still lacks, as one value: the runner runs it, pricing prices it.

``Runner.pending()`` reads it from the folder's records (``runner.resume``); the dry run's plan and the time
limit's account of what is left take it as it is, never the runner. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .grid_file import Cell


@dataclass(frozen=True)
class Pending:
    """The grid's cells without a record of their measurement here, in the grid's order; how many have one; and
    those an out-of-memory error of an earlier run rules out (each with the smaller batch size that ran out)."""

    cells: tuple[Cell, ...]
    resumed: int
    ruled_out: tuple[tuple[Cell, int], ...] = ()
