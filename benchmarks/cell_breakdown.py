"""``make bench``'s first measurements: a run's cells split into their measured parts and overhead, the overhead
per cell amortized over the grid (target: ``OVERHEAD_TARGET_S``), and what the profile costs each compiled cell
(target: ``PROFILE_TARGET`` of its wall time). Plain functions of outcomes and records (``study_cost`` runs them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from bench_utils.records.blocks import KERNEL_START_PHASES

if TYPE_CHECKING:
    from bench_utils.records.schema import Record

OVERHEAD_TARGET_S = 3.0          # per cell, amortized over the default grid, on 2 CPU cores
PROFILE_TARGET = 0.10            # a compiled cell's profile: at most this share of its wall time

# Parts of a cell's wall time the kernel measures (``phases`` keys, seconds).
MEASURED_PARTS = ("timed_s", "warmup_s", "compile_s", "parity_s", "memory_s")
OTHER_PARTS = ("flops_s", "energy_s")
# Kernel start (boot, readying, the heap's freeze) and model build: in the first cell(s) of a kernel, part of the
# overhead.
START_PARTS = KERNEL_START_PHASES


def phases_of(record: Record | None) -> dict[str, float]:
    """A record's phases in seconds, by name; those it lacks (and records without phases) are absent."""
    phases = record.phases.to_json() if record is not None and record.phases is not None else {}
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


def records_by_cell(records: Iterable[Record]) -> dict[tuple, Record]:
    """The last record of each cell identity (a results file is in time order)."""
    from bench_utils.records.key import cell_identity

    return {cell_identity(record): record for record in records}


def cell_cost(outcome, record: Record | None) -> CellCost:
    phases = phases_of(record)
    return CellCost(
        cell_id=outcome.cell.cell_id, status=outcome.status, wall_s=float(outcome.seconds),
        timed_s=phases.get("timed_s", 0.0), warmup_s=phases.get("warmup_s", 0.0),
        compile_s=phases.get("compile_s", 0.0), parity_s=phases.get("parity_s", 0.0),
        memory_s=phases.get("memory_s", 0.0),
        other_s=sum(phases.get(key, 0.0) for key in OTHER_PARTS), profile_s=phases.get("profile_s", 0.0),
        start_s=sum(phases.get(key, 0.0) for key in START_PARTS))


def breakdown(outcomes: Iterable, records: Iterable[Record]) -> list[CellCost]:
    """One row per outcome, its record found by cell identity (none: nothing measured)."""
    by_cell = records_by_cell(records)
    return [cell_cost(outcome, by_cell.get(outcome.cell.identity())) for outcome in outcomes]


def run_records(outcomes: Iterable, records: Iterable[Record]) -> list[Record]:
    """The records of this run's cells (a reused --out folder may hold older ones)."""
    by_cell = records_by_cell(records)
    return [by_cell[o.cell.identity()] for o in outcomes if o.cell.identity() in by_cell]


def kernels_started(records: Iterable[Record]) -> int:
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
