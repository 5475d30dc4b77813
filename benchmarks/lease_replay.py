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
(``CLOSEST``) or else from the median cell; every such choice is printed (the prices: ``lease_prices``). The last
line:

    lease replay: N new cells, M later replicates per 570-s command

Plain functions of records, logs and cells (``tests/benchmarks/test_lease_replay.py``); no torch is imported.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields, replace
import math
from pathlib import Path
import statistics
import sys
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from bench_utils.study.grid.grid_file import Cell

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lease_prices import (EAGER, ROOT, Parts, Prices, build_prices,  # noqa: E402  (this folder's sibling)
                          run_logs_beside)

GRID = "params/hf-guide.yaml"
# The H200 leases' records (every record carries its GPU; only those on GPU_NAME count).
RESULTS = ("reports/hf-guide-h200/results.jsonl", "reports/anchors-h200/results.jsonl",
           "reports/gpu-check-h200/results.jsonl")
GPU_NAME = "H200"

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
    # A cut in each new cell's kernel's own cost. None: the compile-worker pool's start (compile.compile_workers.
    # start_ms, median 7.8 s on the H200 records), which the kernel now launches first and waits for only after its
    # model's build, as far as that build covers it: min(the pool's start, the model's load_s), until records with
    # ``ready_s`` measure the kernel as it then is. A number: that cut for every kernel (a what-if). Negative: a cost
    # added (the compiler warm-up, which these records predate).
    KERNEL_COST_CUT_S: float | None = None
    # The same, in later replicates' kernels only: they compile warm from the carried caches and start no
    # compile-worker pool (``task._compiles_warm_only`` sets TORCHINDUCTOR_COMPILE_THREADS=1). None: the pool's
    # start as the records measured it (the median of compile.compile_workers.start_ms, 7.8 s), 0 where none did.
    LATER_KERNEL_CUT_S: float | None = None
    # A kernel's launch as bench_utils/kernel.py now runs it, cut from what the leases' logs hold: measured on this
    # 2-core CPU (docs/study.md), ASSUMED the same on the H200's host (a faster CPU would cut less). Papermill's
    # process no longer builds a URI grammar as it imports (launch to the kernel's first cell 2.1-2.5 -> 0.9-1.0 s: off
    # the unrecorded part).
    LAUNCH_CUT_S: float = 1.3
    # A kernel's exit, within KERNEL_GAP_S: papermill's own timestamps, its last cell's end to its own end. Before the
    # kernel was killed after its last cell: 2.62-2.72 s, median 2.72, in the 9 executed task notebooks the H200 leases
    # of 2026-11-26 and 27 brought back (a shutdown's fixed wait; a compile-worker pool in every kernel). Killed, pool
    # or none: 0.13-0.14 s on this CPU (the smoke grid's 3 kernels), ASSUMED the same on the H200's host. The
    # difference comes off every kernel's gap, a later replicate's too.
    EXITED_S: float = 2.72
    KILLED_EXIT_S: float = 0.14
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
    # A later replicate's cell loading its carried compile caches before its warm compile (kept_caches' artifacts.bin,
    # torch.compiler.load_cache_artifacts; on CUDA the Triton kernels are bundled in them): ASSUMED negligible, the
    # warm compile then as fast as from the machine's own disk cache (the third lease's fresh "warm" processes: BEiT
    # 2.1-2.7 s, against 2.3 s warm in the cold compile's own process). No lease has carried caches in yet.
    CACHE_LOAD_S: float = 0.0
    # Every kernel's heap frozen once it is ready (``study.cell.kernel_start.long_lived_frozen``): a compiled cell's
    # own collections (its releases, its timed loop's start) then scan only what the cells made. Measured on this CPU
    # (a 2-core Xeon; a later replicate's kernel of ResNet-50 at batches 1 and 2, compiling warm; docs/study.md): a
    # compiled cell spent FROZEN_REST_CUT_S less outside its phases ("rest"; 0.634 s in 10 cells of the code before,
    # 0.075 s in 4 through the runner) and FROZEN_WARMUP_CUT_S less warming up (the mean of batch 1's 0.395 and batch
    # 2's 0.265); the freeze's one collection, FREEZE_S (0.24-0.35 s), is the kernel's. A first replicate's cells saved
    # more (0.82 against 0.10 s outside the phases), so the cut is taken off new cells too. Applied only to records
    # whose kernel did not freeze (``config.heap_frozen``; ``freeze_s`` in a kernel's first record). ASSUMED the same
    # on the H200's host: its kernels hold about as many objects (586,802 frozen after ResNet-50's compile in the third
    # lease's gc-freeze probe; 553,000-634,000 here at the freeze), but a collection's seconds also depend on the core,
    # which no lease measured yet: the next lease's freeze_s against this CPU's 0.29 s scales the cuts.
    FROZEN_REST_CUT_S: float = 0.56
    FROZEN_WARMUP_CUT_S: float = 0.33
    FREEZE_S: float = 0.29
    # The eager cells: their records' cell_s is 0.00 s (they take the compiled cells' eager side).
    EAGER_CELL_S: float = 0.0
    # The variant: before measuring, K processes compile the new cells cold at once (nothing timed), the measuring
    # kernels then compile them warm. K: 4 processes of 4 cores on the H200 host's 16.
    PRECOMPILE_K: int = 4
    # ASSUMED: a cold compile among K at once over one alone. No lease measured it; the only figure near it, 2
    # processes beside a measuring kernel on the first pipelined lease, was 1.7-2.7 (token waits and SIGSTOP pauses
    # in it; the removed pipeline pricing took 2.0 at its point). The variant is the plan recommended only where it
    # gains a cell at the high end too (PRECOMPILE_FACTOR_HIGH: that lease's 2.7), so that no N leans on the point.
    PRECOMPILE_FACTOR: float = 2.0
    PRECOMPILE_FACTOR_HIGH: float = 2.7
    # A compile process's boot before its first compile, the model's build apart (the pipelined lease's ViT process:
    # 26 s, token waits in it; the removed pipeline pricing took 20 s at its point).
    PROCESS_SETUP_S: float = 20.0


