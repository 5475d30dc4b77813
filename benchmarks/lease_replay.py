"""``make bench``: the H200 leases' recorded durations replayed under the plan that measures everything alone and
serially, one kernel per model group, to count what one device command holds.

``python benchmarks/lease_replay.py [--grid GRID] [--results FILE ...] [--set NAME=VALUE ...]``

It runs nothing: it prices the guide grid's compiled cells (``params/hf-guide.yaml``: 44, first replicates) in the
runner's order, each kernel at its own cost (process start, imports, model build, the compile-worker pool, the
compiler warm-up, the environment's capture: ``phases.startup_s``, ``ready_s`` where recorded, ``load_s``, and the
part no record holds, read off the leases' run logs), each cell at its recorded phases, and replays them against
``COMMAND_S`` from a fresh machine:

- **new cells** (a first replicate): cold compile alone, the warm compile at its mode's first batch size, warm-up,
  timed runs (scaled to a replicate's runs), gate, memory, FLOPs, energy, profile;
- **later replicates** (r2, r3, their first measured on an earlier lease, its compile caches carried in): a warm
  compile, warm-up, timed runs and the gate only.

Only records measured alone count (not beside compile processes, not a kernel started ahead). A cell with no record
is priced from its model's nearest batch size, a model never measured from its closest measured model
(``CLOSEST``) or else from the median cell; every such choice is printed. The last line:

    lease replay: N new cells, M later replicates per 570-s command

Plain functions of records, logs and cells (``tests/benchmarks/test_lease_replay.py``); no torch is imported.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
import math
from pathlib import Path
import re
import statistics
import sys
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from bench_utils.records.schema import Record
    from bench_utils.study.grid.grid_file import Cell

ROOT = Path(__file__).resolve().parents[1]
GRID = "params/hf-guide.yaml"
# The H200 leases' records (every record carries its GPU; only those on GPU_NAME count).
RESULTS = ("reports/hf-guide-h200/results.jsonl", "reports/anchors-h200/results.jsonl",
           "reports/gpu-check-h200/results.jsonl")
GPU_NAME = "H200"
EAGER = "eager"

# --- the knobs: each figure and where it comes from (``--set NAME=VALUE`` overrides one for a what-if) ---------------


@dataclass(frozen=True)
class Knobs:
    # One device command's seconds for the run: the device tool's 600-s limit less the 30 s tools/gpu_lease.sh keeps
    # for its dry run and archive (the 570).
    COMMAND_S: float = 570.0
    # Between kernels, per kernel: the runner's start (the first) and a kernel's teardown and hand-over to the next
    # (the others), in no "ok (N s)". The first H200 lease's run.log: 8.2-min limit, 387 s of cells in its 4 first
    # kernels, "1.5 min left" at the 5th: (492 - 387 - 90) / 4 = 3.75 s (about +-1.5 s: the log rounds to 0.1 min).
    KERNEL_GAP_S: float = 3.75
    # A cut in each kernel's own cost once it is implemented (e.g. no compile-worker pool: its start is recorded in
    # compile.compile_workers.start_ms, 6.9-9.3 s on the H200 records), until records with ``ready_s`` measure the
    # kernel as it then is (back to 0 then). Negative: a cost added (the compiler warm-up, which these records predate).
    KERNEL_COST_CUT_S: float = 0.0
    # The same, in later replicates' kernels only: they compile warm from the carried caches, where the compile-worker
    # pool (and the compiler warm-up) buy nothing.
    LATER_KERNEL_CUT_S: float = 0.0
    # A new cell's energy windows (eager and compiled): None, as each record measured them where its windows were
    # sized from the counter's step (2.1-2.5 s on the H200), the median of those where a record had the old fixed
    # 5-s windows (10.8 s); a number: that, for every new cell.
    ENERGY_FULL_S: float | None = None
    # A later replicate's: none (``cell_plan.ONCE_PER_CELL`` leaves energy, memory, FLOPs and the profile to the first).
    ENERGY_LEAN_S: float = 0.0
    LEAN_PROFILE: bool = False
    LEAN_MEMORY: bool = False
    LEAN_FLOPS: bool = False
    # A new cell's profile (why it got faster): True as the grid asks (profile: true, the default).
    FULL_PROFILE: bool = True
    # A later replicate's kernel loading the carried compile caches (torch.compiler.load_cache_artifacts): ASSUMED
    # negligible, its warm compile as fast as from its own disk cache (the third lease's fresh "warm" processes: BEiT
    # 2.1-2.7 s, against 2.3 s warm in the cold compile's own process). No lease has carried caches in yet.
    CACHE_LOAD_S: float = 0.0
    # The eager cells: their records' cell_s is 0.00 s (they take the compiled cells' eager side).
    EAGER_CELL_S: float = 0.0
    # The variant: before measuring, K processes compile the new cells cold at once (nothing timed), the measuring
    # kernels then compile them warm. K: 4 processes of 4 cores on the H200 host's 16.
    PRECOMPILE_K: int = 4
    # ASSUMED: a cold compile among K at once over one alone. No lease measured it; the only figure near it, 2
    # processes beside a measuring kernel on the first pipelined lease, was 1.7-2.7 (token waits and SIGSTOP pauses
    # in it; pipeline_prices.BESIDE_COMPILE_FACTOR's point 2.0). The variant is the plan recommended only where it
    # gains a cell at the high end too (PRECOMPILE_FACTOR_HIGH: that lease's 2.7), so that no N leans on the point.
    PRECOMPILE_FACTOR: float = 2.0
    PRECOMPILE_FACTOR_HIGH: float = 2.7
    # A compile process's boot before its first compile, the model's build apart (the pipelined lease's ViT process:
    # 26 s, token waits in it; pipeline_prices.PROCESS_SETUP_S's point 20 s).
    PROCESS_SETUP_S: float = 20.0


KNOBS = Knobs()
# Models no H200 lease measured, priced from the closest measured one (same family): else from the median cell.
CLOSEST = {"maskformer": "mask2former",            # MaskFormer is Mask2Former's predecessor (1245 against 1264 ops)
           "detr-resnet-101": "detr",              # the same DETR on a deeper backbone
           "conditional-detr": "detr",             # a DETR variant (881 against 757 eager ops)
           "owlvit": "vit"}                        # a CLIP ViT image encoder with detection heads


# --- records -----------------------------------------------------------------------------------------------------------

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


def on_gpu(record: Record, gpu_name: str = GPU_NAME) -> bool:
    gpus = record.environment.to_json().get("gpus") or []
    return record.cell.device_kind == "cuda" and any(gpu_name in (gpu.get("name") or "") for gpu in gpus)


def alone_records(records: Iterable[Record], gpu_name: str = GPU_NAME) -> tuple[list[Record], dict[str, int]]:
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
    """What a kernel's first record holds of its own cost: its start, its readying (``ready_s``), its model build."""
    phases = phases_of(record)
    return phases.get("startup_s", 0.0) + phases.get("ready_s", 0.0) + phases.get("load_s", 0.0)


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
                   rest_s=max(0.0, phases.get("cell_s", 0.0) - named))

    @classmethod
    def mean(cls, many: list[Parts]) -> Parts:
        def average(name: str) -> float | None:
            values = [getattr(parts, name) for parts in many if getattr(parts, name) is not None]
            return statistics.fmean(values) if values else None

        return cls(**{item.name: average(item.name) for item in fields(cls)})

    @classmethod
    def median(cls, many: list[Parts]) -> Parts:
        def middle(name: str) -> float | None:
            values = [getattr(parts, name) for parts in many if getattr(parts, name) is not None]
            return statistics.median(values) if values else None

        return cls(**{item.name: middle(item.name) for item in fields(cls)})


