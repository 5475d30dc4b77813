"""The H200 leases' records and run logs as prices for ``lease_replay``: each model's kernel (its recorded start, and
the part no record holds, from the runner's logs), and each compiled cell's recorded parts (cold and warm compile,
warm-up, timed runs per run, gate, memory, FLOPs, energy, profile, the rest). Only records measured alone count; a
cell with no record is priced from its model's nearest batch size, a model never measured from its closest measured
model or the median cell, and every such choice is noted. No torch is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
import re
import statistics
from typing import TYPE_CHECKING, Any, Callable, Iterable

from bench_utils.records.blocks import KERNEL_START_PHASES

if TYPE_CHECKING:
    from bench_utils.records.schema import Record
    from bench_utils.study.grid.grid_file import Cell

ROOT = Path(__file__).resolve().parents[1]
EAGER = "eager"

# --- records ----------------------------------------------------------------------------------------------------------

def phases_of(record: Record) -> dict[str, float]:
    """The record's phases (seconds), whatever the schema still types (removed fields stay as the block's own keys)."""
    phases = record.phases.to_json() if record.phases is not None else {}
    return {key: float(value) for key, value in phases.items() if isinstance(value, (int, float))}


def not_alone_because(record: Record) -> str | None:
    """Why a record was not measured alone (None: it was): compile processes beside its kernel (``compile_wait_s``,
    ``config.beside_compiles``), or a kernel started ahead (``started_ahead_s``, ``gate_wait_s``)."""
    phases = phases_of(record)
    for key in ("compile_wait_s", "started_ahead_s", "gate_wait_s"):
        if key in phases:
            return key
    if record.config.read("beside_compiles"):
        return "beside_compiles"
    return None


def on_gpu(record: Record, gpu_name: str) -> bool:
    gpus = record.environment.to_json().get("gpus") or []
    return record.cell.device_kind == "cuda" and any(gpu_name in (gpu.get("name") or "") for gpu in gpus)


def alone_records(records: Iterable[Record], gpu_name: str) -> tuple[list[Record], dict[str, int]]:
    """The ok records on the GPU measured alone, and how many were left out, by why."""
    kept: list[Record] = []
    left: dict[str, int] = {}
    for record in records:
        if not record.ok or not on_gpu(record, gpu_name) or record.phases is None:
            continue
        why = not_alone_because(record)
        if why is None:
            kept.append(record)
        else:
            left[why] = left.get(why, 0) + 1
    return kept, left


def is_kernel_first(record: Record) -> bool:
    """The first record of its kernel: it carries the kernel's start (non-first records say 0.0 or nothing)."""
    return phases_of(record).get("startup_s", 0.0) > 0.0


def kernel_start_s(record: Record) -> float:
    """What a kernel's first record holds of its own cost: its start, its readying (``ready_s``), the heap's freeze
    (``freeze_s``), its model build."""
    phases = phases_of(record)
    return sum(phases.get(name, 0.0) for name in KERNEL_START_PHASES)


