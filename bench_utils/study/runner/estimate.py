"""What a run would do, and how long it would take: ``python -m bench_utils run GRID --dry-run``.

The plan lists the kernels the runner would start, the cells each measures in execution order, and the
cells an earlier out-of-memory error rules out. Its estimate comes from earlier records of this
environment (the same torch version and processor, as ``record_key.environment_key`` says) that carry a
``phases`` block, the seconds spent inside the kernel (``startup_s``, ``load_s``, ``cell_s``, ``timed_s``...).
A cell costs what its most recent record's ``cell_s`` was, the timed and warm-up part scaled to the
cell's runs and warm-up; a kernel adds its start (kernel boot and model build). What no record covers is
counted and left out of the total, never guessed. With ``--device-model`` the records are that GPU's,
and the rest is priced a priori, with a range (``prior_plan``). No torch and no pandas are imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from pathlib import Path
import statistics
from typing import TYPE_CHECKING, Any, Iterable

from ...record_blocks import block
from ...record_key import cell_identity, environment_key
from ...results import read_records
from ...vocabulary import Status

if TYPE_CHECKING:  # the grid and its groups import the compile variants, and so torch
    from ..grid.grid_file import Cell
    from ..grid.kernel_groups import KernelGroup
    from .prior_estimate import Prior, Span
    from .grid_runner import Runner

# The parts of cell_s that grow with the number of calls timed (warm-up and runs).
REPEATED_PHASES = ("timed_s", "warmup_s")


# --- records ---------------------------------------------------------------------

def _kind(device: str) -> str:
    return str(device).split(":")[0]


def _phase(record: dict[str, Any], name: str) -> float:
    """Seconds of one phase; 0 where the record has no such key."""
    return float(block(record, "phases").get(name) or 0.0)


def records_of_environment(paths: Iterable[str | os.PathLike],
                           environment: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of ``paths`` (missing files ignored), in file order, that were taken on
    ``environment`` (``environment_key`` for the record's device kind) and carry ``phases``."""
    # a line skipped here is said as any reader's is (once a command, by ``results.skipped_lines_said``)
    records = read_records([Path(path) for path in paths if Path(path).is_file()])
    return [record for record in records
            if isinstance(record.get("phases"), dict)
            and environment_key(block(record, "environment"), _kind(record["cell"]["device"]))
            == environment_key(environment, _kind(record["cell"]["device"]))]


def _same_cell(cell: Cell, record: dict[str, Any]) -> bool:
    """The same cell, whatever the study."""
    return cell_identity(record).without_study() == cell.identity().without_study()


def _calls(record: dict[str, Any]) -> int | None:
    """Warm-up and timed calls of a record, from its config; None when not recorded."""
    config = block(record, "config")
    runs, warmup = config.get("runs"), config.get("warmup") or 0
    return runs + warmup if isinstance(runs, int) and runs + warmup > 0 else None


def estimate_cell_seconds(cell: Cell, records: list[dict[str, Any]],
                          shares_pairs: bool = False) -> float | None:
    """Seconds ``cell`` would take inside its kernel, from the most recent ``ok`` record of the
    same cell (task, model, batch size, mode, dtype, device kind): its ``cell_s``, with the timed
    and warm-up part scaled by the cell's calls over the record's. An eager cell that will take a
    compiled cell's pairs (``shares_pairs``) costs no timed runs; one that will be timed by itself
    is not estimated from a record that was not. None when no record has it: an error's time to
    failure, or a cell not run, says nothing of a measurement's cost."""
    for record in reversed(records):  # the last in file order is the most recent
        if (not _same_cell(cell, record) or record.get("status") != Status.OK
                or "cell_s" not in record["phases"]):
            continue
        if "shared_measurement" in record and not shares_pairs:
            continue  # its eager runs were timed in another cell
        repeated = sum(_phase(record, name) for name in REPEATED_PHASES)
        calls = _calls(record)
        if repeated and calls is None and not shares_pairs:
            continue  # a timed part that cannot be scaled: not this cell's cost
        scale = 0.0 if shares_pairs else (cell.settings.runs + cell.settings.warmup) / calls if repeated else 1.0
        return _phase(record, "cell_s") - repeated + repeated * scale
    return None


