"""``make bench RESULTS=FILE``: the guide's grid (``params/hf-guide.yaml``, 80 cells) projected on the GPU a results
file was measured on: the kernel starts and per-cell overhead measured in this run, plus each cell's work as the
file recorded it (target: ``GUIDE_TARGET_MIN``). Labelled as a projection; cells the file has no figure for are
left out and counted, and the total is then a lower bound. Plain functions (``study_cost`` calls them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
import statistics
import sys
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from bench_utils.records.schema import Record

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cell_breakdown import OTHER_PARTS, START_PARTS, phases_of, target_verdict  # noqa: E402  (this folder's sibling)

GUIDE_TARGET_MIN = 25.0          # the guide's grid on one H100
EAGER = "eager"

@dataclass
class CellWork:
    """What one cell of the guide's grid is projected to spend in its kernel (seconds)."""

    compile_s: float
    timed_s: float               # timed runs and warm-up, scaled to the guide's runs
    rest_s: float                # parity, memory, FLOPs, energy, profile
    source: str                  # "phases" or "latencies"

    @property
    def total_s(self) -> float:
        return self.compile_s + self.timed_s + self.rest_s


def work_key(task: str, model: str, batch_size: int, compile_mode: str, dtype: str) -> tuple:
    """What makes a result stand for a guide cell: not the study, nor the device it ran on."""
    return (task, model, batch_size, compile_mode, dtype)


def results_by_work_key(records: Iterable[Record]) -> dict[tuple, Record]:
    """The last ok record of each cell, else its last record of any status."""
    last_any: dict[tuple, Record] = {}
    last_ok: dict[tuple, Record] = {}
    for record in records:
        cell = record.cell
        key = work_key(cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.dtype)
        last_any[key] = record
        if record.ok:
            last_ok[key] = record
    return {**last_any, **last_ok}


def eager_cells_sharing_pairs(cells: Iterable) -> set:
    """Eager cells whose latency comes from a compiled cell of their kernel at the same batch
    size (the eager side of its interleaved pairs): they time nothing of their own."""
    from bench_utils.study.grid.kernel_groups import kernel_groups

    return {cell for group in kernel_groups(cells) for cell in group.eager_sharing_pairs()}


def work_from_phases(cell, record: Record, shares_pairs: bool) -> CellWork | None:
    """The record's own phases, its timed parts scaled from its runs to the cell's."""
    phases = phases_of(record)
    recorded_calls = (record.config.runs or 0) + (record.config.warmup or 0)
    if not phases or recorded_calls <= 0:
        return None
    timed = phases.get("timed_s", 0.0) + phases.get("warmup_s", 0.0)
    scaled = 0.0 if shares_pairs else timed * (cell.settings.runs + cell.settings.warmup) / recorded_calls
    parts = sum(phases.get(key, 0.0) for key in ("parity_s", "memory_s", *OTHER_PARTS, "profile_s"))
    # the whole cell as measured there (inputs, resets, teardown too), not only its named parts
    rest = max(parts, phases.get("cell_s", 0.0) - timed - phases.get("compile_s", 0.0))
    return CellWork(compile_s=phases.get("compile_s", 0.0), timed_s=scaled, rest_s=rest,
                    source="phases")


def work_from_latencies(cell, record: Record, shares_pairs: bool) -> CellWork | None:
    """Older records: compile cost and mean latencies times the cell's calls (runs + warm-up)."""
    if not record.ok or record.latency is None:
        return None
    latency = record.latency.mean
    calls = cell.settings.runs + cell.settings.warmup
    if cell.compile_mode == EAGER:
        return CellWork(compile_s=0.0, timed_s=0.0 if shares_pairs else calls * latency,
                        rest_s=0.0, source="latencies")
    compiled = record.compile
    eager_ms = record.speedup.eager_mean_ms if record.speedup else None
    if compiled is None or compiled.cold_ms is None or eager_ms is None:
        return None
    compile_ms = compiled.cold_ms + (compiled.warm_ms or 0.0)
    # interleaved pairs: every call is made on both sides
    return CellWork(compile_s=compile_ms / 1000.0, timed_s=calls * (eager_ms / 1000.0 + latency),
                    rest_s=0.0, source="latencies")


def cell_work(cell, record: Record | None, shares_pairs: bool) -> CellWork | None:
    """Phases where the record has them, else compile cost and latencies; None: no figure."""
    if record is None:
        return None
    return work_from_phases(cell, record, shares_pairs) or work_from_latencies(cell, record, shares_pairs)


def environment_label(record: Record) -> str:
    """The processor and torch version a record was measured with."""
    environment = record.environment
    gpus = [gpu.name for gpu in environment.gpus or [] if gpu.name]
    if record.cell.device_kind == "cuda" and gpus:
        where = ", ".join(dict.fromkeys(gpus))
    else:
        where = f"CPU {environment.cpu_model or 'unknown'}"
    return f"{where}, torch {environment.torch_version or 'unknown'}"