KNOBS = Knobs()
# Models no H200 lease measured, priced from the closest measured one (same family): else from the median cell.
CLOSEST = {"maskformer": "mask2former",            # MaskFormer is Mask2Former's predecessor (1245 against 1264 ops)
           "detr-resnet-101": "detr",              # the same DETR on a deeper backbone
           "conditional-detr": "detr",             # a DETR variant (881 against 757 eager ops)
           "owlvit": "vit"}                        # a CLIP ViT image encoder with detection heads


# --- a cell's seconds under the plan ----------------------------------------------------------------------------------

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
            "warmup": frozen(p, "warmup_s", knobs.FROZEN_WARMUP_CUT_S), "timed": p.timed_per_run_s * cell.settings.runs,
            "parity": p.parity_s, "memory": p.memory_s, "flops": p.flops_s, "energy": energy,
            "profile": p.profile_s if knobs.FULL_PROFILE else 0.0, "rest": frozen(p, "rest_s", knobs.FROZEN_REST_CUT_S)}


def later_cell_parts(prices: Prices, cell: Cell, knobs: Knobs) -> dict[str, float]:
    """A later replicate's seconds by part, lean: a warm compile from the carried caches, warm-up, timed runs, the
    gate and the rest; energy, profile, memory and FLOPs only as the ``LEAN_*`` knobs say."""
    p = prices.parts[(cell.model, cell.compile_mode, cell.batch_size)]
    warm = p.warm_s if p.warm_s is not None else prices.warm[(cell.model, cell.compile_mode)]
    return {"cold": 0.0, "warm": warm + knobs.CACHE_LOAD_S, "warmup": frozen(p, "warmup_s", knobs.FROZEN_WARMUP_CUT_S),
            "timed": p.timed_per_run_s * cell.settings.runs, "parity": p.parity_s,
            "memory": p.memory_s if knobs.LEAN_MEMORY else 0.0,
            "flops": p.flops_s if knobs.LEAN_FLOPS else 0.0, "energy": knobs.ENERGY_LEAN_S,
            "profile": p.profile_s if knobs.LEAN_PROFILE else 0.0, "rest": frozen(p, "rest_s", knobs.FROZEN_REST_CUT_S)}


def frozen(parts: Parts, name: str, cut_s: float) -> float:
    """A recorded part less what a frozen heap takes off it, where its records' kernels did not freeze theirs
    (``Parts.heap_frozen``), never below nothing."""
    return max(0.0, getattr(parts, name) - cut_s * (1.0 - parts.heap_frozen))


# --- the replay -------------------------------------------------------------------------------------------------------