def fixed_energy_windows(record: Record) -> bool:
    """Energy measured in the old fixed 5-s windows (``window_min_s``), before they were sized by the counter."""
    energy = record.energy
    sides = [energy.eager, energy.compiled] if energy is not None else []
    return any(side is not None and side.read("window_min_s") for side in sides)


# --- the kernel's unrecorded cost, from the run logs ---------------------------------------------------------------------

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
    found = set()
    for results in results_paths:
        for pattern in ("lease-*/**/*.log", "lease-*/**/*.txt"):
            found.update(Path(results).parent.glob(pattern))
    return sorted(found)


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
            candidates = records_by_folder.get(folder, [])
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
    start_s: float             # startup_s + ready_s + load_s, mean over the model's kernel-first records
    unrecorded_s: float        # from the logs: the model's median, else every model's
    load_s: float              # the model's build, within start_s (a compile process builds it too)
    note: str
    first_cell_s: float = 0.0  # what a kernel's first cell costs beyond any other (``first_cell_extra_s``)


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
    pool_start_s: list[float] = field(default_factory=list)     # compile.compile_workers.start_ms of kernel-first records


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


def build_prices(cells: list[Cell], records: list[Record], logs: Iterable[Path],
                 closest: dict[str, str] | None = None, gpu_name: str = GPU_NAME) -> Prices:
    """Each model's kernel and each compiled cell of ``cells`` priced from the records measured alone."""
    closest = CLOSEST if closest is None else closest
    alone, left_out = alone_records(records, gpu_name)
    compiled = [record for record in alone if record.cell.compile_mode != EAGER]
    first_cell_s = first_cell_extra_s(compiled)
    recorded: dict[tuple[str, str, int], list[Parts]] = {}
    for record in compiled:
        parts = Parts.of_record(record)
        if is_kernel_first(record):  # its first cell's extra is the kernel's, wherever the plan puts the cell
            parts = replace(parts, rest_s=max(0.0, parts.rest_s - first_cell_s))
        recorded.setdefault((record.cell.model, record.cell.compile_mode, record.cell.batch_size), []).append(parts)
    own = {key: Parts.mean(many) for key, many in recorded.items()}
    measured_models = {model for model, _, _ in own}
    sized = [parts.energy_s for parts in own.values() if parts.energy_s is not None]
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
        what = "startup+ready+load" if with_ready else "startup+load"
        where = (f"its log ({len(mine)} first cell{'s' if len(mine) > 1 else ''})" if mine else
                 f"every model's logs' median ({len(every)})" if every else "no log: 0")
        load = statistics.fmean(phases_of(record).get("load_s", 0.0) for record in first)
        kernels[model] = KernelCost(model, start, unrecorded, load,
                                    f"{what} {start:.1f} s ({len(first)} record{'s' if len(first) > 1 else ''}), "
                                    f"unrecorded {unrecorded:.1f} s from {where}", first_cell_s)

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
                  first_cell_s=first_cell_s, pool_start_s=[pool_start_s(r) for r in compiled
                                                            if is_kernel_first(r) and pool_start_s(r) is not None])


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


