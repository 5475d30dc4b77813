"""The small a-priori price of a GPU cell and a kernel's start: what ``prices`` falls back on where no record does.

A cell is priced from its plan (``variants.cell_plan``, the one ``study.cell`` runs), each figure a ``Span`` (low,
point, high): each step's calls of each side at that side's seconds a call, and what the step costs beside them.

- A call takes the slowest of its FLOPs against the datasheet peak (``measurement.peaks``; convolutions apart, as TF32
  applies), its eager operators' bytes against the datasheet bandwidth, and the host's launches (a cost per eager
  operator; Inductor fuses them, a CUDA-graph replay launches one graph), at the rates of ``ENDS``; the gate's float64
  reference on the float64 units. FLOPs, bytes, operators and build time: ``data/model_costs.json``, measured once on a
  CPU (``benchmarks/model_costs.py``). Of the guide's 200 published A100, V100 and T4 latencies the range holds ~90 %.
- A cold compile: 4.9 s + 30.4 ms per eager operator (least squares of the log over the H200's 27 compiled cells, each
  within 0.6 to 1.9 of it: Mask2Former's 65 to 78 s the furthest), 0.6 to twice that, times a factor per mode
  (max-autotune benchmarks kernels); a warm one (the FX graph cache hit) 0.2 of it (0.12 to 0.27 on the H200).
- Once per cell, in its first replicate only (``plan_cell(first_replicate=False)`` leaves them out): the FLOP count
  50 us an operator, a memory probe 0.5 s beside its calls, an energy window 1.05 to 1.35 s a side (8 to 11 steps of
  NVML's 100 ms counter and 2.5 of polling), the profile 0.3 s a side beside its calls, a portable cache's fresh
  process (a boot and a warm compile).
- A cell 1 s beside its steps (its record, dynamo's reset, the allocator); an eager cell that takes a compiled cell's
  pairs 0.5 s (its record only). A kernel's start: a boot of 7 to 20 s (9.5) and a
  share of the table's model build (H200: boot 5.3 to 9 s, build 3 to 5.7 s, whatever the table's CPU took). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import json
from pathlib import Path
from typing import Any

from ...errors import UserError
from ...measurement.peaks import FP64_TFLOPS, MEMORY_BANDWIDTH_GBS, PEAK_TFLOPS, gpu_key, peak_tflops
from ...records.schema import Record
from ...variants import cell_plan
from ...vocabulary import CUDA_GRAPH_MODES, TF32_SWITCHES, Replicate, Shapes


@dataclass(frozen=True)
class Span:
    """Seconds: a low figure, the point estimate and a high one."""

    low: float
    point: float
    high: float

    def __add__(self, other: Span) -> Span:
        return Span(self.low + other.low, self.point + other.point, self.high + other.high)

    def __sub__(self, other: Span) -> Span:
        return Span(self.low - other.low, self.point - other.point, self.high - other.high)

    def __mul__(self, factor: float | Span) -> Span:
        by = factor if isinstance(factor, Span) else Span.exact(factor)
        return Span(self.low * by.low, self.point * by.point, self.high * by.high)

    @classmethod
    def exact(cls, seconds: float) -> Span:
        return cls(seconds, seconds, seconds)


ZERO = Span.exact(0.0)
ENDS = {"flop_efficiency": (0.7, 0.35, 0.15),       # a call's rates at the low, point and high end: of the dense peak
        "bandwidth_efficiency": (0.8, 0.6, 0.35),   # of the peak bandwidth
        "host_s_per_op": (8e-6, 20e-6, 35e-6),      # an eager operator's dispatch and launch (the guide's A100: 29 us)
        "fused_share": (0.3, 0.5, 0.8),             # Inductor's kernels per eager operator
        "graph_share": (0.03, 0.08, 0.2),           # a CUDA-graph replay's host cost per operator, over eager's
        "compiled_traffic": (0.35, 0.5, 0.7)}       # a compiled call's bytes over eager's
COMPILE_FIXED_S, COMPILE_S_PER_OP, COMPILE_RANGE, WARM_SHARE = 4.9, 0.0304, Span(0.6, 1.0, 2.0), 0.2
MODE_COMPILE_FACTOR = {"default": 1.0, "reduce-overhead": 1.0, "max-autotune": 4.0,
                       "max-autotune-no-cudagraphs": 4.0, "aot-inductor": 1.5}
BOOT_S, BUILD_SHARE = Span(7.0, 9.5, 20.0), Span(0.2, 0.3, 1.0)
CELL_S, SHARED_EAGER_S, FLOP_COUNT_S_PER_OP = 1.0, 0.5, 50e-6
MEMORY_PROBE_S, PROFILE_SIDE_S, ENERGY_SIDE = 0.5, 0.3, Span(1.05, 1.15, 1.35)
MODEL_COSTS = Path(__file__).with_name("data") / "model_costs.json"
TF32_BY_NAME = {str(policy): switches for policy, switches in TF32_SWITCHES.items()}


def device_key(name: str) -> str:
    """The datasheet key of ``--device-model NAME`` ("H100", "A100-SXM4-80GB"...); UserError naming the known ones."""
    key = gpu_key(name)
    if key is None:
        raise UserError(f"--device-model {name!r} is not a GPU with datasheet peaks here; known: "
                        f"{', '.join(PEAK_TFLOPS)}")
    return key


@dataclass(frozen=True)
class Shape:
    """What the prior needs of a cell, from a grid's cell (``of_cell``) or a record (``of_record``)."""

    model: str
    batch_size: int
    mode: str
    dtype: str = "float32"
    tf32: str = "default"
    runs: int = 100
    warmup: int = 10
    profile: bool = True
    shapes: str = Shapes.STATIC
    portable_cache: bool = False
    first: bool = True           # a first replicate, which takes the figures taken once per cell
    kept: bool = False           # an earlier replicate kept its cold compile: it compiles warm only
    shares_pairs: bool = False   # an eager cell that takes a compiled cell's pairs: it runs nothing
    warm: bool = True            # its mode's first batch size in the kernel, which compiles warm too

    @classmethod
    def of_cell(cls, cell: Any, kept: bool = False, shares_pairs: bool = False, warm: bool = True) -> Shape:
        s = cell.settings
        return cls(cell.model, cell.batch_size, cell.compile_mode, cell.dtype, str(s.tf32), s.runs, s.warmup,
                   s.profile, s.shapes, s.portable_cache, s.replicate == Replicate.R1, kept, shares_pairs, warm)

    @classmethod
    def of_record(cls, record: Record) -> Shape:
        """What a record measured (profiled, as by default: its config does not say)."""
        cell, config, compiled = record.cell, record.config, record.compile
        return cls(cell.model, cell.batch_size, cell.compile_mode, cell.dtype, str(config.tf32 or "default"),
                   int(config.runs or 0), int(config.warmup or 0), shapes=cell.shapes,
                   portable_cache=compiled is not None and compiled.portable_cache is not None,
                   first=cell.replicate == Replicate.R1 or (record.memory is not None and record.memory.probed),
                   kept=compiled is not None and compiled.cold_measured_in is not None,
                   warm=compiled is not None and compiled.warm_ms is not None)

    def plan(self) -> cell_plan.CellPlan:
        return cell_plan.plan_cell(self.mode, warmup=self.warmup, runs=self.runs, cuda=True, profile=self.profile,
                                   shapes=self.shapes, portable_cache=self.portable_cache, warm_compile=self.warm,
                                   reuses_compilation=self.shapes == Shapes.DYNAMIC and not self.warm,
                                   shares_pairs=self.shares_pairs, cold_kept=self.kept, first_replicate=self.first)


