"""What a kernel's start and cells cost, as ``run --time-limit`` counts them before the kernel starts.

The records of the cell on this environment where there are any (``recorded``); else the a-priori estimate
(``prior``) for ``--device-model`` or the GPU this machine has, calibrated by the cells already recorded on it,
at its high figure (or, for a run that has started nothing yet, its point figure); else the conservative
rule: ``UNKNOWN_CELL_S`` per cell and ``UNKNOWN_START_S`` per kernel start. No torch is imported here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...records.key import as_environment
from ...records.schema import Record
from .device_prices import records_on_device
from .prior import SHARED_EAGER_S, CellShape, Prior, Span, device_key, warm_share
from .recorded import estimate_cell_seconds, estimate_kernel_start_seconds

if TYPE_CHECKING:
    from ..grid.grid_file import Cell, Grid
    from ..grid.kernel_groups import KernelGroup

UNKNOWN_CELL_S = 300.0    # a cell nothing prices: 5 minutes, more than a guide cell takes on a GPU
UNKNOWN_START_S = 120.0   # a kernel start nothing prices: boot, imports and the largest model build


def machine_prior(environment: dict[str, Any], grid: Grid, device_model: str | None) -> Prior | None:
    """The prior for ``device_model``, or for the GPU of ``environment`` (this machine's) where ``grid`` has CUDA
    cells and the GPU has datasheet peaks; None otherwise. UserError for an unknown ``device_model``."""
    if device_model:
        return Prior(device_key(device_model))
    name = as_environment(environment).gpu_name("cuda:0")
    if any(cell.device.startswith("cuda") for cell in grid.cells) and name:
        try:
            return Prior(device_key(name))
        except ValueError:
            return None
    return None


class CellCosts:
    """Seconds of a kernel's start and of its cells, read afresh from the records before each kernel."""

    def __init__(self, results_path: Path, environment: dict[str, Any], prior: Prior | None,
                 reports_dir: str | os.PathLike | None = None) -> None:
        """Priced from the records of ``environment`` in ``results_path`` and every study under ``reports_dir``
        (``reports/``), else by ``prior``."""
        self.results_path, self.environment, self.prior = results_path, environment, prior
        self.reports_dir = reports_dir

    def _records(self) -> tuple[list[Record], Prior | None]:
        from ...paths import REPORTS_DIR
        from ...records.results_file import read_records
        from .recorded import records_of_environment, results_files

        files = results_files(self.results_path, Path(self.reports_dir or REPORTS_DIR))
        records = records_of_environment(files, self.environment)
        if self.prior is None:
            return records, None
        device = records_on_device(read_records([f for f in files if f.is_file()]), self.prior.device)
        return records, self.prior.calibrate(device)

    def of_kernel(self, group: KernelGroup, cells: list[Cell], figure: str = "high") -> tuple[float, list[float]]:
        """The kernel's start and each cell's seconds, as the limit counts them (a prior's ``figure``)."""
        from ..grid.kernel_groups import KernelGroup as Group

        records, prior = self._records()
        prior = prior if group.device.startswith("cuda") else None  # a GPU's prior prices no CPU cell
        sharing = Group(group.group_id, tuple(cells)).eager_sharing_pairs()
        kept = {cell: self._kept_here(cell) for cell in cells}
        start = estimate_kernel_start_seconds(cells[0], records)
        if start is None:
            start = _pick(prior.start(cells[0].model) if prior else None, figure, UNKNOWN_START_S)
        seconds, modes = [], set()
        for cell in cells:
            known = estimate_cell_seconds(cell, records, cell in sharing,
                                          warm_share(cell, kept[cell]))
            if known is None and prior is None and cell in sharing:
                # it runs nothing (its plan has no step) and kernels go batch by batch: an unpriced one would
                # hold back every cell after it
                known = SHARED_EAGER_S
            warm = cell.compile_mode not in modes
            modes.add(cell.compile_mode)
            seconds.append(known if known is not None else _pick(
                prior.cell(CellShape.of_cell(cell, kept[cell]), cell in sharing, warm)
                if prior else None,
                figure,
                UNKNOWN_CELL_S))
        return start, seconds

    def _kept_here(self, cell: Cell) -> bool:
        """Whether this machine's kept caches of the study (the runner's, ``kept_caches.default_root``) hold the
        cell's cold compile before its kernel starts (carried in from another host, or kept by an earlier run here):
        a later replicate whose first an earlier run measured on a lease since ended, with no caches carried in,
        finds none, and compiles cold (``prior.CellShape.of_cell`` says which cells keep anything)."""
        from ...variants.kept_caches import KeptCaches, default_root, kept_cell

        caches = KeptCaches(default_root(Path(self.results_path).parent))
        return kept_cell(caches, cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.settings,
                         cell.dtype, cell.device).cold() is not None


def _pick(span: Span | None, figure: str, unknown: float) -> float:
    """The prior's ``figure`` ("high" or "point"; calibrated, the spread its records show); ``unknown``
    where it prices nothing."""
    return unknown if span is None else getattr(span, figure)