def new_cell_parts(prices: Prices, cell: Cell, first_of_mode: bool, knobs: Knobs,
                   precompiled: bool = False) -> dict[str, float]:
    """A first replicate's seconds by part, measured alone: cold compile (none where compiled before, then warm at
    every batch size), the warm compile at its mode's first batch size, warm-up, timed runs (the replicate's), gate,
    memory, FLOPs, energy (``ENERGY_FULL_S``), profile, the rest."""
    p = prices.parts[(cell.model, cell.compile_mode, cell.batch_size)]
    warm = p.warm_s if p.warm_s is not None else prices.warm[(cell.model, cell.compile_mode)]
    energy = (knobs.ENERGY_FULL_S if knobs.ENERGY_FULL_S is not None else
              p.energy_s if p.energy_s is not None else prices.energy_sized_s)
    return {"cold": 0.0 if precompiled else p.cold_s, "warm": warm if (first_of_mode or precompiled) else 0.0,
            "warmup": p.warmup_s, "timed": p.timed_per_run_s * cell.settings.runs, "parity": p.parity_s,
            "memory": p.memory_s, "flops": p.flops_s, "energy": energy,
            "profile": p.profile_s if knobs.FULL_PROFILE else 0.0, "rest": p.rest_s}


def later_cell_parts(prices: Prices, cell: Cell, knobs: Knobs) -> dict[str, float]:
    """A later replicate's seconds by part, lean: a warm compile from the carried caches, warm-up, timed runs, the
    gate and the rest; energy, profile, memory and FLOPs only as the ``LEAN_*`` knobs say."""
    p = prices.parts[(cell.model, cell.compile_mode, cell.batch_size)]
    warm = p.warm_s if p.warm_s is not None else prices.warm[(cell.model, cell.compile_mode)]
    return {"cold": 0.0, "warm": warm, "warmup": p.warmup_s, "timed": p.timed_per_run_s * cell.settings.runs,
            "parity": p.parity_s, "memory": p.memory_s if knobs.LEAN_MEMORY else 0.0,
            "flops": p.flops_s if knobs.LEAN_FLOPS else 0.0, "energy": knobs.ENERGY_LEAN_S,
            "profile": p.profile_s if knobs.LEAN_PROFILE else 0.0, "rest": p.rest_s}


