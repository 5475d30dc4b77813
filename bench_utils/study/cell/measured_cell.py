"""One cell of the study: a model, a batch size and a compile mode, measured by its plan (``variants.cell_plan``).

An eager cell is timed with ``measure``; a compiled cell compiles as its plan says (``variants.compilation``) and is
timed against eager with ``compare``, recompiles forbidden. Every other figure (FLOPs, the accuracy gate, energy,
memory, the profile, a portable cache's fresh process) is taken outside the timed runs (docs/measurement.md). A
compiled cell's eager side is its ``shared_eager`` result, what the eager cell of its batch size records (``task``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import time
from typing import Any, Callable, NamedTuple

import torch

from ...errors import UserError
from ...measurement.block_clocks import BlockClocks
from ...measurement.compare import Comparison, compare
from ...measurement.devices import quiet_toolchain_logs
from ...measurement.flops import FlopCount, compute_block, count_forward_flops
from ...measurement.power import EnergyProbe
from ...measurement.stats import break_even_calls
from ...measurement.timing import Measurement, measure
from ...measurement.work_profile import profile_block
from ...variants import modes as compile_module
from ...variants.agreement import task_agreement
from ...variants.batch_shapes import DYNAMIC, STATIC, SharedCompilation
from ...variants import cell_plan
from ...variants.cell_plan import (EAGER_MEMORY, ENERGY, FLOP_COUNT, FRESH_PROCESS, LATER_REPLICATE, MEMORY, PROFILE,
                                   WARM_COMPILE, CellPlan)
from ...variants.compilation import Compilation, compilation_for, forward_call
from ...variants.compile_cost import CompiledCell, no_recompile
from ...variants.inductor_config import inductor_configuration
from ...variants.kept_caches import KeptCell
from ...variants.parity import compare_outputs, fp64_reference, unjudged
from ...variants.precision import tf32_in_force
from ...zoo.loading import LoadedModel
from ...measurement.energy_per_inference import energy_per_inference
from .after_timing import attempt, memory_of, release
from .time_by_phase import Phases, now_doing
from ...settings import Settings
from ...vocabulary import CompileMode, Replicate


@dataclass
class CellResult:
    mode: str
    batch_size: int
    measurement: Measurement                 # this cell's latency (compiled, or eager)
    comparison: Comparison | None = None     # compiled vs interleaved eager
    compile: dict[str, Any] = field(default_factory=dict)
    parity: dict[str, Any] | None = None
    agreement: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    eager_memory: dict[str, Any] | None = None
    compute: dict[str, Any] | None = None
    energy: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None    # why it got faster (``measurement.work_profile``)
    notes: list[str] = field(default_factory=list)   # figures not measured, and why
    phases: Phases = field(default_factory=Phases)   # where the cell's time went
    shared_eager: "CellResult | None" = None         # a compiled cell's eager side, as an eager cell
    shared_from: str | None = None                   # an eager result taken from that mode's pairs
    shapes: str = STATIC                             # dynamic: one compilation for all batch sizes
    inductor: str = "default"                        # the Inductor configuration it compiled with (``settings``)
    compilation: SharedCompilation | None = None     # that compilation, for the next batch sizes
    timed_with: tuple[str, ...] = ()                 # the compiled modes timed beside its eager series (a row)
    round_order: list[str] | None = None             # a row of several modes: each round's order of sides


@dataclass(frozen=True)
class CellContext:
    """What every step of one cell works on: the model, its inputs and eager's call on them, the device, the
    float32 work that may use TF32, the forward pass's FLOPs, the settings and the plan they make, and what the
    cell collects as it goes (where its time went; the figures it could not take, and why)."""

    loaded: LoadedModel
    inputs: dict[str, torch.Tensor]
    eager_fn: Callable[[], Any]
    device: torch.device
    tf32_by_work: dict[str, bool]   # matmul, convolution
    flops: FlopCount
    settings: Settings
    plan: CellPlan
    phases: Phases
    batch_size: int
    notes: list[str] = field(default_factory=list)
    trace_prefix: str | None = None   # keep_traces: where the profile's two traces go (``.eager.json``...)

    @property
    def mode(self) -> str:
        return self.plan.mode

    @property
    def tf32(self) -> bool:
        return any(self.tf32_by_work.values())

    def compute(self, latency_ms: float, eager_latency_ms: float | None = None) -> dict[str, Any]:
        gpu_name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else None
        return compute_block(self.flops, gpu_name=gpu_name, dtype=self.loaded.dtype,
                             tf32_matmul=self.tf32_by_work["matmul"], tf32_conv=self.tf32_by_work["convolution"],
                             latency_ms=latency_ms, eager_latency_ms=eager_latency_ms)

    def attempt(self, what: str, figure: Callable[[], Any]) -> tuple[Any, str | None]:
        """A figure after the timed runs and None; where it fails, None and the note saying why."""
        return attempt(what, self.notes, self.device, figure)

    def outside_timing(self, what: str, figure: Callable[[], Any]) -> Any:
        """A figure after the timed runs; None, with a note, where it fails."""
        return self.attempt(what, figure)[0]

    def memory(self, what: str, fn: Callable[[], Any], calls: int) -> dict[str, Any] | None:
        """The memory of ``calls`` calls of ``fn``, outside timing: None, with a note naming ``what``, where it
        fails; None where the plan probes none (``calls`` 0: a later replicate's, whose note says so)."""
        if not calls:
            return None
        return self.outside_timing(what, lambda: memory_of(fn, self.device, self.loaded, self.inputs, self.phases,
                                                           calls))


def run_cell(loaded: LoadedModel, batch_size: int, mode: str, settings: Settings, *,
             math_settings: dict[str, Any] | None = None, warm_compile: bool = True,
             compilation: SharedCompilation | None = None, phases: Phases | None = None,
             trace_prefix: str | None = None, kept: KeptCell | None = None) -> CellResult:
    """Measure ``loaded`` at ``batch_size`` in ``mode`` (eager, or a compile mode), as ``settings`` say, by the plan
    they make (``variants.cell_plan``).

    ``math_settings``: the float32 settings in force (``configure_fp32_math``'s result; the gate's tolerances and the
    peak figure follow TF32). ``warm_compile``: the mode's first batch size in the kernel, which compiles warm too
    and times a portable cache. ``compilation``, with ``shapes`` ``dynamic``: the mode's compilation made at a
    smaller batch size, called instead of compiling again (the caller resets dynamo when the mode is done).
    ``phases`` collects where the time goes, kept by the caller even when the cell fails. ``trace_prefix``: where
    ``keep_traces`` writes the profile's traces. ``kept``: the cell's compile caches kept between processes
    (``variants.kept_caches``).
    """
    phases = phases if phases is not None else Phases()
    settings = settings.checked()
    compile_module.check_mode(mode)
    dynamic_batch = settings.shapes == DYNAMIC
    if dynamic_batch and (mode == CompileMode.EAGER or mode in compile_module.AOT_MODES):
        raise UserError(f"shapes 'dynamic' needs a torch.compile mode, not {mode!r}")
    device = torch.device(loaded.device)
    shared = compilation if dynamic_batch else None
    plan = cell_plan.plan_cell(mode, warmup=settings.warmup, runs=settings.runs, cuda=device.type == "cuda",
                                profile=settings.profile, shapes=settings.shapes,
                                portable_cache=settings.portable_cache, warm_compile=warm_compile,
                                reuses_compilation=shared is not None,
                                cold_kept=kept is not None and kept.cold() is not None,
                                first_replicate=settings.replicate == Replicate.R1)
    tf32_by_work = tf32_in_force(math_settings or {}, device, loaded.dtype)
    inputs = loaded.inputs(batch_size)  # built once, outside every timed region
    eager_fn = forward_call(loaded.model, inputs, CompileMode.EAGER)
    with torch.no_grad():  # inference, as the guide measures it
        flops = count_flops(eager_fn, plan, phases)
        cell = CellContext(loaded, inputs, eager_fn, device, tf32_by_work, flops, settings, plan, phases,
                            batch_size, trace_prefix=trace_prefix if settings.keep_traces else None,
                            notes=[plan.not_taken[LATER_REPLICATE]] if LATER_REPLICATE in plan.not_taken else [])
        if plan.compilation is None:
            return _eager_cell(cell)
        return _compiled_cell(cell, compilation_for(plan, batch_size, settings, device, shared, kept))


def count_flops(eager_fn: Callable[[], Any], plan: CellPlan, phases: Phases) -> FlopCount:
    """The forward pass's FLOPs, counted where the plan has it (a later replicate leaves them to the first)."""
    if not plan.has(FLOP_COUNT):
        return FlopCount(None, "counted in the cell's first replicate")
    with phases.timing("flops"):
        return count_forward_flops(eager_fn)


def _eager_cell(cell: CellContext) -> CellResult:
    """An eager cell: timed alone, then its memory and energy."""
    settings, plan = cell.settings, cell.plan
    now_doing("timed")  # said before the window, never in it
    with EnergyProbe(cell.device) as clocks:  # clocks, throttling at start and end
        start = time.perf_counter()
        measurement = measure(cell.eager_fn, warmup=plan.warmup, runs=plan.runs, device=cell.device,
                              sync=settings.sync)
        cell.phases.add_loop(time.perf_counter() - start, sum(measurement.times_ms))
    memory = cell.memory("memory", cell.eager_fn, plan.calls(MEMORY))
    energy = None
    if plan.has(ENERGY):
        with cell.phases.timing("energy"):
            energy = cell.outside_timing("energy", lambda: energy_per_inference(
                cell.device, {"eager": (cell.eager_fn, measurement.mean_ms)}, settings.sync, clocks.report))
    return CellResult(cell.mode, cell.batch_size, measurement, memory=memory, compute=cell.compute(measurement.mean_ms),
                      energy=energy, notes=cell.notes, phases=cell.phases)


def _compile_report(compiled: CompiledCell, graph_stats: dict[str, Any], at_end: dict[str, Any], eager_ms: float,
                    compiled_ms: float) -> dict[str, Any]:
    """The record's ``compile`` block: graphs, breaks, recompiles, CUDA graphs, cold and warm cost."""
    report = graph_stats
    # CUDA graphs as the timed (warm, where made; a row's compiled again) compilation had them, as cuda_graphs says
    timed_stats = compiled.timed_again or compiled.warm_stats or {}
    report.update({key: value for key, value in timed_stats.items() if key.startswith("cudagraph_")})
    report["recompiles"] = at_end["graphs"] - compiled.after_warm["graphs"]
    report["warm_fx_graph_cache_hits"] = (compiled.warm_stats or {}).get("fx_graph_cache_hits")
    report.update(compiled.costs(eager_ms))
    report["first_call_ms"] = compiled.cold_calls_ms[0]
    report["break_even_calls"] = break_even_calls(report["cold_ms"], eager_ms, compiled_ms)
    if compiled.timed_again is not None:  # a row's mode: compiled once more, beside the others, for the timing
        report["timed_compilation"] = ("compiled again from its own cache, with no dynamo reset, beside the "
                                       "row's other modes")
        report["timed_compilation_calls_ms"] = list(compiled.timed_again["calls_ms"])
        # a miss: it compiled anew (max-autotune may then have tuned other kernels than the ones costed)
        report["timed_compilation_fx_graph_cache_hits"] = compiled.timed_again.get("fx_graph_cache_hits")
    return report


class References(NamedTuple):
    """Eager's outputs and the float64 reference's, on the host, for the accuracy gate."""

    eager: Any
    fp64: Any
    fp64_missing: str | None   # why there is no float64 reference (None: there is one)


class Timed(NamedTuple):
    """The compiled cell's compilation and its timed runs against eager."""

    compiled: CompiledCell
    comparison: Comparison
    clocks: dict[str, Any]   # clocks and throttling at the timed runs' start and end


class AfterTiming(NamedTuple):
    """The compiled cell's figures taken after its timed runs (None: not measured, with a note)."""

    energy: dict[str, Any] | None
    parity: dict[str, Any]
    agreement: dict[str, Any] | None
    memory: dict[str, Any] | None
    at_end: dict[str, Any]             # dynamo's counters once the figures are taken
    profile: dict[str, Any] | None     # why it got faster: both sides profiled
    fresh: dict[str, Any] | None       # a portable cache's fresh process


def _compiled_cell(cell: CellContext, compilation: Compilation) -> CellResult:
    """Eager's references and memory, then the compilation, its timed runs against eager and the figures
    after them, inside what the compilation keeps around the cell (``Compilation.around_cell``)."""
    quiet_toolchain_logs()
    plan = cell.plan
    try:
        with compilation.around_cell(cell.inputs):
            references = references_for(cell)
            # eager's memory before this cell compiles: no CUDA-graph pool of its own is alive yet (a dynamic-batch
            # cell's earlier compilation may be)
            eager_memory = cell.memory("eager memory", cell.eager_fn, plan.calls(EAGER_MEMORY))
            with cell.phases.timing("compile"), inductor_configuration(cell.settings.inductor) as options:
                compiled = compilation.compile(cell.loaded.model, cell.inputs, warm=plan.has(WARM_COMPILE))
            compiled.cold_stats["inductor_options"] = options  # what the configuration set, in the record
            timed = _timed_pairs(cell, compiled)
            figures = after_timing(cell, timed, references, compilation)
    finally:
        release(cell.device)
    return compiled_result(cell, timed, figures, compilation, eager_memory)


def references_for(cell: CellContext) -> References:
    """What the accuracy gate compares the compiled outputs with, taken before anything compiles."""
    with cell.phases.timing("parity"):
        # references are kept on the host: the measured device holds nothing but the models
        eager_out = compile_module.clone_outputs(cell.eager_fn(), "cpu")
        fp64_out, fp64_missing = fp64_reference(cell.loaded.model, cell.inputs)
        fp64_out = compile_module.clone_outputs(fp64_out, "cpu")
    release(cell.device)
    return References(eager_out, fp64_out, fp64_missing)


def _timed_pairs(cell: CellContext, compiled: CompiledCell) -> Timed:
    """Compiled against eager in random-order pairs of blocks, no recompile allowed."""
    settings, plan = cell.settings, cell.plan
    # the GPU's clock after every block: what moves between the sides shows in the record
    now_doing("timed")  # said before the window, never in it
    with BlockClocks(cell.device) as block_clocks, no_recompile(), \
            EnergyProbe(cell.device) as clocks:
        start = time.perf_counter()
        comparison = compare(cell.eager_fn, compiled.forward, warmup=plan.warmup, runs=plan.runs,
                             blocks=settings.blocks, device=cell.device, sync=settings.sync, order_seed=settings.seed,
                             between_blocks=block_clocks)
        cell.phases.add_loop(time.perf_counter() - start, sum(comparison.baseline.times_ms)
                             + sum(comparison.candidate.times_ms))
    return Timed(compiled, comparison, clocks.report)


def after_timing(cell: CellContext, timed: Timed, references: References,
                  compilation: Compilation) -> AfterTiming:
    """Energy, the accuracy gate, the compiled side's memory, dynamo's counters, the profile, then a portable
    cache's fresh process: each outside the timed runs, in that order, as the plan has them."""
    compiled_fn, comparison, plan = timed.compiled.forward, timed.comparison, cell.plan

    def energy() -> dict[str, Any] | None:
        with no_recompile():
            return energy_per_inference(cell.device, {"eager": (cell.eager_fn, comparison.baseline.mean_ms),
                                                      "compiled": (compiled_fn, comparison.candidate.mean_ms)},
                                        cell.settings.sync, timed.clocks)

    def gate() -> tuple[dict[str, Any], dict[str, Any] | None]:
        compiled_out = compile_module.clone_outputs(compiled_fn(), "cpu")
        return (compare_outputs(references.eager, compiled_out, cell.loaded.dtype, tf32=cell.tf32,
                                fp64=references.fp64, fp64_missing=references.fp64_missing),
                task_agreement(cell.loaded.task, references.eager, compiled_out))

    energy_block = None
    if plan.has(ENERGY):
        with cell.phases.timing("energy"):
            energy_block = cell.outside_timing("energy", energy)
    with cell.phases.timing("parity"):
        judged, failed = cell.attempt("accuracy gate", gate)
    # a gate that could not run judged nothing, and its note says why
    parity, agreement = judged if failed is None else (unjudged(cell.loaded.dtype, cell.tf32, failed), None)
    memory = cell.memory("memory", compiled_fn, plan.calls(MEMORY))
    at_end = compile_module.dynamo_snapshot()
    profile = None
    if plan.has(PROFILE):
        with cell.phases.timing("profile"), no_recompile():
            profile = cell.outside_timing("profile", lambda: profile_block(
                cell.eager_fn, compiled_fn, cuda=cell.device.type == "cuda", trace_prefix=cell.trace_prefix))
    elif PROFILE in plan.not_taken:
        cell.notes.append(plan.not_taken[PROFILE])
    fresh = None
    if plan.has(FRESH_PROCESS):
        with cell.phases.timing("compile"):
            fresh = cell.outside_timing("portable cache", lambda: compilation.fresh_process(cell.loaded.model,
                                                                                            cell.inputs))
    return AfterTiming(energy_block, parity, agreement, memory, at_end, profile, fresh)


def compiled_result(cell: CellContext, timed: Timed, figures: AfterTiming, compilation: Compilation,
                    eager_memory: dict[str, Any] | None, *, eager_stands: bool | None = None,
                    timed_with: tuple[str, ...] | None = None, round_order: list[str] | None = None) -> CellResult:
    """The compiled cell's result, and its eager side as an eager cell's where the plan warms eager up as the
    eager cell does (``eager_stands``, where a row's warm-up decides instead). ``timed_with``: the compiled modes
    timed beside the eager series (a row's; the cell's own mode alone by default), ``round_order`` the row's."""
    comparison = timed.comparison
    eager_ms = comparison.baseline.mean_ms
    # the cell's first call is the cold compiling one, not compare's own first (warm) call
    measurement = dataclasses.replace(comparison.candidate, first_call_ms=timed.compiled.cold_calls_ms[0])
    report = _compile_report(timed.compiled, compilation.graph_stats(timed.compiled), figures.at_end, eager_ms,
                             measurement.mean_ms)
    if figures.fresh is not None:
        report["portable_cache"] = figures.fresh
    eager_energy = None
    if figures.energy is not None and figures.energy.get("eager") is not None:
        eager_energy = {"timed_runs": figures.energy.get("timed_runs"), "eager": figures.energy["eager"]}
    # eager, as the pairs measured it: an eager cell of this batch size need not time it again
    # (unless this mode's warm-up differs from the one the eager cell asks for)
    timed_with = timed_with or (cell.mode,)
    stands = cell.plan.eager_side_is_its_eager_cell if eager_stands is None else eager_stands
    shared_eager = None if not stands else CellResult(
        "eager", cell.batch_size, comparison.baseline, memory=eager_memory, compute=cell.compute(eager_ms),
        energy=eager_energy, shared_from=cell.mode, timed_with=timed_with,
        notes=[note for note in cell.notes if note.startswith("eager memory")])
    return CellResult(cell.mode, cell.batch_size, measurement, comparison=comparison, compile=report,
                      parity=figures.parity, agreement=figures.agreement, memory=figures.memory,
                      eager_memory=eager_memory, compute=cell.compute(measurement.mean_ms, eager_ms),
                      energy=figures.energy, profile=figures.profile, notes=cell.notes, phases=cell.phases,
                      shared_eager=shared_eager, shapes=DYNAMIC if cell.settings.shapes == DYNAMIC else STATIC,
                      inductor=cell.settings.inductor,
                      compilation=compilation.shared_on(), timed_with=timed_with, round_order=round_order)