@dataclass
class Projection:
    cells: int
    kernels: int
    kernel_start_s: float | None     # per kernel, measured in this run
    overhead_per_cell_s: float       # measured in this run, kernel start excluded
    work: dict = field(default_factory=dict)   # cell -> CellWork, cells with a figure only
    no_figure: int = 0
    environments: list[str] = field(default_factory=list)
    # per kernel group: start + model build from the results file's own records, where they have it
    starts_from_results: dict = field(default_factory=dict)

    @property
    def kernel_starts_total_s(self) -> float:
        from_run = (self.kernels - len(self.starts_from_results)) * (self.kernel_start_s or 0.0)
        return sum(self.starts_from_results.values()) + from_run

    @property
    def overhead_total_s(self) -> float:
        return self.cells * self.overhead_per_cell_s

    @property
    def work_total_s(self) -> float:
        return sum(work.total_s for work in self.work.values())

    @property
    def total_s(self) -> float:
        return self.kernel_starts_total_s + self.overhead_total_s + self.work_total_s

    @property
    def lower_bound(self) -> bool:
        missing_starts = self.kernel_start_s is None and len(self.starts_from_results) < self.kernels
        return self.no_figure > 0 or missing_starts


def project(cells: list, results: Iterable[Record], kernel_start_s: float | None,
            overhead_per_cell_s: float) -> Projection:
    """The guide grid's wall time: kernels x start + cells x overhead + each cell's work."""
    from bench_utils.study.grid.kernel_groups import kernel_groups

    results = list(results)
    by_key = results_by_work_key(results)
    sharing = eager_cells_sharing_pairs(cells)
    groups = kernel_groups(cells)
    projection = Projection(cells=len(cells), kernels=len(groups),
                            kernel_start_s=kernel_start_s, overhead_per_cell_s=overhead_per_cell_s)
    for group in groups:  # the GPU machine's own start and model build, where it recorded them
        starts = [sum(phases_of(r).get(part, 0.0) for part in START_PARTS) for r in results
                  if r.cell.model == group.first.model and phases_of(r).get("load_s", 0.0) > 0]
        if starts:
            projection.starts_from_results[group.group_id] = statistics.median(starts)
    for cell in cells:
        record = by_key.get(work_key(cell.task, cell.model, cell.batch_size, cell.compile_mode,
                                     cell.dtype))
        work = cell_work(cell, record, cell in sharing)
        if work is None:
            projection.no_figure += 1
            continue
        projection.work[cell] = work
        label = environment_label(record)
        if label not in projection.environments:
            projection.environments.append(label)
    return projection


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def format_projection(projection: Projection, grid_name: str, results_name: str) -> str:
    p = projection
    compile_s = sum(w.compile_s for w in p.work.values())
    timed_s = sum(w.timed_s for w in p.work.values())
    rest_s = sum(w.rest_s for w in p.work.values())
    sources = sorted({w.source for w in p.work.values()})
    own = len(p.starts_from_results)
    start = (f"{p.kernels} kernels: {own} from the results file's own start and model build, "
             f"{p.kernels - own} x {p.kernel_start_s:.1f} s measured in this run = "
             f"{minutes(p.kernel_starts_total_s)}" if p.kernel_start_s is not None or own == p.kernels else
             f"{p.kernels - own} of {p.kernels} kernels not included (no start recorded)")
    lines = [
        f"PROJECTION (not a measurement) of {grid_name} ({p.cells} cells) from this run and {results_name}:",
        f"  results measured on: {'; '.join(p.environments) or 'no matching record'}",
        f"  kernel starts:   {start}",
        f"  runner overhead: {p.cells} cells x {p.overhead_per_cell_s:.1f} s (per cell, kernel start "
        f"excluded, measured in this run) = {minutes(p.overhead_total_s)}",
        f"  cell work:       {len(p.work)} cells from the results file ({', '.join(sources) or 'none'}): "
        f"compile {minutes(compile_s)}, timed + warm-up {minutes(timed_s)} (scaled to the grid's runs), "
        f"parity/memory/FLOPs/energy {minutes(rest_s)}",
        f"  projected total: {'at least ' if p.lower_bound else ''}{minutes(p.total_s)}  "
        + target_verdict(p.total_s / 60, GUIDE_TARGET_MIN, "min", p.lower_bound),
    ]
    if p.no_figure:
        lines.append(f"  {p.no_figure} cell(s) have no figure in {results_name} and are not included: "
                     "the projection is a lower bound")
    elif p.kernel_start_s is None:
        lines.append("  kernel starts are not included: the projection is a lower bound")
    return "\n".join(lines)


NO_PROJECTION = ("projection for params/hf-guide.yaml on a GPU: pass --results FILE (a results.jsonl "
                 "measured on that GPU, e.g. reports/hf-guide/results.jsonl) or "
                 "`make bench RESULTS=FILE`")
