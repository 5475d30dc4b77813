"""What a study costs beyond its measurements: ``make bench``.

``python benchmarks/study_cost.py [GRID] [--out DIR] [--results FILE] [--keep]``

Runs GRID (default: ``benchmarks/grids/resnet18-eager.yaml``) with the study runner,
measuring everything again (``force``), then splits each cell's wall time, as the
runner saw it, into what the kernel reports in the record's ``phases`` block:
timed runs, warm-up, compile, parity, memory, other measured figures (FLOPs and
energy), and the remainder, the overhead: kernel start, model build, notebook and
runner machinery. The figure to drive down is that overhead amortized over the
grid's cells (target: at most 3 s per cell on a 2-core machine, default grid).

With ``--results FILE`` (a ``results.jsonl`` measured on a GPU) it also projects the
wall time of the guide's grid (``params/hf-guide.yaml``, 80 cells) on that GPU: the
kernel starts and per-cell overhead measured in this run, plus each cell's work
as the results file recorded it (target: at most 25 minutes on one H100). The
projection is labelled as such; cells the file has no figure for are left out and
counted, and the total is then a lower bound.

The computations are plain functions of outcomes and records (tested without
running anything); ``main()`` runs the grid and prints.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Iterable

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GRID = PROJECT_ROOT / "benchmarks" / "grids" / "resnet18-eager.yaml"
GUIDE_GRID = PROJECT_ROOT / "params" / "hf-guide.yaml"
OVERHEAD_TARGET_S = 3.0          # per cell, amortized over the default grid, on 2 CPU cores
GUIDE_TARGET_MIN = 25.0          # the guide's grid on one H100
PROFILE_TARGET = 0.10            # a compiled cell's profile: at most this share of its wall time
EAGER = "eager"

# Parts of a cell's wall time the kernel measures (``phases`` keys, seconds).
MEASURED_PARTS = ("timed_s", "warmup_s", "compile_s", "parity_s", "memory_s")
OTHER_PARTS = ("flops_s", "energy_s")
# Kernel start and model build: in the first cell(s) of a kernel, part of the overhead.
START_PARTS = ("startup_s", "load_s")


# --- the breakdown of this run ------------------------------------------------------

def phases_of(record: dict[str, Any] | None) -> dict[str, float]:
    """A record's phases in seconds; missing keys (and records without phases) read as 0."""
    phases = (record or {}).get("phases") or {}
    return {key: float(value) for key, value in phases.items() if isinstance(value, (int, float))}


@dataclass
class CellCost:
    """One cell of this run: its wall time and what the kernel says it spent."""

    cell_id: str
    status: str
    wall_s: float
    timed_s: float = 0.0
    warmup_s: float = 0.0
    compile_s: float = 0.0
    parity_s: float = 0.0
    memory_s: float = 0.0
    other_s: float = 0.0         # FLOPs and energy
    profile_s: float = 0.0       # a compiled cell's profile (why it got faster)
    start_s: float = 0.0         # kernel start and model build: inside the overhead

    @property
    def measured_s(self) -> float:
        return (self.timed_s + self.warmup_s + self.compile_s + self.parity_s + self.memory_s
                + self.other_s + self.profile_s)

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.measured_s


