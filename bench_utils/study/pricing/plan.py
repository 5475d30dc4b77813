"""What a run would do, and what it would cost: ``python -m bench_utils run GRID --dry-run``.

The plan lists the kernels the runner would start, the cells each measures in execution order, and the
cells an earlier out-of-memory error rules out. Each cell and kernel start is priced from earlier records of
this environment (``recorded``); what no record covers is counted and left out of the total, never guessed.
With ``--device-model`` the records are that GPU's, and the rest is priced a priori, with a range
(``device_prices``, ``prior``). ``plan_text`` prints it. No torch and no pandas are imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .device_prices import device_prior, prior_figures, span_of
from .prior import Prior, Span, warm_share
from .recorded import (estimate_cell_seconds, estimate_kernel_start_seconds, records_of_environment, results_files,
                       start_and_load)

if TYPE_CHECKING:  # the grid and its groups import the compile variants, and so torch
    from ..grid.grid_file import Cell
    from ..grid.grid_file import Grid
    from ..grid.kernel_groups import KernelGroup
    from ..grid.pending import Pending


@dataclass
class KernelPlan:
    """One kernel the run would start: its cells in execution order, and what they would cost."""

    group: KernelGroup
    cell_seconds: list[float | None]     # one per cell of the group; None: no earlier record
    start_seconds: float | None          # kernel boot and model build; None: no earlier record
    start_includes_load: bool            # False: only other models' kernel starts were known
    prior_cells: list[Span | None] = field(default_factory=list)  # --device-model: records, else the prior
    prior_start: Span | None = None

    @property
    def unknown_cells(self) -> int:
        return sum(seconds is None for seconds in self.cell_seconds)

    @property
    def known_seconds(self) -> float:
        """The start and the cells that have an estimate; the rest is not included."""
        return (self.start_seconds or 0.0) + sum(s for s in self.cell_seconds if s is not None)

    def span(self) -> tuple[Span | None, int]:
        """Priced for a GPU: the start and priced cells, and how many cells nothing priced."""
        return span_of(self.prior_cells, self.prior_start)


@dataclass
class Plan:
    """What ``run`` would do for a grid on this machine, nothing of it done."""

    study: str
    grid_path: str
    results_path: Path
    cells_in_grid: int
    already_measured: int                          # ok or oom on this environment: resumed
    skipped_after_oom: list[tuple[Cell, int]]      # (cell, the batch size that ran out of memory)
    kernels: list[KernelPlan]
    records_used: int                              # earlier records of this environment with phases
    devices: list[str] = field(default_factory=list)
    prior: Prior | None = None                     # --device-model: the a-priori estimate's device

    @property
    def cells_to_run(self) -> int:
        return sum(len(kernel.group.cells) for kernel in self.kernels)

    @property
    def unknown_cells(self) -> int:
        return sum(kernel.unknown_cells for kernel in self.kernels)

    @property
    def unknown_starts(self) -> int:
        return sum(kernel.start_seconds is None for kernel in self.kernels)

    @property
    def starts_without_load(self) -> int:
        return sum(kernel.start_seconds is not None and not kernel.start_includes_load
                   for kernel in self.kernels)

    @property
    def estimated_seconds(self) -> float:
        """The sum over kernels of what is known: one worker's time, unknown parts left out."""
        return sum(kernel.known_seconds for kernel in self.kernels)

    def span(self) -> tuple[Span | None, int]:
        """Priced for a GPU: the sum over kernels (one worker's time), and the cells nothing priced."""
        total, unknown = None, 0
        for kernel in self.kernels:
            span, missing = kernel.span()
            unknown += missing
            if span is not None:
                total = span if total is None else total + span
        return total, unknown


def plan_run(pending: Pending, grid: Grid, *, results_path: Path, environment: dict[str, Any], devices: list[str],
             reports_dir: str | os.PathLike | None = None, device_model: str | None = None) -> Plan:
    """The plan of ``pending`` (``Runner.pending()``: the cells of ``grid`` the study folder of ``results_path``
    lacks) by kernel, estimated from earlier records of ``environment`` in the study's results file and every
    ``reports/*/results.jsonl``; with ``device_model``, from the records of that GPU, and the rest a priori
    (``device_prices``).
    """
    from ...paths import REPORTS_DIR
    from ..grid.kernel_groups import first_replicates_in, kernel_groups

    # a later replicate whose first an earlier run measured finds no kept caches (a fresh machine): it compiles cold
    firsts = first_replicates_in(pending.cells)
    skipped = list(pending.ruled_out)  # as the runner does: larger batches than an earlier OOM are not run
    files = results_files(results_path, Path(reports_dir or REPORTS_DIR))
    prior, on_device = device_prior(device_model, files) if device_model else (None, [])
    records = on_device if prior else records_of_environment(files, environment)
    kernels: list[KernelPlan] = []
    for group in kernel_groups(list(pending.cells)):  # grouped before the skipped leave: the runner's group ids
        group = group.without(cell for cell, _ in skipped)
        if not group.cells:
            continue  # every cell ruled out: no kernel starts
        start = estimate_kernel_start_seconds(group.first, records)
        sharing = group.eager_sharing_pairs()
        kernel = KernelPlan(group, [estimate_cell_seconds(cell, records, cell in sharing,
                                                          warm_share(cell, cell not in firsts))
                                    for cell in group.cells],
                            start, bool(start_and_load(group.first, records)))
        if prior:
            kernel.prior_cells, kernel.prior_start = prior_figures(group, kernel.cell_seconds, kernel.start_seconds,
                                                                   kernel.start_includes_load, prior, firsts=firsts)
        kernels.append(kernel)
    return Plan(study=grid.study, grid_path=str(grid.path), results_path=results_path,
                cells_in_grid=len(grid.cells), already_measured=pending.resumed, skipped_after_oom=skipped,
                kernels=kernels, records_used=len(records), devices=devices, prior=prior)