@dataclass
class Prior:
    """The a-priori seconds of cells and kernel starts on one GPU (a ``PEAK_TFLOPS`` key)."""

    device: str
    costs: dict[str, dict[str, Any]] = field(default_factory=lambda: json.loads(MODEL_COSTS.read_text())["models"])

    def call(self, shape: Shape, side: str) -> Span | None:
        """One forward pass of ``side``: eager, the cell's mode, or ``cell_plan.FLOAT64`` (every FLOP on the float64
        units, twice the bytes); None where the table has no such model or the device no peak for the dtype."""
        row, float64 = self.costs.get(shape.model), side == cell_plan.FLOAT64
        matmul_tf32, conv_tf32 = TF32_BY_NAME.get(shape.tf32, TF32_BY_NAME["default"])
        peaks = {"conv": FP64_TFLOPS[self.device] if float64 else peak_tflops(self.device, shape.dtype, conv_tf32),
                 "other": FP64_TFLOPS[self.device] if float64 else peak_tflops(self.device, shape.dtype, matmul_tf32)}
        if row is None or not all(peaks.values()):
            return None
        batch, ops, compiled = shape.batch_size, row["eager_ops"], side not in (cell_plan.EAGER, cell_plan.FLOAT64)
        peak_s = sum((row[f"{kind}_gflops_fixed"] + row[f"{kind}_gflops_per_image"] * batch) / peak / 1e3
                     for kind, peak in peaks.items() if peak)
        bytes_s = ((row["eager_mb_fixed"] + row["eager_mb_per_image"] * batch) / MEMORY_BANDWIDTH_GBS[self.device]
                   / 1e3 * (2.0 if float64 else 0.5 if shape.dtype in ("float16", "bfloat16") else 1.0))

        def at(end: int) -> float:
            rate = {name: ends[end] for name, ends in ENDS.items()}
            host = rate["graph_share"] if side in CUDA_GRAPH_MODES else rate["fused_share"] if compiled else 1.0
            return max(peak_s / rate["flop_efficiency"], ops * host * rate["host_s_per_op"],
                       bytes_s * (rate["compiled_traffic"] if compiled else 1.0) / rate["bandwidth_efficiency"])
        return Span(at(0), at(1), at(2))

    def cold_compile(self, model: str, mode: str) -> Span:
        return COMPILE_RANGE * ((COMPILE_FIXED_S + COMPILE_S_PER_OP * self.costs[model]["eager_ops"])
                                * MODE_COMPILE_FACTOR.get(mode, 1.0))

    def cell(self, shape: Shape) -> Span | None:
        """The cell's seconds, each step of its plan priced; None where the model or dtype has no figures. A step
        with no price here is an error: the cell gained a step, and the prior must learn its cost."""
        plan, per_call = shape.plan(), {side: self.call(shape, side) for side in (cell_plan.EAGER, cell_plan.FLOAT64)}
        if per_call[cell_plan.EAGER] is None or not plan.steps:
            return None if per_call[cell_plan.EAGER] is None else Span.exact(SHARED_EAGER_S)
        per_call[cell_plan.COMPILED] = self.call(shape, shape.mode) if plan.compilation else ZERO
        cold = self.cold_compile(shape.model, shape.mode) if plan.compilation else ZERO
        beside = dict.fromkeys((cell_plan.REFERENCES, cell_plan.WARMUP, cell_plan.TIMED, cell_plan.GATE), ZERO)
        beside.update({cell_plan.FLOP_COUNT: Span.exact(self.costs[shape.model]["eager_ops"] * FLOP_COUNT_S_PER_OP),
                       cell_plan.EAGER_MEMORY: Span.exact(MEMORY_PROBE_S), cell_plan.MEMORY: Span.exact(MEMORY_PROBE_S),
                       cell_plan.ENERGY: ENERGY_SIDE, cell_plan.PROFILE: Span.exact(PROFILE_SIDE_S),
                       cell_plan.COLD_COMPILE: cold, cell_plan.WARM_COMPILE: cold * WARM_SHARE,
                       cell_plan.SHARED_FIRST_CALLS: cold,  # a dynamic batch's first calls at a size may compile again
                       cell_plan.FRESH_PROCESS: BOOT_S + cold * WARM_SHARE})
        total = Span.exact(CELL_S)
        for step in plan.steps:
            if step.name not in beside:
                raise ValueError(f"the prior has no price for a cell's step {step.name!r}")
            for side in step.sides:
                total = total + (per_call[side] or ZERO) * (step.calls or 0) + beside[step.name]
        return total

    def energy(self, shape: Shape) -> Span:
        """The cell's energy windows: a design cost, which calibration leaves as it is."""
        return ENERGY_SIDE * sum(len(step.sides) for step in shape.plan().steps if step.name == cell_plan.ENERGY)

    def start(self, model: str) -> Span | None:
        """A kernel's own cost: its boot, the device's preparation and the model's build."""
        row = self.costs.get(model)
        return None if row is None else BOOT_S + BUILD_SHARE * row["build_s_cpu"]
