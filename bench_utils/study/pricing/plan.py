"""What a run would do, and what it would cost: ``python -m bench_utils run GRID --dry-run`` (``docs/study.md``, "Dry
run"): the kernels, each with its cells in execution order priced by ``prices``, and the total. No torch, no pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .prices import Prices, gpu_of, results_files
from .prior import ZERO, Span

if TYPE_CHECKING:  # the grid and its groups import the compile variants, and so torch
    from ..grid.grid_file import Cell, Grid
    from ..grid.kernel_groups import KernelGroup
    from ..grid.pending import Pending


@dataclass
class KernelPlan:
    """One kernel the run would start: its start and cells (in execution order) priced, None where nothing does."""

    group: KernelGroup
    start: Span | None
    cells: list[Span | None]
    recorded: int = 0                    # cells priced by their own records

    def span(self) -> tuple[Span | None, int]:
        """The priced parts' sum (None: nothing priced), and how many cells and starts nothing priced."""
        priced = [span for span in (self.start, *self.cells) if span is not None]
        return (sum(priced, ZERO) if priced else None), len(self.cells) + 1 - len(priced)


@dataclass
class Plan:
    """What ``run`` would do for a grid, nothing of it done."""

    study: str
    grid_path: str
    results_path: Path
    cells_in_grid: int
    already_measured: int                          # ok or oom on this environment: resumed
    skipped_after_oom: list[tuple[Cell, int]]      # (cell, the batch size that ran out of memory)
    kernels: list[KernelPlan]
    records_used: int                              # records of the grid's devices with phases
    devices: list[str] = field(default_factory=list)
    gpu: str | None = None                         # the GPU a CUDA cell is priced for
    calibrated_on: int = 0                         # cells recorded on it

    @property
    def cells_to_run(self) -> int:
        return sum(len(kernel.cells) for kernel in self.kernels)


def plan_run(pending: Pending, grid: Grid, *, results_path: Path, environment: dict[str, Any], devices: list[str],
             reports_dir: str | os.PathLike | None = None, device_model: str | None = None) -> Plan:
    """The plan of ``pending`` (the cells of ``grid`` the study folder lacks) by kernel, priced by ``prices`` (a CUDA
    cell for ``device_model`` or this machine's GPU). A later replicate whose first is not pending (measured earlier,
    maybe elsewhere) finds no kept caches, as on a fresh machine: it compiles cold."""
    from ...paths import REPORTS_DIR
    from ..grid.kernel_groups import first_replicates_in, kernel_groups

    firsts = first_replicates_in(pending.cells)
    skipped = list(pending.ruled_out)  # as the runner does: larger batches than an earlier OOM are not run
    files = results_files(results_path, reports_dir or REPORTS_DIR)
    prices = Prices(files, environment, gpu_of(environment, device_model))
    kernels = []
    for group in kernel_groups(list(pending.cells)):  # grouped before the skipped leave: the runner's group ids
        group = group.without(cell for cell, _ in skipped)
        if group.cells:  # else every cell is ruled out: no kernel starts
            start, cells, recorded = prices.kernel(list(group.cells), group.eager_sharing_pairs(),
                                                   lambda cell: cell not in firsts)
            kernels.append(KernelPlan(group, start, cells, recorded))
    kinds = {cell.device.split(":")[0] for cell in grid.cells}
    return Plan(study=grid.study, grid_path=str(grid.path), results_path=results_path,
                cells_in_grid=len(grid.cells), already_measured=pending.resumed, skipped_after_oom=skipped,
                kernels=kernels, records_used=sum(len(prices.on_device(kind)) for kind in kinds), devices=devices,
                gpu=prices.gpu if "cuda" in kinds else None, calibrated_on=prices.calibrated_on)


def duration_text(seconds: float) -> str:
    """Seconds as minutes, to a tenth below ten."""
    return f"{seconds / 60:.{1 if seconds < 600 else 0}f} min"


def minutes(span: Span) -> str:
    """``~point min (low-high min)``."""
    return f"~{duration_text(span.point)} ({duration_text(span.low)[:-len(' min')]}-{duration_text(span.high)})"


def _count(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def format_plan(plan: Plan) -> str:
    """The plan as a terminal listing: header, one block per kernel, skipped cells, the total."""
    lines = [f"study {plan.study} ({plan.grid_path}): {_count(plan.cells_in_grid, 'cell')} in the grid; "
             f"results in {plan.results_path}",
             f"  already measured on this environment (skipped): {plan.already_measured}",
             f"  skipped after an earlier out-of-memory error: {len(plan.skipped_after_oom)}",
             f"  to run: {_count(plan.cells_to_run, 'cell')} in {_count(len(plan.kernels), 'kernel')}, priced from "
             f"{_count(plan.records_used, 'earlier record')} {f'on {plan.gpu}' if plan.gpu else 'of this environment'}"]
    priced = []
    for kernel in plan.kernels:
        span, unknown = kernel.span()
        priced += [span] if span else []
        notes = ([f"{_count(kernel.recorded, 'cell')} from their records"] if kernel.recorded else []) + (
            [f"{unknown} without an estimate (cells, or its start)"] if span and unknown else [])
        lines += ["", f"kernel {kernel.group.group_id} ({kernel.group.device}): "
                  + ", ".join(f"{cell.compile_mode} {cell.batch_size}" for cell in kernel.group.cells),
                  f"  estimate: {minutes(span) if span else 'no estimate'}" + "".join(f"; {note}" for note in notes)]
    if plan.skipped_after_oom:
        lines += ["", "recorded as oom without running (a smaller batch ran out of memory earlier):"]
        lines += [f"  {cell.model} {cell.dtype} {cell.device}: {cell.compile_mode} {cell.batch_size} "
                  f"(out of memory at batch {oom_at})" for cell, oom_at in plan.skipped_after_oom]
    cells, starts = sum(k.cells.count(None) for k in plan.kernels), sum(k.start is None for k in plan.kernels)
    lines.append("")
    if not plan.kernels:
        lines.append("estimated duration: nothing to run")
    elif not priced:
        lines.append(f"no estimate: no record prices these cells{'' if plan.gpu else ' on this environment'}")
    else:
        basis = (f"calibrated on {_count(plan.calibrated_on, 'cell')} recorded there" if plan.calibrated_on
                 else "uncalibrated: no cell recorded there yet")
        lines += [f"estimated duration: {minutes(sum(priced, ZERO))} for {plan.cells_to_run - cells} of "
                  f"{plan.cells_to_run} cells and {len(plan.kernels) - starts} of {len(plan.kernels)} kernel starts",
                  f"  {_count(sum(kernel.recorded for kernel in plan.kernels), 'cell')} from their own records"
                  + (f"; the rest a priori for {plan.gpu}, a model, not a measurement ({basis}; "
                     "bench_utils/study/pricing/prior.py says how)" if plan.gpu else "")]
        if cells or starts:
            lines.append(f"  not included, without an estimate: {_count(cells, 'cell')}, "
                         f"{_count(starts, 'kernel start')}")
    kinds = [device.split(":")[0] for device in plan.devices]
    if any(kinds.count(kind) > 1 for kind in kinds):  # kernels then run side by side
        lines.append(f"  one worker per device ({', '.join(plan.devices)}): the run may take less than this sum")
    return "\n".join(lines)