@dataclass(frozen=True)
class Parts:
    """One compiled cell's recorded seconds, by part (a record, or the mean of several)."""

    cold_s: float
    warm_s: float | None       # the warm compile measured in this cell (None: at another batch size, or nowhere)
    warmup_s: float
    timed_per_run_s: float     # timed_s over the record's runs (both sides of each pair)
    parity_s: float
    memory_s: float
    flops_s: float
    energy_s: float | None     # None: the old fixed 5-s windows
    profile_s: float
    rest_s: float              # cell_s less its named parts: inputs, resets, teardown
    heap_frozen: float = 0.0   # 1.0: measured in a kernel that froze its heap (``config.heap_frozen``); a mean: a share

    @classmethod
    def of_record(cls, record: Record) -> Parts:
        phases = phases_of(record)
        compiled = record.compile
        warm_calls = list(compiled.warm_calls_ms or []) if compiled is not None else []
        warm_s = (sum(warm_calls) / 1000.0 if warm_calls else
                  compiled.warm_ms / 1000.0 if compiled is not None and compiled.warm_ms else None)
        compile_s = phases.get("compile_s", 0.0)
        named = sum(phases.get(key, 0.0) for key in ("compile_s", "warmup_s", "timed_s", "parity_s", "memory_s",
                                                    "flops_s", "energy_s", "profile_s"))
        return cls(cold_s=max(0.0, compile_s - (warm_s or 0.0)), warm_s=warm_s,
                   warmup_s=phases.get("warmup_s", 0.0),
                   timed_per_run_s=phases.get("timed_s", 0.0) / max(1, record.config.runs or 1),
                   parity_s=phases.get("parity_s", 0.0), memory_s=phases.get("memory_s", 0.0),
                   flops_s=phases.get("flops_s", 0.0),
                   energy_s=None if fixed_energy_windows(record) else phases.get("energy_s", 0.0),
                   profile_s=phases.get("profile_s", 0.0),
                   rest_s=max(0.0, phases.get("cell_s", 0.0) - named),
                   heap_frozen=float(bool(record.config.heap_frozen)))

    @classmethod
    def mean(cls, many: list[Parts]) -> Parts:
        """Each part's mean over ``many`` (a part none of them has stays None)."""
        return cls.combined(many, statistics.fmean)

    @classmethod
    def median(cls, many: list[Parts]) -> Parts:
        return cls.combined(many, statistics.median)

    @classmethod
    def combined(cls, many: list[Parts], how: Callable[[list[float]], float]) -> Parts:
        def part(name: str) -> float | None:
            values = [getattr(parts, name) for parts in many if getattr(parts, name) is not None]
            return how(values) if values else None

        values: dict[str, Any] = {item.name: part(item.name) for item in fields(cls)}
        return cls(**values)


def fixed_energy_windows(record: Record) -> bool:
    """Energy measured in the old fixed 5-s windows (``window_min_s``), before they were sized by the counter."""
    energy = record.energy
    sides = [energy.eager, energy.compiled] if energy is not None else []
    return any(side is not None and side.read("window_min_s") for side in sides)


# --- the kernel's unrecorded cost, from the run logs ------------------------------------------------------------------

OK_LINE = re.compile(r"^\[\d+/\d+\] (\S+): ok \((\d+) s\)")
SLOWEST_ENTRY = re.compile(r"(\S+) \((\d+) s\)")
STUDY_LINE = re.compile(r"^\[run\] study (\S+):")
COMPILE_AHEAD_LINE = "[run] compile ahead"


@dataclass(frozen=True)
class RunLog:
    """What a runner's log says: its study (None: a tail without its first lines), and each cell's wall seconds."""

    path: Path
    study: str | None
    walls: dict[str, int]
    compiled_ahead: bool       # the run had compile processes beside its kernels: no wall of it is alone


def read_run_log(path: Path) -> RunLog:
    study, walls, ahead = None, {}, False
    for line in path.read_text(errors="replace").splitlines():
        if study is None and (match := STUDY_LINE.match(line)):
            study = match.group(1)
        ahead = ahead or line.startswith(COMPILE_AHEAD_LINE)
        if match := OK_LINE.match(line):
            walls[match.group(1)] = int(match.group(2))
        elif line.startswith("slowest: "):  # a tail's only trace of earlier cells
            for name, seconds in SLOWEST_ENTRY.findall(line[len("slowest: "):]):
                walls.setdefault(name, int(seconds))
    return RunLog(path, study, walls, ahead)


def run_logs_beside(results_paths: Iterable[Path]) -> list[Path]:
    """The run logs kept beside studies' records: ``<study>/lease-*/**/*.log`` and ``*.txt``."""
    return sorted({found for results in results_paths for pattern in ("lease-*/**/*.log", "lease-*/**/*.txt")
                   for found in Path(results).parent.glob(pattern)})


