"""The dry run's plan as a terminal listing: per kernel its cells and estimate, then the total (``plan``)."""

from __future__ import annotations

from .plan import KernelPlan, Plan
from .prior import Span


def _seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _minutes(seconds: float) -> str:
    minutes = seconds / 60
    return f"~{minutes:.1f} min" if minutes < 10 else f"~{minutes:.0f} min"


def _cells(count: int) -> str:
    return f"{count} cell{'' if count == 1 else 's'}"


def _kernel_estimate(kernel: KernelPlan) -> str:
    if kernel.start_seconds is None and kernel.unknown_cells == len(kernel.cell_seconds):
        return "no estimate"
    parts = ["start unknown" if kernel.start_seconds is None else
             f"start {_seconds(kernel.start_seconds)}"
             + ("" if kernel.start_includes_load else ", model build unknown")]
    known = len(kernel.cell_seconds) - kernel.unknown_cells
    if known:
        cells = sum(s for s in kernel.cell_seconds if s is not None)
        parts.append(f"{_cells(known)} {_seconds(cells)}")
    if kernel.unknown_cells:
        parts.append(f"{_cells(kernel.unknown_cells)} without an earlier record")
    return f"~{_seconds(kernel.known_seconds)} ({'; '.join(parts)})"


def _total(plan: Plan) -> str:
    if not plan.kernels:
        return "estimated duration: nothing to run"
    if not plan.records_used:
        return "no earlier records of this environment: no estimate"
    known_cells = plan.cells_to_run - plan.unknown_cells
    if not known_cells and plan.unknown_starts == len(plan.kernels):
        return "no earlier records of these cells on this environment: no estimate"
    line = f"estimated duration: {_minutes(plan.estimated_seconds)} for {known_cells} of {plan.cells_to_run} cells"
    if plan.unknown_cells or plan.unknown_starts:
        line += (f" ({_cells(plan.unknown_cells)} and {plan.unknown_starts} kernel start"
                 f"{'' if plan.unknown_starts == 1 else 's'} without an earlier record: not included)")
    if plan.starts_without_load:
        line += (f"; the model build of {plan.starts_without_load} kernel"
                 f"{'' if plan.starts_without_load == 1 else 's'} is unknown: not included")
    return line


def format_plan(plan: Plan) -> str:
    """The plan as a terminal listing: header, one block per kernel, skipped cells, the total."""
    lines = [f"study {plan.study} ({plan.grid_path}): {_cells(plan.cells_in_grid)} in the grid; "
             f"results in {plan.results_path}",
             f"  already measured on this environment (skipped): {plan.already_measured}",
             f"  skipped after an earlier out-of-memory error: {len(plan.skipped_after_oom)}",
             f"  to run: {_cells(plan.cells_to_run)} in {len(plan.kernels)} kernel"
             f"{'' if len(plan.kernels) == 1 else 's'}",
             f"  estimates from {plan.records_used} earlier record"
             f"{'' if plan.records_used == 1 else 's'} " + (f"on {plan.prior.device}" if plan.prior else
                                                          "of this environment")]
    for kernel in plan.kernels:
        group = kernel.group
        order = ", ".join(f"{cell.compile_mode} {cell.batch_size}" for cell in group.cells)
        estimate = kernel_line(kernel, plan.prior.device) if plan.prior else _kernel_estimate(kernel)
        lines += ["", f"kernel {group.group_id} ({group.device}): {order}", f"  estimate: {estimate}"]
    if plan.skipped_after_oom:
        lines += ["", "recorded as oom without running (a smaller batch ran out of memory earlier):"]
        lines += [f"  {cell.model} {cell.dtype} {cell.device}: {cell.compile_mode} {cell.batch_size} "
                  f"(out of memory at batch {oom_at})" for cell, oom_at in plan.skipped_after_oom]
    lines += ["", *(total_lines(plan) if plan.prior else [_total(plan)])]
    kinds = [device.split(":")[0] for device in plan.devices]
    if any(kinds.count(kind) > 1 for kind in kinds):  # kernels then run side by side
        lines.append(f"  one worker per device ({', '.join(plan.devices)}): the run may take less "
                     "than this sum")
    return "\n".join(lines)


def minutes(span: Span) -> str:
    def one(seconds: float) -> str:
        return f"{seconds / 60:.1f}" if seconds < 600 else f"{seconds / 60:.0f}"
    return f"~{one(span.point)} min ({one(span.low)}-{one(span.high)} min)"


def kernel_line(kernel: KernelPlan, device: str) -> str:
    span, unknown = kernel.span()
    recorded = sum(seconds is not None for seconds in kernel.cell_seconds)
    text = f"a-priori for {device}: " + (minutes(span) if span else "no figures for this model")
    if recorded:
        text += f"; {recorded} cell{'' if recorded == 1 else 's'} from records on {device}"
    if unknown and span:
        text += f"; {unknown} cell{'' if unknown == 1 else 's'} without figures: not included"
    return text


def total_lines(plan: Plan) -> list[str]:
    """The a-priori total of a plan priced for a GPU (``--device-model``); none for a plan of records only."""
    prior = plan.prior
    if prior is None:
        return []
    span, unknown = plan.span()
    if span is None:
        return [f"a-priori estimate for {prior.device}: no figures for these models"]
    recorded = sum(seconds is not None for kernel in plan.kernels for seconds in kernel.cell_seconds)
    basis = (f"calibrated on {prior.calibrated_on} cell{'' if prior.calibrated_on == 1 else 's'} recorded there"
             if prior.calibrated_on else "uncalibrated: no cell recorded on it yet")
    lines = [f"a-priori estimate for {prior.device} (a model, not a measurement): {minutes(span)} "
             f"for {plan.cells_to_run - unknown} of {plan.cells_to_run} cells, {len(plan.kernels)} kernel starts "
             f"included",
             f"  {recorded} cell{'' if recorded == 1 else 's'} from records on {prior.device}; the prior "
             f"{basis} (bench_utils/study/pricing/prior.py says how it is derived)"]
    if unknown:
        lines.append(f"  {unknown} cell{'' if unknown == 1 else 's'} without figures (a model outside "
                     "bench_utils/study/pricing/data/model_costs.json, or a dtype the GPU lacks): not included")
    return lines
