"""An a-priori price of cells never run on a GPU: ``run GRID --dry-run --device-model H100``.

Without a record of a cell on a device, its cost is modelled from what the model does and what the
device can do. ``data/model_costs.json`` holds, per model, the FLOPs of one forward pass (convolutions
apart from the rest, since TF32 may apply to one only), the bytes its eager operators read and write,
its operator count and its build time, measured once on a CPU by ``benchmarks/model_costs.py``; the
device's peaks are the datasheets' (``measurement.peaks``). One call takes

    max(device time, host time) + a synchronisation,
    device time = max(FLOPs / (peak x efficiency), bytes / (bandwidth x efficiency)) + kernels x a floor,
    host time   = the host's cost per launched kernel x the kernels (eager: one per operator; Inductor
                  fuses them; a CUDA-graph replay launches one graph),

and a cell is priced step by step from its plan (``variants.cell_plan``, the one ``study.cell`` runs): each step's
calls of each side at that side's seconds a call, and what a step costs beside its calls: the FLOP count's
dispatch (one eager call under a dispatch mode), the memory probe's own cost, the energy windows (CUDA only: 8 to
11 steps of NVML's 100 ms counter a side, with the polling for the steps at their ends), the profiler's own cost,
the cold compile (and the warm one at the first batch size of a mode), a portable cache's fresh process. A kernel
adds its start and the model build. Every rate is an
assumption; ``OPTIMISTIC``, ``TYPICAL`` and ``PESSIMISTIC`` give the low, point and high figures.

Calibration: cells recorded on the device (any study, any results file) replace the prior for
themselves, and scale it for the rest by the ratio recorded / prior over them (the median ratio;
the range becomes the ratios' spread, at least +-25 %): over the same model's recorded cells where it has
some, else over all (on the H200 Mask2Former took 2.0 to 2.4 times its prior, its cold compile 65 to 78 s
where the per-operator fit says 30; most models 0.8 to 1.4). No torch is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import json
import math
from pathlib import Path
import statistics
from typing import Any, Iterable

from ...errors import UserError
from ...measurement.peaks import FP64_TFLOPS, MEMORY_BANDWIDTH_GBS, PEAK_TFLOPS, gpu_key, peak_tflops
from ...records.key import measured_as_eager_side
from ...records.schema import PhasesBlock, Record
from ...variants import cell_plan as plan
from ...variants.cell_plan import (COMPILED, EAGER, ENERGY_CHUNK_MS, ENERGY_STEPS_MAX, ENERGY_STEPS_MIN, FLOAT64,
                                   CellPlan, Step)
from ...vocabulary import CUDA_GRAPH_MODES, TF32_SWITCHES as TF32_POLICIES, CompileMode, Replicate, Shapes, Tf32Policy

TF32_BY_NAME: dict[str, tuple[bool, bool]] = {str(policy): switches for policy, switches in TF32_POLICIES.items()}
MODEL_COSTS = Path(__file__).with_name("data") / "model_costs.json"
# Cold compile of a mode over the default mode's: max-autotune benchmarks candidate kernels for each
# matmul and convolution; AOTInductor exports first. Reduce-overhead's recording adds nothing measurable
# (ResNet-50 on the H200: 7.4 and 10.8 s against the default mode's 9.5 and 11.0).
MODE_COMPILE_FACTOR = {"default": 1.0, "reduce-overhead": 1.0, "max-autotune": 4.0,
                       "max-autotune-no-cudagraphs": 4.0, "aot-inductor": 1.5}
MEMORY_PROBE_S = 0.5          # a memory probe beside its calls: garbage collection, the allocator's reset and figures
COUNTER_STEP_S = 0.1          # NVML's energy counter steps every 100 ms on A100, H100 and H200 (the H200's records)
ENERGY_POLL_STEPS = 2.5       # a side's polling beside its window: the wait for a step at entry (half a step on
                              # average) and the step after it (measured), then the step after the exit (dates the last)
PROFILE_SIDE_S = 0.3          # the profiler's start, stop and event reduction per side (an assumption: ResNet-50's
                              # two sides cost 0.65 s on this project's CPU machine, 0.2 s of it its 8 calls)
SYNC_S = 20e-6                # a per-call synchronisation, each timed call from an idle device
FLOP_COUNT_S_PER_OP = 50e-6   # FlopCounterMode's Python dispatch per operator
CELL_OVERHEAD_S = 1.0         # the record, dynamo reset, garbage collection, CUDA cache release
SHARED_EAGER_S = 0.5          # an eager cell that takes a compiled cell's pairs: its record only
RATIO_SPREAD = 1.25           # a calibrated range is at least the median ratio /1.25 to x1.25
COMPILE_FIXED_S = 4.9         # a cold compile on a GPU host: a fixed part, and a part per eager operator (least
COMPILE_S_PER_OP = 0.0304     # squares of the log over the H200's 27 compiled cells: each within 0.6 to 1.9 of it)


@dataclass(frozen=True)
class Span:
    """Seconds: a low figure, the point estimate and a high one."""

    low: float
    point: float
    high: float

    def __add__(self, other: "Span") -> "Span":
        return Span(self.low + other.low, self.point + other.point, self.high + other.high)

    def at(self, end: int) -> float:
        """The figure at one end: 0 low, 1 point, 2 high (``ENDS``' order)."""
        return (self.low, self.point, self.high)[end]

    @classmethod
    def exact(cls, seconds: float) -> "Span":
        return cls(seconds, seconds, seconds)


ZERO = Span.exact(0.0)


@dataclass(frozen=True)
class Assumptions:
    """Every rate the prior assumes; one instance per end of its range."""

    flop_efficiency: float       # share of the dense peak a forward pass's matmuls and convolutions reach
    bandwidth_efficiency: float  # share of the peak memory bandwidth its traffic reaches
    host_s_per_kernel: float     # Python, dispatch and launch per eager operator (HF models: ~20-30 us)
    fused_kernel_share: float    # Inductor's kernels per eager operator (fusion)
    graph_kernel_share: float    # a CUDA-graph replay's host cost, per eager operator, as a share of eager's
    device_s_per_kernel: float   # the device's floor per kernel (launch latency, tails of small grids)
    compiled_traffic: float      # a compiled pass's bytes over eager's (fused operators skip memory)
    compile_factor: float        # a GPU host's cold compile over the lent H200 host's (16 cores, torch 2.11)
    warm_compile_share: float    # a warm compile (the FX graph cache hit) over a cold one
    start_s: float               # kernel boot: papermill, ipykernel, torch import, CUDA context
    build_factor: float          # a GPU host's model build over this CPU's
    energy_steps: float          # counter steps in a side's energy window: 8 where the power is steady, up to 11


# Rates: the guide's published A100, V100 and T4 latencies (torch 2.0.1; ResNet-50 at batch 1 eager: 6.5 ms
# over 227 operators, ~29 us each on the A100's host) fix the efficiencies and host costs: with these ends
# the range holds ~90 % of the guide's 200 eager and compiled latencies, and the point is right within
# 25 % on the geometric mean (tests/study/pricing/test_prior.py checks it). The host's costs come
# from the first GPU records (reports/hf-guide-h200 and gpu-check-h200: 13 compiled cells on the lent H200's
# 16-core host, torch 2.11). A cold compile there followed the model's eager operators, 4.9 s + 30 ms each,
# loosely (ResNet 7 to 11 s, ViT 11 to 14, BEiT 17 to 22, Segformer 10 to 17, DETR 18 to 23, Mask2Former 65
# to 78: from 0.63 to 1.87 of the fit; the second lease's 14 cells moved it from 6.1 s + 19 ms), not the table's CPU
# compile (C++ on 2 shared cores: 0.05 of it for ConvNeXT, 0.37 for DETR); a warm one took 0.19 of the cold
# (0.12 to 0.27); a kernel's boot 5.7 to 8.0 s and its model build 3.0 to 4.7 s whatever the table's CPU took
# (0.1 to 4.5 s), so a fixed start and a small share of the build. The range: 0.6 to twice as long. Energy windows: the fewest
# steps to the most, the point a step above the fewest (an assumption until records of ``energy.*.steps``).
OPTIMISTIC = Assumptions(0.7, 0.8, 8e-6, 0.3, 0.03, 2e-6, 0.35, 0.6, 0.12, 7.0, 0.2, ENERGY_STEPS_MIN)
TYPICAL = Assumptions(0.35, 0.6, 20e-6, 0.5, 0.08, 4e-6, 0.5, 1.0, 0.2, 9.5, 0.3, ENERGY_STEPS_MIN + 1)
PESSIMISTIC = Assumptions(0.15, 0.35, 35e-6, 0.8, 0.2, 8e-6, 0.7, 2.0, 0.3, 20.0, 1.0, ENERGY_STEPS_MAX)
ENDS = (OPTIMISTIC, TYPICAL, PESSIMISTIC)


@dataclass(frozen=True)
class CellShape:
    """What the prior needs of a cell: from a grid's ``Cell`` or from a record."""

    model: str
    batch_size: int
    compile_mode: str
    dtype: str
    tf32: str
    runs: int
    warmup: int
    profile: bool = True
    shapes: str = Shapes.STATIC
    portable_cache: bool = False
    cold_kept: bool = False     # an earlier replicate kept its cold compile: it compiles warm only (``kept_caches``)
    first_replicate: bool = True  # a later one leaves the figures taken once per cell to the first (``cell_plan``)

    @classmethod
    def of_cell(cls, cell: Any, kept_before: bool | None = None) -> "CellShape":
        """A grid's cell; a static torch.compile cell's cold compile kept where ``kept_before`` (None: a later
        replicate's first ran before it)."""
        settings = cell.settings
        first = settings.replicate == Replicate.R1
        kept = plan.timed_in_rows(cell.compile_mode, settings.shapes) and (
            not first if kept_before is None else kept_before)
        return cls(cell.model, cell.batch_size, cell.compile_mode, cell.dtype, settings.tf32, settings.runs,
                   settings.warmup, settings.profile, settings.shapes, settings.portable_cache, cold_kept=kept,
                   first_replicate=first)

    @classmethod
    def of_record(cls, record: Record) -> "CellShape":
        """The shape a record was measured with, its portable cache where it has its block. Profiled, as the
        default is: a record's config does not say (a record without a profile block may have lost it to a
        failure after paying for most of it), and a cell not profiled is ~1 s shorter, within calibration's spread."""
        cell, config = record.cell, record.config
        compiled = record.compile
        return cls(cell.model, cell.batch_size, cell.compile_mode, cell.dtype, str(config.tf32 or "default"),
                   int(config.runs or 0), int(config.warmup or 0), shapes=cell.shapes,
                   portable_cache=compiled is not None and compiled.portable_cache is not None,
                   cold_kept=compiled is not None and compiled.cold_measured_in is not None,
                   # a later replicate that probed its memory was measured by the plan of the first
                   first_replicate=cell.replicate == Replicate.R1 or (record.memory is not None
                                                                      and record.memory.probed))

    def plan(self, shares_pairs: bool, warm: bool) -> CellPlan:
        """The steps the cell runs on a GPU (``variants.cell_plan``): ``warm``, the first batch size of its mode in
        its kernel (which compiles warm too; a dynamic batch's later ones call its compilation)."""
        return plan.plan_cell(self.compile_mode, warmup=self.warmup, runs=self.runs, cuda=True, profile=self.profile,
                              shapes=self.shapes, portable_cache=self.portable_cache, warm_compile=warm,
                              reuses_compilation=self.shapes == Shapes.DYNAMIC and not warm,
                              shares_pairs=shares_pairs, cold_kept=self.cold_kept,
                              first_replicate=self.first_replicate)


def warm_share(cell: Any, kept_before: bool | None = None) -> float | None:
    """The share of a cold compile a grid's ``cell`` pays, where another process kept its cold compile
    (``CellShape.of_cell``: a later replicate): a warm compile's, 0.19 of the cold on the H200 (``TYPICAL``); None
    where it compiles as its records did (``recorded.estimate_cell_seconds``)."""
    return TYPICAL.warm_compile_share if CellShape.of_cell(cell, kept_before).cold_kept else None


def known_devices() -> list[str]:
    return list(PEAK_TFLOPS)


def device_key(name: str) -> str:
    """The datasheet key of ``--device-model NAME`` ("H100", "A100-SXM4-80GB", "L4"...); UserError
    naming the known ones otherwise."""
    key = gpu_key(name)
    if key is None:
        raise UserError(f"--device-model {name!r} is not a GPU with datasheet peaks here; known: "
                        f"{', '.join(known_devices())}")
    return key


def load_model_costs(path: Path = MODEL_COSTS) -> dict[str, dict[str, Any]]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["models"]


@dataclass
class Prior:
    """The a-priori cost of cells and kernel starts on one GPU, calibrated by its recorded cells."""

    device: str                                      # a ``PEAK_TFLOPS`` key
    costs: dict[str, dict[str, Any]] = field(default_factory=load_model_costs)
    model_ratios: dict[str, list[float]] = field(default_factory=dict)  # recorded / prior point, per model
    start_ratios: list[float] = field(default_factory=list)   # the same for kernel starts

    # --- one call ---------------------------------------------------------------------

    def call_seconds(self, shape: CellShape, side: str, ends: Assumptions) -> float | None:
        """One forward pass of ``side`` (eager, or the cell's compile mode); None where the table has
        no such model or the device no peak for the dtype."""
        row = self.costs.get(shape.model)
        matmul_tf32, conv_tf32 = TF32_BY_NAME.get(shape.tf32, TF32_POLICIES[Tf32Policy.DEFAULT])
        conv_peak = peak_tflops(self.device, shape.dtype, conv_tf32)
        other_peak = peak_tflops(self.device, shape.dtype, matmul_tf32)
        if row is None or not conv_peak or not other_peak:
            return None
        batch = shape.batch_size
        conv = (row["conv_gflops_fixed"] + row["conv_gflops_per_image"] * batch) * 1e9
        other = (row["other_gflops_fixed"] + row["other_gflops_per_image"] * batch) * 1e9
        traffic = (row["eager_mb_fixed"] + row["eager_mb_per_image"] * batch) * 1e6
        traffic *= 0.5 if shape.dtype in ("float16", "bfloat16") else 1.0
        ops = row["eager_ops"]
        kernels = ops if side == CompileMode.EAGER else ops * ends.fused_kernel_share
        if side != CompileMode.EAGER:
            traffic *= ends.compiled_traffic
        compute = (conv / conv_peak + other / other_peak) / 1e12 / ends.flop_efficiency
        memory = traffic / (MEMORY_BANDWIDTH_GBS[self.device] * 1e9 * ends.bandwidth_efficiency)
        device = max(compute, memory) + kernels * ends.device_s_per_kernel
        host_kernels = ops * ends.graph_kernel_share if side in CUDA_GRAPH_MODES else kernels
        return max(device, host_kernels * ends.host_s_per_kernel) + SYNC_S

    def fp64_call_seconds(self, shape: CellShape, ends: Assumptions) -> float:
        """The accuracy gate's float64 reference: every FLOP on the float64 units, twice the bytes."""
        row = self.costs[shape.model]
        batch = shape.batch_size
        flops = sum(row[f"{kind}_gflops_fixed"] + row[f"{kind}_gflops_per_image"] * batch
                    for kind in ("conv", "other")) * 1e9
        traffic = 2 * (row["eager_mb_fixed"] + row["eager_mb_per_image"] * batch) * 1e6
        device = max(flops / (FP64_TFLOPS[self.device] * 1e12 * ends.flop_efficiency),
                     traffic / (MEMORY_BANDWIDTH_GBS[self.device] * 1e9 * ends.bandwidth_efficiency))
        return max(device, row["eager_ops"] * ends.host_s_per_kernel)

    # --- one cell, one kernel start -----------------------------------------------------

    @staticmethod
    def energy_side_seconds(call_s: float, steps: float) -> float:
        """One side's energy window (``cell.memory_and_energy``): ``steps`` of the counter in whole chunks of calls
        (a call longer than a chunk is one), and the polling for the steps at its ends."""
        chunk_s = max(call_s, ENERGY_CHUNK_MS / 1e3)
        return math.ceil(steps * COUNTER_STEP_S / chunk_s - 1e-9) * chunk_s + ENERGY_POLL_STEPS * COUNTER_STEP_S

    @staticmethod
    def compile_seconds(row: dict[str, Any], compile_mode: str, ends: Assumptions) -> float:
        """A cold compile on a GPU host: a fixed part and a part per eager operator, times the mode's factor."""
        return ((COMPILE_FIXED_S + COMPILE_S_PER_OP * row["eager_ops"]) * ends.compile_factor
                * MODE_COMPILE_FACTOR.get(compile_mode, 1.0))

    def _cell_at(self, shape: CellShape, shares_pairs: bool, warm: bool,
                 ends: Assumptions) -> tuple[float, float] | None:
        """The cell's seconds apart from its energy windows, and those windows' (a fixed design cost that
        calibration must not scale: records measured with other windows would scale every cell): each step of its
        plan priced."""
        eager = self.call_seconds(shape, EAGER, ends)
        if eager is None:
            return None
        cell_plan = shape.plan(shares_pairs, warm)
        if not cell_plan.steps:  # an eager cell taking a compiled cell's pairs
            return SHARED_EAGER_S, 0.0
        compiled = self.call_seconds(shape, shape.compile_mode, ends) if cell_plan.compilation else None
        per_call = {EAGER: eager, COMPILED: compiled or 0.0, FLOAT64: self.fp64_call_seconds(shape, ends)}
        work, energy = CELL_OVERHEAD_S, 0.0
        for step in cell_plan.steps:
            if step.name == plan.ENERGY:
                energy += sum(self.energy_side_seconds(per_call[side], ends.energy_steps) for side in step.sides)
            else:
                work += self._step_seconds(step, shape, per_call, ends)
        return work, energy

    def _step_seconds(self, step: Step, shape: CellShape, per_call: dict[str, float], ends: Assumptions) -> float:
        """One step of a cell's plan: its calls of each side, and what it costs beside them. A step this has no
        price for is an error: the cell gained a step, and the prior must learn its cost."""
        calls = (step.calls or 0) * sum(per_call[side] for side in step.sides)
        row = self.costs[shape.model]
        cold = self.compile_seconds(row, shape.compile_mode, ends)
        if step.name == plan.FLOP_COUNT:
            return calls + row["eager_ops"] * FLOP_COUNT_S_PER_OP
        if step.name in (plan.REFERENCES, plan.WARMUP, plan.TIMED, plan.GATE):
            return calls
        if step.name in (plan.EAGER_MEMORY, plan.MEMORY):
            return calls + MEMORY_PROBE_S
        if step.name == plan.PROFILE:
            return calls + len(step.sides) * PROFILE_SIDE_S
        # a compile's fit is of its recorded cost, which leaves out its calls' own time: a few milliseconds
        if step.name == plan.COLD_COMPILE:
            return cold
        if step.name == plan.WARM_COMPILE:
            return cold * ends.warm_compile_share
        if step.name == plan.SHARED_FIRST_CALLS:  # may compile again at a new batch size (it does, where torch
            return cold                           # guards on the batch): priced as the compile it may be
        if step.name == plan.FRESH_PROCESS:  # a new interpreter (torch, a CUDA context) compiling from a warm cache
            return ends.start_s + cold * ends.warm_compile_share
        raise ValueError(f"the prior has no price for a cell's step {step.name!r}")

    def parts(self, shape: CellShape, shares_pairs: bool, warm: bool) -> tuple[Span, Span] | None:
        """The cell's work apart from energy, and its energy windows, each low, point and high."""
        low, point, high = (self._cell_at(shape, shares_pairs, warm, ends) for ends in ENDS)
        if low is None or point is None or high is None:  # the model or the dtype has no figures, at every end
            return None
        return Span(low[0], point[0], high[0]), Span(low[1], point[1], high[1])

    def raw_cell(self, shape: CellShape, shares_pairs: bool = False, warm: bool = True) -> Span | None:
        """The uncalibrated prior of one cell; None where the model or dtype has no figures."""
        parts = self.parts(shape, shares_pairs, warm)
        return None if parts is None else parts[0] + parts[1]

    def raw_start(self, model: str) -> Span | None:
        """A kernel's own cost: its start, the device's preparation and the model's build."""
        row = self.costs.get(model)
        if row is None:
            return None
        low, point, high = (ends.start_s + row["build_s_cpu"] * ends.build_factor for ends in ENDS)
        return Span(low, point, high)

    def cell(self, shape: CellShape, shares_pairs: bool = False, warm: bool = True) -> Span | None:
        """The cell's prior, its work scaled by the ratio observed on recorded cells where there are any: the
        same model's, else every model's (its energy windows as they are: their length is the design's, not
        the device's)."""
        parts = self.parts(shape, shares_pairs, warm)
        ratios = self.model_ratios.get(shape.model) or self.cell_ratios
        return None if parts is None else _calibrated(parts[0], ratios) + parts[1]

    def work_ratio(self, model: str) -> Span:
        """The factors ``cell`` scales a cell's work of ``model`` by at each end (1 where nothing calibrates it)."""
        return _calibrated(Span.exact(1.0), self.model_ratios.get(model) or self.cell_ratios)

    def start(self, model: str) -> Span | None:
        """``raw_start`` calibrated by the recorded starts."""
        raw = self.raw_start(model)
        return None if raw is None else _calibrated(raw, self.start_ratios)

    @property
    def calibrated_on(self) -> int:
        return len(self.cell_ratios)

    @property
    def cell_ratios(self) -> list[float]:
        """Recorded / prior point over every recorded cell, whatever its model."""
        return [ratio for ratios in self.model_ratios.values() for ratio in ratios]

    def calibrate(self, records: Iterable[Record]) -> "Prior":
        """A copy scaled by ``records`` (ok records of this device with ``phases``): recorded / prior, for the
        work apart from the energy windows on both sides (the first H200 records spent 10.8 s a cell in
        5-second windows that later cells no longer take) and from a wait for a compile process (an earlier design's).
        A kernel started ahead (an earlier design's) recorded only part of its start: not a start's figure."""
        starts: list[float] = []
        by_model: dict[str, list[float]] = {}
        for record in records:
            phases, shape = record.phases or PhasesBlock(), CellShape.of_record(record)
            shared = measured_as_eager_side(record)  # an eager cell on a compiled cell's pairs: its record only
            parts = self.parts(shape, shared, record.compile is not None and record.compile.warm_ms is not None)
            work = float(phases.cell_s or 0) - float(phases.energy_s or 0) - float(phases.compile_wait_s or 0)
            if parts is not None and work > 0 and not shared:
                by_model.setdefault(shape.model, []).append(work / parts[0].point)
            started = float(phases.startup_s or 0) + float(phases.ready_s or 0) + float(phases.load_s or 0)
            start = self.raw_start(shape.model)
            if start is not None and phases.startup_s and phases.started_ahead_s is None:
                starts.append(started / start.point)
        return replace(self, start_ratios=starts, model_ratios=by_model)


def _calibrated(prior: Span, ratios: list[float]) -> Span:
    if not ratios:
        return prior
    median = statistics.median(ratios)
    low, high = min(min(ratios), median / RATIO_SPREAD), max(max(ratios), median * RATIO_SPREAD)
    return Span(prior.point * low, prior.point * median, prior.point * high)