# --- the replay -------------------------------------------------------------------------------------------------------

@dataclass
class KernelRun:
    """One kernel as the replay takes it: its own cost (start, readying, load, gap), then its cells in order."""

    model: str
    label: str                                   # the model, and its replicate where later
    own: dict[str, float]                        # "start", "unrecorded", "first cell", "gap" (``kernel_own``)
    cells: list[tuple[bool, dict[str, float]]]   # (compiled, seconds by part), in the kernel's order

    @property
    def own_s(self) -> float:
        return sum(self.own.values())


@dataclass
class Replayed:
    count: int                                   # compiled cells done within the budget
    end_s: float
    per_kernel: dict[str, int]                   # compiled cells done, by kernel label
    parts: dict[str, float]                      # seconds spent, by part, kernels' own included

    def share(self, names: Iterable[str]) -> float:
        return sum(self.parts.get(name, 0.0) for name in names)


def replay(kernels: list[KernelRun], budget_s: float) -> Replayed:
    """The kernels in order against ``budget_s``, as ``run --time-limit`` runs them: a kernel starts only the cells
    that fit (a prefix of its cells, its own cost included), one none of whose cells fit is passed over, and the
    next is tried. Counts the compiled cells done."""
    now, count, per_kernel, parts = 0.0, 0, {}, {}
    for kernel in kernels:
        taken, spent = 0, kernel.own_s
        for compiled, cell in kernel.cells:
            if now + spent + sum(cell.values()) > budget_s + 1e-9:
                break
            spent += sum(cell.values())
            taken += 1
        if taken == 0:
            continue
        now += spent
        for name, seconds in kernel.own.items():
            parts[name] = parts.get(name, 0.0) + seconds
        for compiled, cell in kernel.cells[:taken]:
            count += compiled
            per_kernel[kernel.label] = per_kernel.get(kernel.label, 0) + compiled
            for name, seconds in cell.items():
                parts[name] = parts.get(name, 0.0) + seconds
    return Replayed(count, now, per_kernel, parts)


def kernel_own(prices: Prices, model: str, knobs: Knobs, later: bool = False) -> dict[str, float]:
    """A kernel's own seconds by part: its recorded start (startup, readying, load), the unrecorded part (with the
    carried caches' load for a later replicate), its first cell's extra, and the gap to the next. ``KERNEL_COST_CUT_S``
    comes off the unrecorded part first (the compile-worker pool and the warm-up are there), then the others."""
    kernel = prices.kernels[model]
    own = {"unrecorded": kernel.unrecorded_s + (knobs.CACHE_LOAD_S if later else 0.0), "start": kernel.start_s,
           "first cell": kernel.first_cell_s}
    cut = knobs.KERNEL_COST_CUT_S + (knobs.LATER_KERNEL_CUT_S if later else 0.0)
    if cut < 0:  # a cost added (a what-if: a compiler warm-up the records predate)
        own["unrecorded"] -= cut
    for name in own:
        taken = min(own[name], max(0.0, cut))
        own[name] -= taken
        cut -= taken
    return {**own, "gap": knobs.KERNEL_GAP_S}