def records_by_cell(records: Iterable[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """The last record of each cell identity (a results file is in time order)."""
    from bench_utils.records.key import cell_identity

    return {cell_identity(record): record for record in records}


def cell_cost(outcome, record: dict[str, Any] | None) -> CellCost:
    phases = phases_of(record)
    return CellCost(
        cell_id=outcome.cell.cell_id, status=outcome.status, wall_s=float(outcome.seconds),
        timed_s=phases.get("timed_s", 0.0), warmup_s=phases.get("warmup_s", 0.0),
        compile_s=phases.get("compile_s", 0.0), parity_s=phases.get("parity_s", 0.0),
        memory_s=phases.get("memory_s", 0.0),
        other_s=sum(phases.get(key, 0.0) for key in OTHER_PARTS), profile_s=phases.get("profile_s", 0.0),
        start_s=sum(phases.get(key, 0.0) for key in START_PARTS))


def breakdown(outcomes: Iterable, records: Iterable[dict[str, Any]]) -> list[CellCost]:
    """One row per outcome, its record found by cell identity (none: nothing measured)."""
    by_cell = records_by_cell(records)
    return [cell_cost(outcome, by_cell.get(outcome.cell.identity())) for outcome in outcomes]


def run_records(outcomes: Iterable, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of this run's cells (a reused --out folder may hold older ones)."""
    by_cell = records_by_cell(records)
    return [by_cell[o.cell.identity()] for o in outcomes if o.cell.identity() in by_cell]


def kernels_started(records: Iterable[dict[str, Any]]) -> int:
    """Kernels that started: only the first record of a kernel carries ``startup_s``."""
    return sum(1 for record in records if phases_of(record).get("startup_s", 0.0) > 0)


@dataclass
class Totals:
    cells: int
    wall_s: float
    measured_s: float
    overhead_s: float
    start_s: float

    @property
    def overhead_per_cell_s(self) -> float:
        return self.overhead_s / self.cells if self.cells else 0.0

    @property
    def overhead_per_cell_without_start_s(self) -> float:
        """The runner's and notebook's share alone: what each further cell adds."""
        return (self.overhead_s - self.start_s) / self.cells if self.cells else 0.0


def totals(rows: list[CellCost], grid_wall_s: float | None = None) -> Totals:
    """Sums over the cells; with ``grid_wall_s`` (the wall time around the whole run) the overhead
    is that minus the measured work, so that what falls between cells (a kernel's teardown after
    its last record, the runner's set-up, waits for the device) counts too."""
    cells_wall = sum(r.wall_s for r in rows)
    wall = max(cells_wall, grid_wall_s) if grid_wall_s is not None else cells_wall
    measured = sum(r.measured_s for r in rows)
    return Totals(cells=len(rows), wall_s=wall, measured_s=measured, overhead_s=wall - measured,
                  start_s=sum(r.start_s for r in rows))


def mean_kernel_start_s(rows: list[CellCost], kernels: int) -> float | None:
    """Kernel start plus model build, per kernel, as measured; None when no kernel reported it."""
    return sum(r.start_s for r in rows) / kernels if kernels else None


def target_verdict(value: float, target: float, unit: str, lower_bound: bool = False) -> str:
    """``[target <= 3 s: met]`` or ``[target <= 3 s: missed by 1.2 s]``; of a lower bound below
    the target nothing can be said."""
    if lower_bound and value <= target:
        return f"[target <= {target:g} {unit}: unknown, this is a lower bound]"
    if value <= target:
        return f"[target <= {target:g} {unit}: met]"
    return f"[target <= {target:g} {unit}: missed by {value - target:.1f} {unit}]"


def overhead_line(summary: Totals, target: float = OVERHEAD_TARGET_S) -> str:
    per_cell = summary.overhead_per_cell_s
    return (f"overhead per cell (amortized over {summary.cells} cells): {per_cell:.1f} s  "
            + target_verdict(per_cell, target, "s"))


def breakdown_table(rows: list[CellCost]) -> str:
    """Per-cell rows, then a total row (seconds)."""
    import pandas as pd

    def as_dict(row: CellCost) -> dict[str, Any]:
        return {"cell": row.cell_id, "status": row.status, "wall": row.wall_s, "timed": row.timed_s,
                "warm-up": row.warmup_s, "compile": row.compile_s, "parity": row.parity_s,
                "memory": row.memory_s, "other": row.other_s, "profile": row.profile_s, "overhead": row.overhead_s,
                "(start)": row.start_s}

    frame = pd.DataFrame([as_dict(row) for row in rows])
    numbers = frame.columns[2:]
    total = {"cell": f"total ({len(rows)} cells)", "status": "",
             **{column: frame[column].sum() for column in numbers}}
    frame = pd.concat([frame, pd.DataFrame([total])], ignore_index=True)
    return frame.to_string(index=False, float_format=lambda value: f"{value:.2f}")


TABLE_LEGEND = ("seconds; other = FLOPs + energy; profile = why it got faster (compiled cells); overhead = wall - "
                "(timed + warm-up + compile + parity + memory + other + profile); (start) = kernel start + model "
                "build, part of overhead")


def profile_line(rows: list[CellCost], target: float = PROFILE_TARGET) -> str:
    """What profiling cost the compiled cells, against their wall time: in all, and the cell it cost most."""
    profiled = [row for row in rows if row.profile_s > 0 and row.wall_s > 0]
    if not profiled:
        return "profile cost: no cell of this grid was profiled (eager cells are not; BENCH_GRID with compiled cells)"
    worst = max(profiled, key=lambda row: row.profile_s / row.wall_s)
    share = sum(row.profile_s for row in profiled) / sum(row.wall_s for row in profiled)
    most = worst.profile_s / worst.wall_s
    verdict = "met" if most <= target else f"missed by {(most - target) * 100:.1f} points"
    return (f"profile cost: {sum(row.profile_s for row in profiled):.1f} s of the {len(profiled)} profiled cells' "
            f"{sum(row.wall_s for row in profiled):.1f} s wall time ({share:.1%}); the most: {worst.cell_id} "
            f"{worst.profile_s:.1f} s of {worst.wall_s:.1f} s ({most:.1%}) [target <= {target:.0%} per cell: {verdict}]")


# --- the projection for the guide's grid ----------------------------------------------

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


def results_by_work_key(records: Iterable[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """The last ok record of each cell, else its last record of any status."""
    last_any: dict[tuple, dict[str, Any]] = {}
    last_ok: dict[tuple, dict[str, Any]] = {}
    for record in records:
        cell = record["cell"]
        key = work_key(cell["task"], cell["model"], cell["batch_size"], cell["compile_mode"],
                       cell["dtype"])
        last_any[key] = record
        if record.get("status") == "ok":
            last_ok[key] = record
    return {**last_any, **last_ok}


def eager_cells_sharing_pairs(cells: Iterable) -> set:
    """Eager cells whose latency comes from a compiled cell of their kernel at the same batch
    size (the eager side of its interleaved pairs): they time nothing of their own."""
    from bench_utils.study.grid.kernel_groups import kernel_groups

    return {cell for group in kernel_groups(cells) for cell in group.eager_sharing_pairs()}


def work_from_phases(cell, record: dict[str, Any], shares_pairs: bool) -> CellWork | None:
    """The record's own phases, its timed parts scaled from its runs to the cell's."""
    phases = phases_of(record)
    config = record.get("config") or {}
    recorded_calls = (config.get("runs") or 0) + (config.get("warmup") or 0)
    if not phases or recorded_calls <= 0:
        return None
    timed = phases.get("timed_s", 0.0) + phases.get("warmup_s", 0.0)
    scaled = 0.0 if shares_pairs else timed * (cell.settings.runs + cell.settings.warmup) / recorded_calls
    parts = sum(phases.get(key, 0.0) for key in ("parity_s", "memory_s", *OTHER_PARTS, "profile_s"))
    # the whole cell as measured there (inputs, resets, teardown too), not only its named parts
    rest = max(parts, phases.get("cell_s", 0.0) - timed - phases.get("compile_s", 0.0))
    return CellWork(compile_s=phases.get("compile_s", 0.0), timed_s=scaled, rest_s=rest,
                    source="phases")


def work_from_latencies(cell, record: dict[str, Any], shares_pairs: bool) -> CellWork | None:
    """Older records: compile cost and mean latencies times the cell's calls (runs + warm-up)."""
    latency = (record.get("latency") or {}).get("mean")
    if record.get("status") != "ok" or latency is None:
        return None
    calls = cell.settings.runs + cell.settings.warmup
    if cell.compile_mode == EAGER:
        return CellWork(compile_s=0.0, timed_s=0.0 if shares_pairs else calls * latency,
                        rest_s=0.0, source="latencies")
    compile_block = record.get("compile") or {}
    eager_ms = (record.get("speedup") or {}).get("eager_mean_ms")
    if compile_block.get("cold_ms") is None or eager_ms is None:
        return None
    compile_ms = compile_block["cold_ms"] + (compile_block.get("warm_ms") or 0.0)
    # interleaved pairs: every call is made on both sides
    return CellWork(compile_s=compile_ms / 1000.0, timed_s=calls * (eager_ms / 1000.0 + latency),
                    rest_s=0.0, source="latencies")


def cell_work(cell, record: dict[str, Any] | None, shares_pairs: bool) -> CellWork | None:
    """Phases where the record has them, else compile cost and latencies; None: no figure."""
    if record is None:
        return None
    return work_from_phases(cell, record, shares_pairs) or work_from_latencies(cell, record, shares_pairs)


def environment_label(record: dict[str, Any]) -> str:
    """The processor and torch version a record was measured with."""
    environment = record.get("environment") or {}
    gpus = [gpu.get("name") for gpu in environment.get("gpus") or [] if gpu.get("name")]
    if record["cell"]["device"].startswith("cuda") and gpus:
        where = ", ".join(dict.fromkeys(gpus))
    else:
        where = f"CPU {environment.get('cpu_model') or 'unknown'}"
    return f"{where}, torch {environment.get('torch_version') or 'unknown'}"


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


def project(cells: list, results: Iterable[dict[str, Any]], kernel_start_s: float | None,
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
        starts = [phases_of(r).get("startup_s", 0.0) + phases_of(r).get("load_s", 0.0) for r in results
                  if r["cell"]["model"] == group.first.model and phases_of(r).get("load_s", 0.0) > 0]
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


# --- running ----------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grid", nargs="?", default=str(DEFAULT_GRID), help="grid file to run")
    parser.add_argument("--out", help="study folder (default: a temporary one, removed afterwards)")
    parser.add_argument("--results", help="results.jsonl measured on a GPU: project the guide's grid")
    parser.add_argument("--keep", action="store_true", help="keep the temporary study folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench_utils.records.results_file import read_records
    from bench_utils.study.grid.grid_file import load_grid
    from bench_utils.study.runner.grid_runner import Runner

    grid = load_grid(args.grid)
    out_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="study-cost-"))
    try:
        started = time.monotonic()
        run = Runner(grid, out_dir, force=True).run()  # its progress goes to stderr
        grid_wall_s = time.monotonic() - started
        results_path = out_dir / "results.jsonl"
        records = run_records(run.outcomes, read_records(results_path) if results_path.exists() else [])
    finally:
        if not args.out and not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    rows = breakdown(run.outcomes, records)
    summary = totals(rows, grid_wall_s)
    kernels = kernels_started(records)

    print(f"study cost of {args.grid} ({len(grid.cells)} cells, {len(rows)} run)")
    if rows:
        print(breakdown_table(rows))
        print(TABLE_LEGEND)
    print(overhead_line(summary))
    print(profile_line(rows))
    cells_wall = sum(row.wall_s for row in rows)
    print(f"grid wall time (around the runner): {grid_wall_s:.1f} s, of which cells {cells_wall:.1f} s "
          f"and between cells {grid_wall_s - cells_wall:.1f} s (in the overhead); kernels started: {kernels}")
    if args.keep or args.out:
        print(f"study folder: {out_dir}")

    if args.results:
        guide = load_grid(GUIDE_GRID)
        projection = project(guide.cells, read_records(args.results),
                             mean_kernel_start_s(rows, kernels),
                             summary.overhead_per_cell_without_start_s)
        print(format_projection(projection, "params/hf-guide.yaml", args.results))
    else:
        print(NO_PROJECTION)

    not_ok = len(rows) < len(grid.cells) or any(row.status != "ok" for row in rows)
    return run.exit_status() or (1 if not_ok else 0)


if __name__ == "__main__":
    from bench_utils.records.results_file import skipped_lines_said

    with skipped_lines_said():  # a line of a results file it skips is said on stderr, as python -m bench_utils says it
        sys.exit(main())