def _start_and_load(first: Cell, records: list[dict[str, Any]]) -> list[float]:
    """``startup_s + load_s`` of the records that started a kernel or built ``first``'s model."""
    seconds = [_phase(record, "startup_s") + _phase(record, "load_s") for record in records
               if record["cell"]["model"] == first.model
               and _kind(record["cell"]["device"]) == _kind(first.device)]
    return [value for value in seconds if value > 0]


def estimate_kernel_start_seconds(group_first_cell: Cell,
                                  records: list[dict[str, Any]]) -> float | None:
    """Seconds from a kernel's start to its first cell: the median start and model build of
    earlier kernels of the same model and device kind; else the median start of any kernel (the
    model build then unknown); None when no record started a kernel."""
    known = (_start_and_load(group_first_cell, records)
             or [value for value in (_phase(record, "startup_s") for record in records) if value > 0])
    return statistics.median(known) if known else None


# --- the plan ---------------------------------------------------------------------

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


def results_files(own: Path, reports_dir: Path) -> list[Path]:
    """Every study's results file under ``reports_dir``, then the study's own last, each once:
    where several records describe a cell, the study's own most recent one is used."""
    own = Path(own).resolve()
    others = sorted(path.resolve() for path in Path(reports_dir).glob("*/results.jsonl"))
    return [path for path in others if path != own] + [own]


def plan_run(runner: Runner, reports_dir: str | os.PathLike | None = None, device_model: str | None = None) -> Plan:
    """The plan of ``runner``'s grid: its pending cells by kernel, estimated from earlier records
    of this environment in the study's results file and every ``reports/*/results.jsonl``; with
    ``device_model``, from the records of that GPU, and the rest a priori (``prior_plan``)."""
    from ...paths import REPORTS_DIR
    from ..grid.kernel_groups import kernel_groups
    from .prior_plan import device_prior, price_kernel

    pending, resumed = runner.pending()
    skipped = []
    for cell in pending:  # as the runner does: larger batches than an earlier OOM are not run
        if (oom_at := runner.earlier_oom(cell)) is not None:
            skipped.append((cell, oom_at))
    files = results_files(runner.results_path, Path(reports_dir or REPORTS_DIR))
    prior, records = device_prior(device_model, files) if device_model else (None, None)
    records = records if prior else records_of_environment(files, runner.environment)
    kernels = []
    for group in kernel_groups(pending):  # grouped before the skipped leave: the runner's group ids
        group = group.without(cell for cell, _ in skipped)
        if not group.cells:
            continue  # every cell ruled out: no kernel starts
        start = estimate_kernel_start_seconds(group.first, records)
        sharing = group.eager_sharing_pairs()
        kernels.append(KernelPlan(group, [estimate_cell_seconds(cell, records, cell in sharing)
                                          for cell in group.cells],
                                  start, bool(_start_and_load(group.first, records))))
        if prior:
            price_kernel(kernels[-1], prior)
    grid = runner.grid
    return Plan(study=grid.study, grid_path=str(grid.path), results_path=runner.results_path,
                cells_in_grid=len(grid.cells), already_measured=resumed, skipped_after_oom=skipped,
                kernels=kernels, records_used=len(records),
                devices=list(runner.devices or grid.devices), prior=prior)


# --- the listing ------------------------------------------------------------------

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
    from . import prior_plan

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
        estimate = prior_plan.kernel_line(kernel, plan.prior.device) if plan.prior else _kernel_estimate(kernel)
        lines += ["", f"kernel {group.group_id} ({group.device}): {order}", f"  estimate: {estimate}"]
    if plan.skipped_after_oom:
        lines += ["", "recorded as oom without running (a smaller batch ran out of memory earlier):"]
        lines += [f"  {cell.model} {cell.dtype} {cell.device}: {cell.compile_mode} {cell.batch_size} "
                  f"(out of memory at batch {oom_at})" for cell, oom_at in plan.skipped_after_oom]
    lines += ["", *(prior_plan.total_lines(plan) if plan.prior else [_total(plan)])]
    kinds = [device.split(":")[0] for device in plan.devices]
    if any(kinds.count(kind) > 1 for kind in kinds):  # kernels then run side by side
        lines.append(f"  one worker per device ({', '.join(plan.devices)}): the run may take less "
                     "than this sum")
    return "\n".join(lines)