def cell_name(record: Record) -> str | None:
    """The name the runner's log gives the record's cell (only the guide's way: no variant in it)."""
    cell = record.cell
    if (cell.memory_format, cell.shapes, cell.inductor, cell.replicate) != ("contiguous", "static", "default", "r1"):
        return None
    return "__".join((cell.task, cell.model, f"bs{cell.batch_size}", cell.compile_mode, cell.dtype,
                      cell.device_kind))


@dataclass(frozen=True)
class LogSample:
    """A kernel's first cell: its wall in the log less what its record holds (start, readying, load, the cell)."""

    model: str
    unrecorded_s: float
    with_ready: bool           # its record has ready_s (then the rest is the launch before the kernel's process)
    log: str


def unrecorded_samples(logs: Iterable[Path], records_by_folder: dict[Path, list[Record]]) -> list[LogSample]:
    """Every kernel-first record measured alone that a log's line names, once. A log names its study in its first
    lines; a tail without them is matched to the records of the study folder it lies in. A log of a run that compiled
    ahead is passed over; a name two alone records share (a study measured twice) is ambiguous and passed over."""
    all_records = [record for records in records_by_folder.values() for record in records]
    samples, seen = [], set()
    for path in logs:
        log = read_run_log(path)
        if log.compiled_ahead or not log.walls:
            continue
        if log.study is not None:
            candidates = [record for record in all_records if record.cell.study == log.study]
        else:
            folder = next((f for f in records_by_folder if f in path.parents), None)
            candidates = records_by_folder[folder] if folder is not None else []
        by_name: dict[str, list[Record]] = {}
        for record in candidates:
            if is_kernel_first(record) and (name := cell_name(record)):
                by_name.setdefault(name, []).append(record)
        for name, wall in log.walls.items():
            matches = by_name.get(name, [])
            if len(matches) != 1 or matches[0].record_id in seen:
                continue
            record = matches[0]
            seen.add(record.record_id)
            recorded = kernel_start_s(record) + phases_of(record).get("cell_s", 0.0)
            samples.append(LogSample(record.cell.model, wall - recorded, "ready_s" in phases_of(record),
                                     str(path.relative_to(ROOT)) if ROOT in path.parents else str(path)))
    return samples


# --- prices ---------------------------------------------------------------------------------------------------------

@dataclass
class KernelCost:
    model: str
    start_s: float             # startup_s + ready_s + freeze_s + load_s, mean over the model's kernel-first records
    unrecorded_s: float        # from the logs: the model's median, else every model's
    load_s: float              # the model's build, within start_s (a compile process builds it too)
    note: str
    first_cell_s: float = 0.0  # what a kernel's first cell costs beyond any other (``first_cell_extra_s``)
    with_ready: bool = False   # its records carry ready_s: measured as the kernel now runs (no cut to price)
    frozen_share: float = 0.0  # the share of its first records with freeze_s: that much freeze is in start_s already


@dataclass
class Prices:
    """Every figure the replay takes: per model its kernel, per compiled cell its parts, and where each came from."""

    kernels: dict[str, KernelCost]
    parts: dict[tuple[str, str, int], Parts]          # (model, mode, batch size)
    warm: dict[tuple[str, str], float]                # (model, mode): the warm compile a later replicate pays
    sources: dict[str, str] = field(default_factory=dict)      # model -> "priced from ..." where not its own
    cell_notes: list[str] = field(default_factory=list)
    energy_sized_s: float = 0.0                                 # the median sized energy phase
    samples: list[LogSample] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    alone: int = 0
    first_cell_s: float = 0.0
    pool_start_s: list[float] = field(default_factory=list)     # kernel-first records' compile_workers.start_ms


