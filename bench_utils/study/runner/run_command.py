"""``python -m bench_utils run GRID`` on this machine: the local executor's command (Ray's is ``cluster.command``)."""

from __future__ import annotations

import os
import shutil
import sys
import time

from ...environment.capture import capture_environment
from ...variants.kept_caches import ROOT_ENV, default_root
from ..grid.grid_file import Grid
from ..pricing.plan import duration_text, format_plan, minutes as span_text
from ..pricing.prices import device_environment
from ..pricing.prior import Span, device_key
from .device_workers import check_workers
from .progress_display import format_run_outcome
from .grid_runner import Runner, study_folder
from .time_limit import LIMIT_REACHED_EXIT, LIMIT_TOO_SHORT_EXIT, parse_duration, time_limit_for


def run_locally(grid: Grid, params: os.PathLike | str, *, out=None, force: bool = False,
                devices: list[str] | None = None, timeout: int | None = None, dry_run: bool = False,
                device_model: str | None = None, time_limit: str | None = None,
                started: float | None = None, grid_copy: str | None = None) -> int:
    """Run (or with ``dry_run`` plan) ``grid`` here and print its summary; the exit status. A time limit
    counts from ``started`` (``time.monotonic()`` at the command's start). ``grid_copy``: the name the grid is
    kept under in the study folder (``grid.yaml``; ``diagnose``'s ``diagnosis.yaml``). Bad input: UserError."""
    seconds = parse_duration(time_limit) if time_limit else None  # bad input fails before anything starts
    if device_model:
        device_key(device_model)
    folder, environment = study_folder(grid, out), capture_environment()
    results_path = folder / "results.jsonl"
    if dry_run:  # nothing measured, no kernel, no lease, no file written
        # what the run would refuse, the plan refuses (a plan priced for another GPU looks for none here)
        check_workers(grid, devices, environment, this_machine=not device_model)
        if device_model:  # resumed as on that GPU: the cells its records hold are not planned again
            environment = device_environment(results_path, device_model) or environment
        runner = Runner(grid, folder, force=force, devices=devices, environment=environment)
        print(format_plan(runner.plan(device_model=device_model)))
        return 0
    limit = (time_limit_for(grid, results_path, environment, seconds, device_model, sys.stderr,
                            started or time.monotonic()) if seconds is not None else None)
    runner = Runner(grid, folder, force=force, devices=devices, timeout=timeout, grid_file=params, grid_copy=grid_copy,
                    environment=environment, time_limit=limit)
    banner = (f"[run] study {grid.study}: {len(grid.cells)} cells from {params}; results in {runner.results_path}; "
              f"a cell that records nothing for {runner.timeout / 60:.0f} min is stopped "
              f"({'--timeout' if timeout else 'default from the runs per cell; --timeout to change'})")
    # the banner once the study folder is this run's: a runner refused it (LeaseHeldError) says only why
    outcome = runner.run(announce=lambda: print(banner, file=sys.stderr))
    if not outcome.worker_errors and not runner.pending().cells and not os.environ.get(ROOT_ENV):
        shutil.rmtree(default_root(folder), ignore_errors=True)  # no replicate left to serve; a carried root travels
    print(format_run_outcome(outcome, runner.results_path))
    if runner.time_limit is None:
        return outcome.exit_status()
    left, status = what_is_left(runner, device_model, outcome)
    if left:
        print(left)
    return status


def what_is_left(runner: Runner, device_model: str | None, outcome, reports_dir=None) -> tuple[str, int]:
    """After a run under a time limit: the cells left by kernel with their estimate, and the exit status
    (``LIMIT_REACHED_EXIT`` where the limit left cells and no cell or worker failed)."""
    limit, status = runner.time_limit, outcome.exit_status()
    if limit is None or outcome.signal is not None or not (limit.reached or limit.held_back) or not outcome.not_run:
        return "", status
    plan = runner.plan(reports_dir, device_model=device_model)
    lines, total, unknown = [], Span.exact(0.0), 0
    for kernel in plan.kernels:
        span, missing = kernel.span()
        total, unknown = total + (span or Span.exact(0.0)), unknown + missing
        order = ", ".join(f"{cell.compile_mode} {cell.batch_size}" for cell in kernel.group.cells)
        lines.append(f"  kernel {kernel.group.group_id}: {order}: " + (span_text(span) if span else "no estimate"))
    why = "the limit was reached" if limit.reached else "no other cell would finish before the limit"
    if not limit.started_any and limit.needs:  # running again would start nothing either
        why = f"no kernel fits: give --time-limit {duration_text(limit.needs)} at least"
        status = status or LIMIT_TOO_SHORT_EXIT
    priced = "no estimate (no record prices them)" if not total.point else (
        f"estimated {span_text(total)}" + (f", {unknown} cell(s) or kernel start(s) without an estimate not "
                                           "included" if unknown else ""))
    head = (f"time limit {duration_text(limit.seconds)}: {why}; left for a later run: {plan.cells_to_run} cell(s) in "
            f"{len(plan.kernels)} kernel(s), {priced}{' on ' + plan.gpu if plan.gpu else ''}"
            + ("" if status == LIMIT_TOO_SHORT_EXIT else "; run the same command again to go on"))
    return "\n".join([head, *lines]), LIMIT_REACHED_EXIT if status == 0 else status