def new_cell_kernels(prices: Prices, firsts: list[Cell], knobs: Knobs,
                     precompiled: frozenset = frozenset()) -> list[KernelRun]:
    """The first replicates' kernels, in the runner's order (``kernel_groups``)."""
    from bench_utils.study.grid.kernel_groups import kernel_groups

    runs = []
    for group in kernel_groups(firsts):
        modes, cells = set(), []
        for cell in group.cells:
            if cell.compile_mode == EAGER:
                cells.append((False, {"rest": knobs.EAGER_CELL_S}))
                continue
            first_of_mode = cell.compile_mode not in modes
            modes.add(cell.compile_mode)
            cells.append((True, new_cell_parts(prices, cell, first_of_mode, knobs, cell in precompiled)))
        runs.append(KernelRun(group.first.model, group.first.model, kernel_own(prices, group.first.model, knobs),
                              cells))
    return runs


def later_kernels(prices: Prices, later: list[Cell], knobs: Knobs) -> list[KernelRun]:
    """The later replicates' kernels, in the runner's order (the grid's staggered replicates, ``grid_file.replicated``)."""
    from bench_utils.study.grid.kernel_groups import kernel_groups

    return [KernelRun(group.first.model, f"{group.first.model} {group.first.replicate.value}",
                      kernel_own(prices, group.first.model, knobs, later=True),
                      [(cell.compile_mode != EAGER,
                        later_cell_parts(prices, cell, knobs) if cell.compile_mode != EAGER
                        else {"rest": knobs.EAGER_CELL_S}) for cell in group.cells])
            for group in kernel_groups(later)]


def precompile_s(prices: Prices, cells: list[Cell], knobs: Knobs) -> float:
    """Seconds for ``PRECOMPILE_K`` processes compiling ``cells`` cold at once before any measuring: each takes the
    next model's cells (the runner's order), boots (``PROCESS_SETUP_S`` and the model's build) and compiles them
    one by one at ``PRECOMPILE_FACTOR`` times each one's cold compile alone. The last to finish ends it."""
    jobs: dict[str, float] = {}
    for cell in cells:
        if cell.model not in jobs:
            kernel = prices.kernels[cell.model]
            jobs[cell.model] = knobs.PROCESS_SETUP_S + kernel.load_s
        jobs[cell.model] += prices.parts[(cell.model, cell.compile_mode, cell.batch_size)].cold_s * \
            knobs.PRECOMPILE_FACTOR
    free = [0.0] * max(1, knobs.PRECOMPILE_K)
    for seconds in jobs.values():
        index = free.index(min(free))
        free[index] += seconds
    return max(free) if jobs else 0.0


@dataclass
class Precompiled:
    count: int
    prefix: int                # how many of the new cells, in order, are compiled before measuring
    precompile_s: float
    measured: Replayed


def best_precompile(prices: Prices, firsts: list[Cell], knobs: Knobs) -> Precompiled:
    """The variant at its best: the first p compiled cells compiled cold K at once, then measured, p from 0 (the
    serial plan) to all; the p that gets the most cells done (the least p among equals)."""
    from bench_utils.study.grid.kernel_groups import kernel_groups

    order = [cell for group in kernel_groups(firsts) for cell in group.cells if cell.compile_mode != EAGER]
    best = None
    for p in range(len(order) + 1):
        ahead = order[:p]
        spent = precompile_s(prices, ahead, knobs)
        if spent > knobs.COMMAND_S:
            break
        measured = replay(new_cell_kernels(prices, firsts, knobs, frozenset(ahead)), knobs.COMMAND_S - spent)
        if best is None or measured.count > best.count:
            best = Precompiled(measured.count, p, spent, measured)
    return best


