"""``run GRID --time-limit 9m``: start no cell that would not finish in time, and stop at the limit
(``docs/study.md``, "Time limit"); each cell priced by ``pricing.prices`` at the estimate's high figure, so that the
last one started rarely overruns.
"""

from __future__ import annotations

from functools import partial
import os
from pathlib import Path
import re
import threading
import time
from typing import Any, Callable

from ...errors import UserError
from ...paths import REPORTS_DIR
from ...variants.kept_caches import KeptCaches, default_root, kept_cell
from ..grid.grid_file import Cell, Grid
from ..grid.kernel_groups import KernelGroup
from ..pricing.plan import duration_text
from ..pricing.prices import Prices, gpu_of, results_files
from ..pricing.prior import SHARED_EAGER_S

# (group, cells, figure) -> a kernel's start and each of its cells' seconds at an estimate's figure ("high", "point")
KernelCosts = Callable[..., "tuple[float, list[float]]"]
UNKNOWN_CELL_S = 300.0    # a cell nothing prices: more than a guide cell takes on a GPU
UNKNOWN_START_S = 120.0   # a kernel start nothing prices: boot, imports and the largest model build
LIMIT_REACHED_EXIT = 3    # the run stopped at its time limit with cells left: run it again to go on
LIMIT_TOO_SHORT_EXIT = 4  # nothing started: the next kernel's start and first cell need a longer limit
_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """Seconds of ``9m``, ``540s``, ``1h``, ``1.5h``, ``540`` (seconds); UserError in one line."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(s|m|min|h)?\s*", str(text).lower())
    if not match or float(match.group(1)) <= 0:
        raise UserError(f"--time-limit {text!r}: give a positive duration such as 9m, 540s, 1h or 540 (seconds)")
    return float(match.group(1)) * _UNITS[match.group(2) or ""]


class TimeLimit:
    """The run's deadline: which cells may still start, and the stop when it passes."""

    def __init__(self, seconds: float, costs: KernelCosts, clock: Callable[[], float] = time.monotonic,
                 started: float | None = None, say: Callable[[str], None] = lambda line: None) -> None:
        """``costs(group, cells, figure)``: the kernel's start and each cell's seconds (``cell_costs``);
        ``say``: tells the person watching what is held back."""
        self.seconds, self.costs, self.clock, self.say = seconds, costs, clock, say
        self.deadline = (clock() if started is None else started) + seconds
        self.reached = False          # the deadline passed while the run was on
        self.held_back = False        # a cell was not started: it would not have finished in time
        self.started_any = False      # a kernel was given cells in this run
        self.needs: float | None = None  # seconds a kernel's start and first cell need, where the limit is shorter
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        return self.deadline - self.clock()

    def fitting(self, group: KernelGroup, cells: list[Cell]) -> list[Cell]:
        """The first of ``cells`` (not empty) that the kernel can start and finish before the deadline."""
        start, seconds = self.costs(group, cells)
        budget, total, fit = self.left(), start, []
        for cell, cost in zip(cells, seconds):
            total += cost
            if total > budget:
                break
            fit.append(cell)
        if not fit and not self.started_any:
            fit = self._first_on_its_point_figure(group, cells, budget)
        self.started_any = self.started_any or bool(fit)
        if len(fit) < len(cells):
            self.held_back = True
            self.say(f"[run] time limit: {len(fit)} of the {len(cells)} cell(s) of {group.group_id} fit in the "
                     f"{duration_text(max(budget, 0.0))} left ({duration_text(total)} with the next); the rest "
                     "wait for a later run")
        return fit

    def _first_on_its_point_figure(self, group: KernelGroup, cells: list[Cell], budget: float) -> list[Cell]:
        """The first cell, where the kernel's start and it fit by the estimate's point figure; else none,
        and how long a limit they need."""
        start, seconds = self.costs(group, cells[:1], figure="point")
        if start + seconds[0] <= budget:
            self.say(f"[run] time limit: {group.group_id}'s first cell fits only by its estimate's point figure "
                     f"({duration_text(start + seconds[0])}): started, so that its record calibrates the estimate")
            return cells[:1]
        self.needs = max(self.needs or 0.0, start + seconds[0])
        self.say(f"[run] time limit: {group.group_id} needs a limit of {duration_text(start + seconds[0])} at least "
                 "(its start and first cell, by the estimate's point figure)")
        return []

    def arm(self, on_limit: Callable[[], None]) -> None:
        """Call ``on_limit`` (the runner's stop) when the deadline passes; ``disarm`` cancels it."""
        def fire() -> None:
            self.reached = True
            on_limit()

        self._timer = threading.Timer(max(0.0, self.left()), fire)
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def cell_costs(results_path: Path, environment: dict[str, Any], gpu: str | None, group: KernelGroup, cells: list[Cell],
               figure: str = "high", *, reports_dir: str | os.PathLike | None = None) -> tuple[float, list[float]]:
    """A kernel's start and each cell's seconds at ``figure`` ("high" or "point"), priced (``pricing.prices``) from the
    records as they are now, and this machine's kept caches (a cold compile kept here before the kernel starts:
    carried in, or an earlier replicate's); the unknown ones at ``UNKNOWN_START_S`` and ``UNKNOWN_CELL_S``."""
    prices = Prices(results_files(results_path, reports_dir or REPORTS_DIR), environment, gpu)
    caches = KeptCaches(default_root(Path(results_path).parent))

    def kept(cell: Cell) -> bool:
        return kept_cell(caches, cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.settings,
                         cell.dtype, cell.device).cold() is not None

    sharing = KernelGroup(group.group_id, tuple(cells)).eager_sharing_pairs()
    start, spans, _ = prices.kernel(cells, sharing, kept)
    # an eager cell that takes a compiled cell's pairs runs nothing: an unpriced one would hold back those after it
    return (UNKNOWN_START_S if start is None else getattr(start, figure),
            [getattr(span, figure) if span else SHARED_EAGER_S if cell in sharing else UNKNOWN_CELL_S
             for cell, span in zip(cells, spans)])


def time_limit_for(grid: Grid, results_path: Path, environment: dict[str, Any], seconds: float,
                   device_model: str | None, stream, started: float) -> TimeLimit:
    """A limit of ``seconds`` from ``started`` (``time.monotonic()``) on a run of ``grid`` into ``results_path`` on
    ``environment`` (what the ``Runner`` is built with), said on ``stream``."""
    gpu = gpu_of(environment, device_model) if any(cell.device.startswith("cuda") for cell in grid.cells) else None
    limit = TimeLimit(seconds, partial(cell_costs, results_path, environment, gpu),
                      started=started, say=lambda line: print(line, file=stream, flush=True))
    source = f"else the a-priori estimate for {gpu}" if gpu else "no a-priori estimate (no known GPU)"
    print(f"[run] time limit {duration_text(seconds)}: a kernel starts only the cells that fit (estimates from "
          f"records, {source}, else {UNKNOWN_CELL_S / 60:.0f} min a cell); the run stops at the limit",
          file=stream, flush=True)
    return limit