@dataclass
class KernelRun:
    """One kernel as the replay takes it: its own cost (start, readying, load, gap), then its cells in order."""

    model: str
    label: str                                   # the model, and its replicate where later
    own: dict[str, float]                        # "start", "unrecorded", "first cell", "freeze", "gap"
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
    now, count = 0.0, 0
    per_kernel: dict[str, int] = {}
    parts: dict[str, float] = {}
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
    """A kernel's own seconds by part: its recorded start (startup, readying, load), the unrecorded part, its first
    cell's extra, the heap's freeze (where its records do not hold it), and the gap to the next. ``new_cut_s`` (a new
    cell's kernel) or ``later_cut_s`` (a later replicate's) comes off the unrecorded part first (the compile-worker
    pool is there), then the others."""
    kernel = prices.kernels[model]
    own = {"unrecorded": max(0.0, kernel.unrecorded_s - knobs.LAUNCH_CUT_S), "start": kernel.start_s,
           "first cell": kernel.first_cell_s}
    cut = later_cut_s(prices, model, knobs) if later else new_cut_s(prices, model, knobs)
    if cut < 0:  # a cost added (a what-if: a compiler warm-up the records predate)
        own["unrecorded"] -= cut
    for name in own:
        taken = min(own[name], max(0.0, cut))
        own[name] -= taken
        cut -= taken
    return {**own, "freeze": knobs.FREEZE_S * (1.0 - kernel.frozen_share),
            "gap": max(0.0, knobs.KERNEL_GAP_S - exit_cut_s(knobs))}


def exit_cut_s(knobs: Knobs) -> float:
    """What a kernel's exit no longer costs: the leases' recorded exit less a killed kernel's."""
    return max(0.0, knobs.EXITED_S - knobs.KILLED_EXIT_S)


def pool_start_s(prices: Prices) -> float:
    """The compile-worker pool's start, as the records measured it (the median); 0 where none did."""
    return statistics.median(prices.pool_start_s) if prices.pool_start_s else 0.0


def new_cut_s(prices: Prices, model: str, knobs: Knobs) -> float:
    """What a new cell's kernel does not pay: ``KERNEL_COST_CUT_S``, else the part of the pool's start that its
    model's build covers (``study.cell.kernel_start``: the pool boots while the model is built)."""
    if knobs.KERNEL_COST_CUT_S is not None:
        return knobs.KERNEL_COST_CUT_S
    kernel = prices.kernels[model]
    return 0.0 if kernel.with_ready else min(pool_start_s(prices), kernel.load_s)  # ready_s: measured as it runs


def later_cut_s(prices: Prices, model: str | None, knobs: Knobs) -> float:
    """What a later replicate's kernel does not pay: ``LATER_KERNEL_CUT_S``, else the pool's recorded start (none
    where the model's records already measure a kernel as it now runs)."""
    if knobs.LATER_KERNEL_CUT_S is not None:
        return knobs.LATER_KERNEL_CUT_S
    return 0.0 if model is not None and prices.kernels[model].with_ready else pool_start_s(prices)


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
    """The later replicates' kernels, in the runner's order (staggered replicates: ``grid_file.replicated``)."""
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
    serial = replay(new_cell_kernels(prices, firsts, knobs), knobs.COMMAND_S)
    best = Precompiled(serial.count, 0, 0.0, serial)
    for p in range(1, len(order) + 1):
        ahead = order[:p]
        spent = precompile_s(prices, ahead, knobs)
        if spent > knobs.COMMAND_S:
            break
        measured = replay(new_cell_kernels(prices, firsts, knobs, frozenset(ahead)), knobs.COMMAND_S - spent)
        if measured.count > best.count:
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
    groups = {"kernels' own": ("start", "unrecorded", "first cell", "freeze", "gap"), "cold compiles": ("cold",),
              "warm compiles": ("warm",), "timed runs + warm-up": ("timed", "warmup"), "energy": ("energy",),
              "profile": ("profile",), "gate/memory/FLOPs": ("parity", "memory", "flops"), "rest": ("rest",)}
    total = sum(replayed.parts.values()) or 1.0
    spent = sorted(((replayed.share(names), label) for label, names in groups.items()), reverse=True)
    return ", ".join(f"{label} {seconds:.0f} s ({seconds / total:.0%})" for seconds, label in spent if seconds >= 0.5)


def per_kernel(replayed: Replayed) -> str:
    return ", ".join(f"{label} {count}" for label, count in replayed.per_kernel.items() if count)