# --- the whole replay and its text -----------------------------------------------------------------------------------

@dataclass
class Outcome:
    n_serial: Replayed
    precompiled: Precompiled
    at_high: Precompiled               # the variant at PRECOMPILE_FACTOR_HIGH
    break_even_factor: float | None    # the largest PRECOMPILE_FACTOR at which the variant still gains a cell
    m: Replayed
    whole_new: Replayed                # every new cell, no budget
    whole_later: Replayed              # every later replicate, no budget
    compiled_firsts: int
    compiled_later: int
    recommend_precompile: bool

    @property
    def n(self) -> int:
        return self.precompiled.count if self.recommend_precompile else self.n_serial.count


def run_replay(cells: list[Cell], prices: Prices, knobs: Knobs) -> Outcome:
    firsts = [cell for cell in cells if cell.replicate.number == 1]
    later = [cell for cell in cells if cell.replicate.number > 1]
    serial = replay(new_cell_kernels(prices, firsts, knobs), knobs.COMMAND_S)
    variant = best_precompile(prices, firsts, knobs)
    at_high = best_precompile(prices, firsts, replace(knobs, PRECOMPILE_FACTOR=knobs.PRECOMPILE_FACTOR_HIGH))
    break_even = None
    for tenth in range(10, 61):
        factor = tenth / 10
        if best_precompile(prices, firsts, replace(knobs, PRECOMPILE_FACTOR=factor)).count > serial.count:
            break_even = factor
    later_runs = later_kernels(prices, later, knobs)
    m = replay(later_runs, knobs.COMMAND_S)
    return Outcome(serial, variant, at_high, break_even, m,
                   whole_new=replay(new_cell_kernels(prices, firsts, knobs), math.inf),
                   whole_later=replay(later_runs, math.inf),
                   compiled_firsts=sum(cell.compile_mode != EAGER for cell in firsts),
                   compiled_later=sum(cell.compile_mode != EAGER for cell in later),
                   recommend_precompile=variant.count > serial.count and at_high.count > serial.count)


def where_it_goes(replayed: Replayed) -> str:
    """The seconds a replay spent, by kind, largest first."""
    groups = {"kernels' own": ("start", "unrecorded", "first cell", "gap"), "cold compiles": ("cold",),
              "warm compiles": ("warm",), "timed runs + warm-up": ("timed", "warmup"), "energy": ("energy",),
              "profile": ("profile",), "gate/memory/FLOPs": ("parity", "memory", "flops"), "rest": ("rest",)}
    total = sum(replayed.parts.values()) or 1.0
    spent = sorted(((replayed.share(names), label) for label, names in groups.items()), reverse=True)
    return ", ".join(f"{label} {seconds:.0f} s ({seconds / total:.0%})" for seconds, label in spent if seconds >= 0.5)


def per_kernel(replayed: Replayed) -> str:
    return ", ".join(f"{label} {count}" for label, count in replayed.per_kernel.items() if count)


