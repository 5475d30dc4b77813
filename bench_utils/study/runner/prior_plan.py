"""The dry run's plan priced a priori for a GPU: ``run GRID --dry-run --device-model H100``.

Each kernel of the plan (``estimate.plan_run``) is priced cell by cell: a cell recorded on that GPU
costs what its record says (``estimate.estimate_cell_seconds``), any other cell what the prior
(``prior_estimate``) says, calibrated by the recorded ones; the same for the kernel's start. The
result is minutes with a range, per kernel and in total, labelled as an a-priori estimate for that
device. Cells the prior has no figures for (a model outside the table, a dtype the GPU lacks) are
counted and left out. No torch is imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable
import os

from ...results import read_records
from .prior_estimate import ZERO, CellShape, Prior, Span, device_key, records_on_device

if TYPE_CHECKING:
    from .estimate import KernelPlan, Plan


def device_prior(device_model: str, files: Iterable[str | os.PathLike]) -> tuple[Prior, list[dict[str, Any]]]:
    """The prior for ``device_model`` calibrated by the records of ``files`` measured on it, and those records."""
    from pathlib import Path

    prior = Prior(device_key(device_model))
    records = records_on_device(read_records([f for f in map(Path, files) if f.is_file()]), prior.device)
    return prior.calibrate(records), records


def device_environment(results_path, device_model: str) -> dict[str, Any] | None:
    """The environment of the latest record of the study folder measured on a GPU of ``device_model``'s kind:
    a dry run priced for that GPU from another machine resumes as that GPU would (its cells already measured
    are not planned again). None where the folder holds none."""
    from pathlib import Path

    from ...record_blocks import block

    path = Path(results_path)
    records = records_on_device(read_records([path]) if path.is_file() else [], device_key(device_model))
    return block(records[-1], "environment") if records else None


def price_kernel(kernel: KernelPlan, prior: Prior) -> None:
    """Fill ``kernel.prior_cells`` and ``prior_start`` for what its records do not price."""
    sharing = kernel.group.eager_sharing_pairs()
    modes: set[str] = set()
    kernel.prior_cells = []
    for cell, seconds in zip(kernel.group.cells, kernel.cell_seconds):
        warm = cell.compile_mode not in modes  # the first batch size of a mode also compiles warm
        modes.add(cell.compile_mode)
        kernel.prior_cells.append(Span.exact(seconds) if seconds is not None
                                  else prior.cell(CellShape.of_cell(cell), cell in sharing, warm))
    if kernel.start_seconds is not None and kernel.start_includes_load:
        kernel.prior_start = Span.exact(kernel.start_seconds)
    else:
        kernel.prior_start = prior.start(kernel.group.first.model)


def kernel_span(kernel: KernelPlan) -> tuple[Span | None, int]:
    """The kernel's start and priced cells, and how many cells nothing priced."""
    priced = [span for span in kernel.prior_cells if span is not None]
    if not priced and kernel.prior_start is None:
        return None, len(kernel.prior_cells)
    total = kernel.prior_start or ZERO
    for span in priced:
        total = total + span
    return total, len(kernel.prior_cells) - len(priced)


def plan_span(plan: Plan) -> tuple[Span | None, int]:
    """The sum over kernels (one worker's time), and the cells nothing priced."""
    total, unknown = None, 0
    for kernel in plan.kernels:
        span, missing = kernel_span(kernel)
        unknown += missing
        if span is not None:
            total = span if total is None else total + span
    return total, unknown


def minutes(span: Span) -> str:
    def one(seconds: float) -> str:
        return f"{seconds / 60:.1f}" if seconds < 600 else f"{seconds / 60:.0f}"
    return f"~{one(span.point)} min ({one(span.low)}-{one(span.high)} min)"


def kernel_line(kernel: KernelPlan, device: str) -> str:
    span, unknown = kernel_span(kernel)
    recorded = sum(seconds is not None for seconds in kernel.cell_seconds)
    text = f"a-priori for {device}: " + (minutes(span) if span else "no figures for this model")
    if recorded:
        text += f"; {recorded} cell{'' if recorded == 1 else 's'} from records on {device}"
    if unknown and span:
        text += f"; {unknown} cell{'' if unknown == 1 else 's'} without figures: not included"
    return text


def total_lines(plan: Plan) -> list[str]:
    prior = plan.prior
    span, unknown = plan_span(plan)
    if span is None:
        return [f"a-priori estimate for {prior.device}: no figures for these models"]
    recorded = sum(seconds is not None for kernel in plan.kernels for seconds in kernel.cell_seconds)
    basis = (f"calibrated on {prior.calibrated_on} cell{'' if prior.calibrated_on == 1 else 's'} recorded there"
             if prior.calibrated_on else "uncalibrated: no cell recorded on it yet")
    lines = [f"a-priori estimate for {prior.device} (a model, not a measurement): {minutes(span)} "
             f"for {plan.cells_to_run - unknown} of {plan.cells_to_run} cells, {len(plan.kernels)} kernel starts "
             f"included",
             f"  {recorded} cell{'' if recorded == 1 else 's'} from records on {prior.device}; the prior "
             f"{basis} (bench_utils/study/runner/prior_estimate.py says how it is derived)"]
    if unknown:
        lines.append(f"  {unknown} cell{'' if unknown == 1 else 's'} without figures (a model outside "
                     "bench_utils/study/runner/data/model_costs.json, or a dtype the GPU lacks): not included")
    return lines