def nearest_parts(by_batch: dict[int, Parts], batch: int) -> tuple[Parts, str]:
    """The figures at ``batch`` from a model's other batch sizes of one mode: the nearest one's, its timed runs
    interpolated (or extrapolated) linearly in the batch size from the two nearest, never below the nearest's."""
    if batch in by_batch:
        return by_batch[batch], ""
    ordered = sorted(by_batch, key=lambda b: (abs(b - batch), b))
    nearest = by_batch[ordered[0]]
    if len(ordered) < 2:
        return nearest, f"its batch {ordered[0]}"
    (b1, p1), (b2, p2) = sorted(((b, by_batch[b]) for b in ordered[:2]))
    slope = (p2.timed_per_run_s - p1.timed_per_run_s) / (b2 - b1)
    timed = max(nearest.timed_per_run_s, p1.timed_per_run_s + slope * (batch - b1))
    return replace(nearest, timed_per_run_s=timed), f"its batch {ordered[0]}, timed runs from batches {b1} and {b2}"


def build_prices(cells: list[Cell], records: list[Record], logs: Iterable[Path], closest: dict[str, str],
                 gpu_name: str) -> Prices:
    """Each model's kernel and each compiled cell of ``cells`` priced from the records measured alone on ``gpu_name``
    (``closest``: a model never measured, priced from the one it names)."""
    alone, left_out = alone_records(records, gpu_name)
    compiled = [record for record in alone if record.cell.compile_mode != EAGER]
    first_cell_s = first_cell_extra_s(compiled)
    recorded: dict[tuple[str, str, int], list[Parts]] = {}
    for record in compiled:
        figures = Parts.of_record(record)
        if is_kernel_first(record):  # its first cell's extra is the kernel's, wherever the plan puts the cell
            figures = replace(figures, rest_s=max(0.0, figures.rest_s - first_cell_s))
        recorded.setdefault((record.cell.model, record.cell.compile_mode, record.cell.batch_size), []).append(figures)
    own = {key: Parts.mean(many) for key, many in recorded.items()}
    measured_models = {model for model, _, _ in own}
    sized = [figures.energy_s for figures in own.values() if figures.energy_s is not None]
    energy_sized_s = statistics.median(sized) if sized else 0.0

    # the kernels
    by_folder: dict[Path, list[Record]] = {}
    for record in alone:
        folder = Path(record.origin[0]).resolve().parent if record.origin else Path(".")
        by_folder.setdefault(folder, []).append(record)
    samples = unrecorded_samples(logs, by_folder)
    firsts: dict[str, list[Record]] = {}
    for record in alone:
        if is_kernel_first(record):
            firsts.setdefault(record.cell.model, []).append(record)
    kernels: dict[str, KernelCost] = {}
    for model, first in firsts.items():
        with_ready = all("ready_s" in phases_of(record) for record in first)
        kind = [sample for sample in samples if sample.with_ready == with_ready]
        mine = [sample.unrecorded_s for sample in kind if sample.model == model]
        every = [sample.unrecorded_s for sample in kind]
        unrecorded = statistics.median(mine or every) if (mine or every) else 0.0
        start = statistics.fmean(kernel_start_s(record) for record in first)
        what = "startup+ready+freeze+load" if with_ready else "startup+load"
        where = (f"its log ({len(mine)} first cell{'s' if len(mine) > 1 else ''})" if mine else
                 f"every model's logs' median ({len(every)})" if every else "no log: 0")
        load = statistics.fmean(phases_of(record).get("load_s", 0.0) for record in first)
        kernels[model] = KernelCost(model, start, unrecorded, load,
                                    f"{what} {start:.1f} s ({len(first)} record{'s' if len(first) > 1 else ''}), "
                                    f"unrecorded {unrecorded:.1f} s from {where}", first_cell_s, with_ready,
                                    statistics.fmean("freeze_s" in phases_of(record) for record in first))

    models = list(dict.fromkeys(cell.model for cell in cells))
    sources: dict[str, str] = {}
    median_kernel = (KernelCost("median", statistics.median(k.start_s for k in kernels.values()),
                                statistics.median(k.unrecorded_s for k in kernels.values()),
                                statistics.median(k.load_s for k in kernels.values()), "the median kernel",
                                first_cell_s)
                     if kernels else KernelCost("none", 0.0, 0.0, 0.0, "no kernel recorded", first_cell_s))

    def source_of(model: str) -> str | None:
        """The measured model a model's cells are priced from (itself where measured); None: the median cell."""
        seen = set()
        while model not in measured_models and model in closest and model not in seen:
            seen.add(model)
            model = closest[model]
        return model if model in measured_models else None

    for model in models:
        source = source_of(model)
        if source != model:
            sources[model] = f"priced from {source}" if source else "priced from the median per-cell figure"
        if model not in kernels:
            kernel_source = source if source in kernels else None
            base = kernels[kernel_source] if kernel_source else median_kernel
            kernels[model] = replace(base, model=model, note=f"{base.note} (kernel of {kernel_source or 'the median'})")

    # the cells
    parts: dict[tuple[str, str, int], Parts] = {}
    notes: list[str] = []
    for cell in cells:
        if cell.compile_mode == EAGER or (cell.model, cell.compile_mode, cell.batch_size) in parts:
            continue
        key = (cell.model, cell.compile_mode, cell.batch_size)
        source = source_of(cell.model)
        if source is None:
            same_batch = [p for (m, _, b), p in own.items() if b == cell.batch_size] or list(own.values())
            parts[key] = Parts.median(same_batch)
            continue
        by_batch = {b: p for (m, mode, b), p in own.items() if m == source and mode == cell.compile_mode}
        mode_note = ""
        if not by_batch:  # a mode the model was never measured in: its default mode's figures
            by_batch = {b: p for (m, mode, b), p in own.items() if m == source and mode == "default"}
            mode_note = " in the default mode"
            if not by_batch:
                by_batch = {b: p for (m, _, b), p in own.items() if m == source}
        parts[key], batch_note = nearest_parts(by_batch, cell.batch_size)
        if source == cell.model and (batch_note or mode_note):
            notes.append(f"{cell.model} {cell.compile_mode} bs{cell.batch_size}: priced from "
                         f"{batch_note or 'its batch ' + str(cell.batch_size)}{mode_note}")

    # the warm compile of a cell whose record measured none (at another batch size): its model's in that mode
    # (mean), else its model's in any mode, else the median of every warm compile measured
    def warm_of(model: str, mode: str) -> float:
        source = source_of(model)
        for same_mode in (True, False):
            warms = [p.warm_s for (m, md, _), p in own.items()
                     if m == source and (md == mode or not same_mode) and p.warm_s is not None]
            if warms:
                return statistics.fmean(warms)
        every = [p.warm_s for p in own.values() if p.warm_s is not None]
        return statistics.median(every) if every else 0.0

    warm = {(model, mode): warm_of(model, mode) for model, mode, _ in parts}
    return Prices(kernels=kernels, parts=parts, warm=warm, sources=sources, cell_notes=notes,
                  energy_sized_s=energy_sized_s, samples=samples, left_out=left_out, alone=len(alone),
                  first_cell_s=first_cell_s,
                  pool_start_s=[s for s in (pool_start_s(r) for r in compiled if is_kernel_first(r)) if s is not None])


def pool_start_s(record: Record) -> float | None:
    """The seconds the kernel took to start Inductor's compile-worker pool (part of its unrecorded cost)."""
    workers = record.compile.compile_workers if record.compile is not None else None
    start = (workers or {}).get("start_ms")
    return start / 1000.0 if isinstance(start, (int, float)) else None


def first_cell_extra_s(compiled: list[Record]) -> float:
    """What a kernel's first cell spends beyond its named parts more than any later cell does (its first calls on the
    device: the H200 records' remainder is 2.7-4.3 s in a kernel's first cell, 0.8-1.9 s in the others): the
    median of the first cells' remainders less the others'. A per-kernel cost: charged to each kernel, not to the
    cell that happened to come first in the record's kernel."""
    first = [Parts.of_record(r).rest_s for r in compiled if is_kernel_first(r)]
    others = [Parts.of_record(r).rest_s for r in compiled if not is_kernel_first(r)]
    if not first or not others:
        return 0.0
    return max(0.0, statistics.median(first) - statistics.median(others))