def report(cells: list[Cell], prices: Prices, knobs: Knobs, outcome: Outcome, grid_name: str,
           results_names: list[str]) -> list[str]:
    firsts = [cell for cell in cells if cell.replicate.number == 1]
    models = list(dict.fromkeys(cell.model for cell in firsts))
    new_kernels = {run.model: run for run in new_cell_kernels(prices, firsts, knobs)}
    later = [cell for cell in cells if cell.replicate.number == 2]
    later_runs = {run.model: run for run in later_kernels(prices, later, knobs)}
    left = ", ".join(f"{count} with {why}" for why, count in sorted(prices.left_out.items()))
    lines = [f"REPLAY (not a measurement) of {grid_name}: its {outcome.compiled_firsts} compiled cells (first "
             f"replicates) and their later replicates, each kernel alone and serial, from a fresh machine, against a "
             f"{knobs.COMMAND_S:.0f}-s command",
             f"  records: {prices.alone} measured alone on the {GPU_NAME} ({', '.join(results_names)})"
             + (f"; left out, measured beside compile processes or started ahead: {left}" if left else "")]
    unrecorded = [sample.unrecorded_s for sample in prices.samples]
    if unrecorded:
        lines.append(f"  a kernel's unrecorded cost (the log's first-cell wall less its record's start, load and cell): "
                     f"{len(unrecorded)} first cells in {len({s.log for s in prices.samples})} logs, "
                     f"{min(unrecorded):.1f}-{max(unrecorded):.1f} s, median {statistics.median(unrecorded):.1f} s"
                     + (f"; of it the compile-worker pool's start (compile.compile_workers.start_ms): median "
                        f"{statistics.median(prices.pool_start_s):.1f} s" if prices.pool_start_s else ""))
    lines.append(f"  a kernel's first cell: {prices.first_cell_s:.1f} s more than any other (the median remainder of "
                 "first cells less the others'), charged to each kernel")
    if not any(sample.with_ready for sample in prices.samples):
        lines.append("  no kernel measured alone recorded ready_s yet: its readying (the compile-worker pool, the "
                     "environment's capture) is the logs' unrecorded part; kernels before 2026-11-27 ran no compiler "
                     "warm-up (a negative KERNEL_COST_CUT_S adds one)")
    lines.append(f"  {'model':<17} {'kernel s':>8} {'new cell s':>10} {'later rep s':>11}  cells  figures")
    for model in models:
        run, later_run = new_kernels[model], later_runs.get(model)
        compiled = [cell for flag, cell in run.cells if flag]
        later_compiled = [cell for flag, cell in later_run.cells if flag] if later_run else []
        new_mean = statistics.fmean(sum(c.values()) for c in compiled) if compiled else 0.0
        later_mean = statistics.fmean(sum(c.values()) for c in later_compiled) if later_compiled else 0.0
        lines.append(f"  {model:<17} {run.own_s:8.1f} {new_mean:10.1f} {later_mean:11.1f}  {len(compiled):>5}  "
                     f"{prices.sources.get(model, 'its own records')}; kernel: {prices.kernels[model].note}")
    for note in prices.cell_notes:
        lines.append(f"  {note}")
    lines.append(f"  (kernel s: its own cost, {knobs.KERNEL_GAP_S:.2f} s between kernels included"
                 + (f", {knobs.KERNEL_COST_CUT_S:.1f} s cut" if knobs.KERNEL_COST_CUT_S else "")
                 + (f", later replicates' {knobs.LATER_KERNEL_CUT_S:.1f} s more" if knobs.LATER_KERNEL_CUT_S else "")
                 + f"; new cell s and later rep s: a compiled cell's mean, {firsts[0].settings.runs} runs a replicate)")
    serial, variant = outcome.n_serial, outcome.precompiled
    lines.append(f"new cells, alone and serial: {serial.count} of {outcome.compiled_firsts} in {knobs.COMMAND_S:.0f} s "
                 f"({per_kernel(serial)}; {serial.end_s:.0f} s used)")
    lines.append(f"  where the {serial.end_s:.0f} s go: {where_it_goes(serial)}")
    whole = outcome.whole_new
    lines.append(f"  the whole grid's {whole.count} new cells take {whole.end_s:.0f} s: "
                 f"{whole.count * knobs.COMMAND_S / whole.end_s:.1f} a {knobs.COMMAND_S:.0f}-s command on average"
                 if whole.end_s else "  no new cell")
    even = (f"it gains a cell up to x{outcome.break_even_factor:.1f}" if outcome.break_even_factor else
            "it gains no cell at any factor from x1.0 to x6.0")
    lines.append(f"new cells, {knobs.PRECOMPILE_K} cold compiles at once first (ASSUMED x{knobs.PRECOMPILE_FACTOR:.1f} "
                 f"a compile alone, not measured): {variant.count} ({variant.prefix} cells compiled in "
                 f"{variant.precompile_s:.0f} s, then measured warm), {variant.count - serial.count:+d} against the "
                 f"serial plan; at x{knobs.PRECOMPILE_FACTOR_HIGH:.1f} {outcome.at_high.count} "
                 f"({outcome.at_high.count - serial.count:+d}); {even}")
    lines.append("  the last line's N: " + (
        "this variant (it gains at the high end too)" if outcome.recommend_precompile else
        f"the serial plan (the variant is recommended only where it gains at x{knobs.PRECOMPILE_FACTOR_HIGH:.1f} too)"))
    m = outcome.m
    lines.append(f"later replicates (r2, r3 in the runner's staggered order, caches carried in, lean): {m.count} of "
                 f"{outcome.compiled_later} in {knobs.COMMAND_S:.0f} s ({per_kernel(m)}; {m.end_s:.0f} s used)")
    lines.append(f"  where the {m.end_s:.0f} s go: {where_it_goes(m)}")
    whole = outcome.whole_later
    lines.append(f"  the whole grid's {whole.count} later replicates take {whole.end_s:.0f} s: "
                 f"{whole.count * knobs.COMMAND_S / whole.end_s:.1f} a {knobs.COMMAND_S:.0f}-s command on average"
                 if whole.end_s else "  no later replicate")
    lines.append(f"targets: N >= 20 {'met' if outcome.n >= 20 else 'missed'} ({outcome.n}); M >= 45 "
                 f"{'met' if m.count >= 45 else 'missed'} ({m.count})")
    assumed = []
    if outcome.recommend_precompile:
        assumed.append(f"N rests on an assumed figure: {knobs.PRECOMPILE_K} cold compiles at once, each "
                       f"x{knobs.PRECOMPILE_FACTOR:.1f} a compile alone")
    assumed.append(f"M rests on an assumed figure: carried caches loaded in {knobs.CACHE_LOAD_S:.1f} s a kernel and "
                   "compiled warm as fast as from the machine's own")
    lines.append("assumed (no lease measured it; the next lease does): " + "; ".join(assumed))
    lines.append(f"lease replay: {outcome.n} new cells, {m.count} later replicates per {knobs.COMMAND_S:.0f}-s command")
    return lines