def on_average(whole: Replayed, what: str, knobs: Knobs) -> str:
    """The whole grid's ``what`` replayed end to end, as commands' worth on average."""
    if not whole.end_s:
        return f"  no {what}"
    return (f"  the whole grid's {whole.count} {what} take {whole.end_s:.0f} s: "
            f"{whole.count * knobs.COMMAND_S / whole.end_s:.1f} a {knobs.COMMAND_S:.0f}-s command on average")


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
        lines.append("  a kernel's unrecorded cost (the log's first-cell wall less its record's start, load and cell): "
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
    lines.append(f"  (kernel s: its own cost, {knobs.KERNEL_GAP_S:.2f} s between kernels included, less the kernel's "
                 f"launch cut on this CPU ({knobs.LAUNCH_CUT_S:.1f} s) and its exit's {exit_cut_s(knobs):.1f} s "
                 f"(the leases' notebooks' {knobs.EXITED_S:.2f} s against {knobs.KILLED_EXIT_S:.2f} s killed)"
                 + (f", {knobs.KERNEL_COST_CUT_S:.1f} s cut" if knobs.KERNEL_COST_CUT_S is not None else
                    ", new cells' less the pool's start their model's build covers")
                 + (f", later replicates' {later_cut_s(prices, None, knobs):.1f} s less (no compile-worker pool)"
                    if later_cut_s(prices, None, knobs) else "")
                 + f"; new cell s and later rep s: a compiled cell's mean, {firsts[0].settings.runs} runs a replicate)")
    serial, variant = outcome.n_serial, outcome.precompiled
    lines.append(f"new cells, alone and serial: {serial.count} of {outcome.compiled_firsts} in {knobs.COMMAND_S:.0f} s "
                 f"({per_kernel(serial)}; {serial.end_s:.0f} s used)")
    lines.append(f"  where the {serial.end_s:.0f} s go: {where_it_goes(serial)}")
    lines.append(on_average(outcome.whole_new, "new cells", knobs))
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
    lines.append(on_average(outcome.whole_later, "later replicates", knobs))
    lines.append(f"targets: N >= 20 {'met' if outcome.n >= 20 else 'missed'} ({outcome.n}); M >= 45 "
                 f"{'met' if m.count >= 45 else 'missed'} ({m.count})")
    assumed = []
    if outcome.recommend_precompile:
        assumed.append(f"N rests on an assumed figure: {knobs.PRECOMPILE_K} cold compiles at once, each "
                       f"x{knobs.PRECOMPILE_FACTOR:.1f} a compile alone")
    assumed.append(f"M rests on an assumed figure: a cell's carried caches loaded in {knobs.CACHE_LOAD_S:.1f} s and "
                   "a warm compile from them as fast as from the machine's own cache")
    if knobs.LAUNCH_CUT_S or exit_cut_s(knobs):
        assumed.append("both rest on a kernel's launch cut and a killed kernel's exit as this CPU measured them, not "
                       "yet the H200")
    if knobs.FROZEN_REST_CUT_S or knobs.FROZEN_WARMUP_CUT_S:
        assumed.append(f"both rest on the frozen heap's cut as this CPU measured it ({knobs.FROZEN_REST_CUT_S:.2f} s "
                       f"outside the phases and {knobs.FROZEN_WARMUP_CUT_S:.2f} s of warm-up a compiled cell, "
                       f"{knobs.FREEZE_S:.2f} s a kernel)")
    if knobs.KERNEL_COST_CUT_S is None or knobs.LATER_KERNEL_CUT_S is None:
        assumed.append("both rest on the kernel's order since these records (a new cell's kernel builds its model "
                       "while the compile-worker pool boots; a later replicate's starts none), priced from the "
                       f"pool's recorded start ({pool_start_s(prices):.1f} s) until records with ready_s measure it")
    lines.append("assumed (no lease measured it; the next lease does): " + "; ".join(assumed))
    lines.append(f"lease replay: {outcome.n} new cells, {m.count} later replicates per {knobs.COMMAND_S:.0f}-s command")
    return lines


# --- running ----------------------------------------------------------------------------------------------------------

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
    prices = build_prices(grid.cells, records, run_logs_beside(results), CLOSEST, GPU_NAME)
    outcome = run_replay(grid.cells, prices, knobs)
    names = [str(path.relative_to(ROOT)) if ROOT in path.parents else str(path) for path in results]
    print("\n".join(report(grid.cells, prices, knobs, outcome, args.grid, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