# --- running ------------------------------------------------------------------------------------------------------------

def parse_knob(text: str, knobs: Knobs) -> Knobs:
    """``NAME=VALUE``: a knob's figure for a what-if (None/none, true/false, or a number)."""
    name, _, value = text.partition("=")
    kinds = {item.name: item.type for item in fields(Knobs)}
    if name not in kinds:
        raise SystemExit(f"unknown knob {name!r}; knobs: {', '.join(kinds)}")
    lowered = value.strip().lower()
    parsed: Any
    if lowered in ("none", ""):
        parsed = None
    elif lowered in ("true", "false"):
        parsed = lowered == "true"
    else:
        parsed = float(value)
        if "int" in str(kinds[name]):
            parsed = int(parsed)
    return replace(knobs, **{name: parsed})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", default=GRID, help=f"grid file (default {GRID})")
    parser.add_argument("--results", nargs="+", default=list(RESULTS),
                        help="results files measured on the GPU; their folders' lease-*/ logs are read too")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a knob for a what-if (e.g. KERNEL_COST_CUT_S=8)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench_utils.records.results_file import read_records
    from bench_utils.study.grid.grid_file import load_grid

    knobs = KNOBS
    for text in args.set:
        knobs = parse_knob(text, knobs)

    def at_root(name: str) -> Path:
        path = Path(name)
        return path if path.is_absolute() else ROOT / path

    results = [at_root(name) for name in args.results]
    grid = load_grid(at_root(args.grid))
    records = read_records([path for path in results if path.exists()])
    prices = build_prices(grid.cells, records, run_logs_beside(results))
    outcome = run_replay(grid.cells, prices, knobs)
    names = [str(path.relative_to(ROOT)) if ROOT in path.parents else str(path) for path in results]
    print("\n".join(report(grid.cells, prices, knobs, outcome, args.grid, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
