"""One cell of the study: a model, a batch size and a compile mode, measured.

An eager cell is timed with ``measure``. A compiled cell compiles cold, then warm
(``variants.compile_cost``), and is timed against eager with ``compare`` (random-order
pairs of blocks, so drift cannot fake a speed-up) with recompiles forbidden. Each
timed call starts from an idle device (``sync="per-call"``): a request's latency.
Outside every timed region: the FLOPs of one forward pass, the accuracy gate
(against an fp64 eager reference, with a task-level agreement figure), energy where
NVML has it, and the memory of both variants, probed after the reference outputs
are freed. ``cell_record`` (``cell_record.py``) turns the result into a record.

A compiled cell's eager side is a measurement of eager in its own right: its
``shared_eager`` result is what an eager cell of the same batch size records, so
that eager is not timed twice (``task``). Where the time went is in ``phases``.
The deployment variants (``channels_last`` is the loaded model's layout) branch here: an
``aot-inductor`` cell builds its package instead of compiling, a ``dynamic`` one calls the
compilation of a smaller batch size, and a portable cache is timed in a fresh process.
"""

from __future__ import annotations

from contextlib import nullcontext
import dataclasses
from dataclasses import dataclass, field
import tempfile
import time
from typing import Any, Callable, NamedTuple

import torch

from ...errors import UserError
from ...measurement.block_clocks import BlockClocks
from ...measurement.compare import Comparison, compare
from ...measurement.devices import quiet_toolchain_logs
from ...measurement.flops import FlopCount, compute_block, count_forward_flops
from ...measurement.power import EnergyProbe
from ...measurement.timing import Measurement, measure
from ...measurement.work_profile import profile_block
from ...variants import aot_inductor, modes as compile_module, portable_cache as portable
from ...variants.agreement import task_agreement
from ...variants.batch_shapes import (DYNAMIC, STATIC, SharedCompilation, mark_batch_dynamic,
                                     one_graph_for_all_batch_sizes)
from ...variants.inductor_config import inductor_configuration
from ...variants.compile_cost import (CompiledCell, compile_cold_then_warm, fresh_caches, no_recompile,
                                      reuse_compiled)
from ...variants.parity import compare_outputs, fp64_reference, unjudged
from ...variants.precision import tf32_in_force
from ...zoo.loading import LoadedModel
from .memory_and_energy import energy_per_inference, memory_of, outside_timing, release
from .time_by_phase import Phases
from ...records.key import warmed_up_as_its_eager_cell
from ...settings import Settings
from ...vocabulary import CompileMode


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


def _forward(model: Callable, inputs: dict[str, torch.Tensor], mode: str) -> Callable[[], Any]:
    """One forward pass; decided here, so the timed loop holds nothing but the call."""
    if mode in compile_module.CUDA_GRAPH_MODES:
        def call_step():
            torch.compiler.cudagraph_mark_step_begin()  # a new inference: buffers may be reused
            return model(**inputs)
        return call_step
    return lambda: model(**inputs)


def _gpu_name(device: torch.device) -> str | None:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else None


@dataclass(frozen=True)
class _CellContext:
    """What every step of one cell works on: the model, its inputs and eager's call on them, the device, the
    float32 work that may use TF32, the forward pass's FLOPs, the settings, and what the cell collects as it
    goes (where its time went; the figures it could not take, and why)."""

    loaded: LoadedModel
    inputs: dict[str, torch.Tensor]
    eager_fn: Callable[[], Any]
    device: torch.device
    tf32_by_work: dict[str, bool]   # matmul, convolution
    flops: FlopCount
    settings: Settings
    phases: Phases
    batch_size: int
    mode: str
    notes: list[str] = field(default_factory=list)
    trace_prefix: str | None = None   # keep_traces: where the profile's two traces go (``.eager.json``...)

    @property
    def tf32(self) -> bool:
        return any(self.tf32_by_work.values())

    @property
    def dynamic_batch(self) -> bool:
        return self.settings.shapes == DYNAMIC

    def compute(self, latency_ms: float, eager_latency_ms: float | None = None) -> dict[str, Any]:
        return compute_block(self.flops, gpu_name=_gpu_name(self.device), dtype=self.loaded.dtype,
                             tf32_matmul=self.tf32_by_work["matmul"], tf32_conv=self.tf32_by_work["convolution"],
                             latency_ms=latency_ms, eager_latency_ms=eager_latency_ms)

    def outside_timing(self, what: str, figure: Callable[[], Any]) -> Any:
        """A figure after the timed runs; None, with a note, where it fails."""
        return outside_timing(what, self.notes, self.device, figure)

    def memory(self, what: str, fn: Callable[[], Any]) -> dict[str, Any] | None:
        """The memory of calling ``fn``, outside timing: None, with a note naming ``what``, where it fails."""
        return self.outside_timing(what, lambda: memory_of(fn, self.device, self.loaded, self.inputs, self.phases))


def run_cell(loaded: LoadedModel, *, batch_size: int, mode: str, settings: Settings | None = None,
             math_settings: dict[str, Any] | None = None, warm_compile: bool = True,
             phases: Phases | None = None, compilation: SharedCompilation | None = None,
             trace_prefix: str | None = None, **setting_values: Any) -> CellResult:
    """Measure ``loaded`` at ``batch_size`` in ``mode`` (eager, or a compile mode).

    ``settings`` say how (runs, warm-up, blocks, the compile options, shapes...; ``Settings``' defaults
    where None); a setting given by name (``runs=12``) wins. ``math_settings`` are the float32
    settings in force (``configure_fp32_math``'s result): the accuracy gate's tolerances and the
    peak figure follow TF32. With ``warm_compile`` False a compiled cell compiles cold only (its warm cost was
    measured at another batch size of the same model and mode). ``phases``, if given, collects
    where the time goes (the caller keeps it, even when the cell fails). With ``shapes``
    ``dynamic`` the batch dimension is marked dynamic and ``compilation`` (the result's, from a
    smaller batch size of the same mode) is called instead of compiling again; the caller
    discards it (and resets dynamo) when the mode is done. With ``portable_cache`` a torch.compile
    cell of static shapes also saves its compile cache and times a fresh process started from it
    (``variants.portable_cache``), after the timed runs. With ``profile`` both sides are profiled after the
    timed runs; with ``keep_traces`` too, their traces are written to ``trace_prefix``.eager.json and .compiled.json.
    """
    phases = phases if phases is not None else Phases()
    settings = Settings.from_parameters({**(settings or Settings()).to_parameters(), **setting_values})
    compile_module.check_mode(mode)
    if settings.shapes == DYNAMIC and (mode == CompileMode.EAGER or mode in compile_module.AOT_MODES):
        raise UserError(f"shapes 'dynamic' needs a torch.compile mode, not {mode!r}")
    device = torch.device(loaded.device)
    tf32_by_work = tf32_in_force(math_settings or {}, device, loaded.dtype)
    inputs = loaded.inputs(batch_size)  # built once, outside every timed region
    eager_fn = _forward(loaded.model, inputs, "eager")
    with torch.no_grad():  # inference, as the guide measures it
        with phases.timing("flops"):
            flops = count_forward_flops(eager_fn)
        cell = _CellContext(loaded, inputs, eager_fn, device, tf32_by_work, flops, settings, phases, batch_size, mode,
                            trace_prefix=trace_prefix if settings.keep_traces else None)
        if mode == CompileMode.EAGER:
            return _eager_cell(cell)
        with one_graph_for_all_batch_sizes(cell.dynamic_batch):  # a batch of 1 not specialized
            return _compiled_cell(cell, warm_compile=warm_compile,
                                  compilation=compilation if cell.dynamic_batch else None)


def _eager_cell(cell: _CellContext) -> CellResult:
    """An eager cell: timed alone, then its memory and energy."""
    settings = cell.settings
    with EnergyProbe(cell.device) as clocks:  # clocks and throttling at the start and end
        start = time.perf_counter()
        measurement = measure(cell.eager_fn, warmup=settings.warmup, runs=settings.runs, device=cell.device,
                              sync=settings.sync)
        cell.phases.add_loop(time.perf_counter() - start, sum(measurement.times_ms))
    memory = cell.memory("memory", cell.eager_fn)
    with cell.phases.timing("energy"):
        energy = cell.outside_timing("energy", lambda: energy_per_inference(
            cell.device, {"eager": (cell.eager_fn, measurement.mean_ms)}, settings.sync, clocks.report))
    return CellResult(cell.mode, cell.batch_size, measurement, memory=memory, compute=cell.compute(measurement.mean_ms),
                      energy=energy, notes=cell.notes, phases=cell.phases)


def _fresh_start(cell: _CellContext, artifacts: bytes | None) -> dict[str, Any]:
    """A fresh process started from this cell's saved compile cache (``variants.portable_cache``)."""
    if cell.dynamic_batch:
        raise ValueError("a dynamic-batch compilation is timed in this process only")
    settings = cell.settings
    if artifacts is None:
        raise ValueError(f"the {settings.backend} compilation left no cache artifacts to carry")
    return portable.startup_from_artifacts(cell.loaded.model, cell.inputs, artifacts, mode=cell.mode,
                                           backend=settings.backend, fullgraph=settings.fullgraph,
                                           dynamic=settings.dynamic, device=cell.device.type)


def _compile(cell: _CellContext, warm_compile: bool, compilation: SharedCompilation | None,
             package_folder: str | None) -> tuple[CompiledCell, Any, bytes | None]:
    """The cell's compilation (cold, then warm where asked), an AOTInductor package where
    ``package_folder``, or the dynamic-batch ``compilation`` called at a new batch size; with the
    model the forward calls and, for a portable cache, the cache artifacts."""
    made: list[Any] = []  # the compiled model the last forward calls
    settings, model = cell.settings, cell.loaded.model

    def make_forward(compiled_model: Callable) -> Callable[[], Any]:
        made[:] = [compiled_model]
        return _forward(compiled_model, cell.inputs, cell.mode)

    artifacts = None
    if package_folder is not None:
        compiled = aot_inductor.compiled_cell(model, cell.inputs, make_forward, cell.device, package_folder,
                                              warm=warm_compile)
    elif compilation is not None:
        compiled = reuse_compiled(compilation.model, cell.mode, make_forward, cell.device,
                                  compilation.compiled_at_batch_size, backend=settings.backend)
    else:
        with portable.recording():  # this compilation's cache artifacts, none older
            compiled = compile_cold_then_warm(model, cell.mode, make_forward, cell.device, backend=settings.backend,
                                              fullgraph=settings.fullgraph, dynamic=settings.dynamic,
                                              warm=warm_compile)
        if settings.portable_cache and not cell.dynamic_batch:
            artifacts = portable.saved_artifacts()
    return compiled, made[0] if made else None, artifacts


def _compile_report(compiled: CompiledCell, compilation: SharedCompilation | None, batch_size: int,
                    at_end: dict[str, Any], eager_ms: float, compiled_ms: float) -> dict[str, Any]:
    """The record's ``compile`` block: graphs, breaks, recompiles, CUDA graphs, cold and warm cost."""
    report = dict(compiled.cold_stats) if compilation is None else compilation.compile_stats(batch_size,
                                                                                              compiled.cold_stats)
    # CUDA graphs as the timed (warm, where made) compilation had them, as its cuda_graphs says
    report.update({key: value for key, value in (compiled.warm_stats or {}).items() if key.startswith("cudagraph_")})
    report["recompiles"] = at_end["graphs"] - compiled.after_warm["graphs"]
    report["warm_fx_graph_cache_hits"] = (compiled.warm_stats or {}).get("fx_graph_cache_hits")
    report.update(compiled.costs(eager_ms))
    report["first_call_ms"] = compiled.cold_calls_ms[0]
    report["break_even_calls"] = compile_module.break_even_calls(report["cold_ms"], eager_ms, compiled_ms)
    return report


class _References(NamedTuple):
    """Eager's outputs and the float64 reference's, on the host, for the accuracy gate."""

    eager: Any
    fp64: Any
    fp64_missing: str | None   # why there is no float64 reference (None: there is one)


class _Timed(NamedTuple):
    """The compiled cell's compilation and its timed runs against eager."""

    compiled: CompiledCell
    comparison: Comparison
    clocks: dict[str, Any]   # clocks and throttling at the timed runs' start and end


class _AfterTiming(NamedTuple):
    """The compiled cell's figures taken after its timed runs (None: not measured, with a note)."""

    energy: dict[str, Any] | None
    parity: dict[str, Any]
    agreement: dict[str, Any] | None
    memory: dict[str, Any] | None
    at_end: dict[str, Any]             # dynamo's counters once the figures are taken
    profile: dict[str, Any] | None     # why it got faster: both sides profiled
    fresh: dict[str, Any] | None       # a portable cache's fresh process


def _compiled_cell(cell: _CellContext, *, warm_compile: bool, compilation: SharedCompilation | None) -> CellResult:
    """Eager's references and memory, then the compilation, its timed runs against eager and the figures
    after them; the cell's graphs and CUDA-graph pools go with it (unless a dynamic batch shares them on)."""
    if compilation is None:
        compile_module.reset()  # no graph of an earlier model or cell may be reused
    if cell.dynamic_batch:
        mark_batch_dynamic(cell.inputs)
    quiet_toolchain_logs()
    references = _references(cell)
    # eager's memory before this cell compiles: no CUDA-graph pool of its own is alive yet (a dynamic-batch
    # cell's earlier compilation may be)
    eager_memory = cell.memory("eager memory", cell.eager_fn)
    warmup = cell.settings.warmup
    if cell.mode in compile_module.CUDA_GRAPH_MODES:
        warmup = max(warmup, 2)  # replays settle after the recording call
    aot = cell.mode in compile_module.AOT_MODES  # its package lives in a folder of the cell's own
    try:
        # cold compile; open for the whole cell: nothing falls back to the shared cache
        with fresh_caches(), (tempfile.TemporaryDirectory(prefix="aoti-") if aot else nullcontext()) as package_folder:
            with cell.phases.timing("compile"), inductor_configuration(cell.settings.inductor) as options:
                compiled, made, artifacts = _compile(cell, warm_compile, compilation, package_folder)
            compiled.cold_stats["inductor_options"] = options  # what the configuration set, in the record
            if cell.dynamic_batch:
                compilation = compilation or SharedCompilation(cell.mode, made, cell.batch_size, {
                    key: compiled.cold_stats[key] for key in ("graphs", "graph_breaks", "break_reasons")})
            timed = _timed_pairs(cell, compiled, warmup)
            figures = _after_timing(cell, timed, references, artifacts)
    finally:  # this cell's graphs and CUDA-graph pools must not outlive it (unless shared on)
        if not cell.dynamic_batch:
            compile_module.reset()
        release(cell.device)
    return _compiled_result(cell, timed, figures, compilation, eager_memory,
                            shares_eager=warmed_up_as_its_eager_cell(warmup, cell.settings.warmup))


def _references(cell: _CellContext) -> _References:
    """What the accuracy gate compares the compiled outputs with, taken before anything compiles."""
    with cell.phases.timing("parity"):
        # references are kept on the host: the measured device holds nothing but the models
        eager_out = compile_module.clone_outputs(cell.eager_fn(), "cpu")
        fp64_out, fp64_missing = fp64_reference(cell.loaded.model, cell.inputs)
        fp64_out = compile_module.clone_outputs(fp64_out, "cpu")
    release(cell.device)
    return _References(eager_out, fp64_out, fp64_missing)


def _timed_pairs(cell: _CellContext, compiled: CompiledCell, warmup: int) -> _Timed:
    """Compiled against eager in random-order pairs of blocks, no recompile allowed."""
    settings = cell.settings
    # the GPU's clock after every block: what moves between the sides shows in the record
    with BlockClocks(cell.device) as block_clocks, no_recompile(), EnergyProbe(cell.device) as clocks:
        start = time.perf_counter()
        comparison = compare(cell.eager_fn, compiled.forward, warmup=warmup, runs=settings.runs, blocks=settings.blocks,
                             device=cell.device, sync=settings.sync, order_seed=settings.seed,
                             between_blocks=block_clocks)
        cell.phases.add_loop(time.perf_counter() - start, sum(comparison.baseline.times_ms)
                             + sum(comparison.candidate.times_ms))
    return _Timed(compiled, comparison, clocks.report)


def _after_timing(cell: _CellContext, timed: _Timed, references: _References,
                  artifacts: bytes | None) -> _AfterTiming:
    """Energy, the accuracy gate, the compiled side's memory, dynamo's counters, the profile, then a portable
    cache's fresh process: each outside the timed runs, in that order."""
    compiled_fn, comparison = timed.compiled.forward, timed.comparison

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

    with cell.phases.timing("energy"):
        energy_block = cell.outside_timing("energy", energy)
    with cell.phases.timing("parity"):
        parity, agreement = cell.outside_timing("accuracy gate", gate) or (
            unjudged(cell.loaded.dtype, cell.tf32, cell.notes[-1]), None)  # judged by nothing, and why
    memory = cell.memory("memory", compiled_fn)
    at_end = compile_module.dynamo_snapshot()
    profile = None
    if cell.settings.profile and cell.mode in compile_module.AOT_MODES and cell.device.type == "cpu":
        # its C++ kernels and the extern calls of its shim emit no profiler event: the figures would be false
        cell.notes.append("profile: not taken (an AOTInductor package on a CPU emits no profiler events of its own)")
    elif cell.settings.profile:
        with cell.phases.timing("profile"), no_recompile():
            profile = cell.outside_timing("profile", lambda: profile_block(
                cell.eager_fn, compiled_fn, cuda=cell.device.type == "cuda", trace_prefix=cell.trace_prefix))
    fresh = None
    if cell.settings.portable_cache and cell.mode not in compile_module.AOT_MODES:
        with cell.phases.timing("compile"):
            fresh = cell.outside_timing("portable cache", lambda: _fresh_start(cell, artifacts))
    return _AfterTiming(energy_block, parity, agreement, memory, at_end, profile, fresh)


def _compiled_result(cell: _CellContext, timed: _Timed, figures: _AfterTiming,
                     compilation: SharedCompilation | None, eager_memory: dict[str, Any] | None, *,
                     shares_eager: bool) -> CellResult:
    """The compiled cell's result, and its eager side as an eager cell's where ``shares_eager``."""
    comparison = timed.comparison
    eager_ms = comparison.baseline.mean_ms
    # the cell's first call is the cold compiling one, not compare's own first (warm) call
    measurement = dataclasses.replace(comparison.candidate, first_call_ms=timed.compiled.cold_calls_ms[0])
    report = _compile_report(timed.compiled, compilation, cell.batch_size, figures.at_end, eager_ms,
                             measurement.mean_ms)
    if figures.fresh is not None:
        report["portable_cache"] = figures.fresh
    eager_energy = None
    if figures.energy is not None and figures.energy.get("eager") is not None:
        eager_energy = {"timed_runs": figures.energy.get("timed_runs"), "eager": figures.energy["eager"]}
    # eager, as the pairs measured it: an eager cell of this batch size need not time it again
    # (unless this mode's warm-up differs from the one the eager cell asks for)
    shared_eager = None if not shares_eager else CellResult(
        "eager", cell.batch_size, comparison.baseline, memory=eager_memory, compute=cell.compute(eager_ms),
        energy=eager_energy, shared_from=cell.mode,
        notes=[note for note in cell.notes if note.startswith("eager memory")])
    return CellResult(cell.mode, cell.batch_size, measurement, comparison=comparison, compile=report,
                      parity=figures.parity, agreement=figures.agreement, memory=figures.memory,
                      eager_memory=eager_memory, compute=cell.compute(measurement.mean_ms, eager_ms),
                      energy=figures.energy, profile=figures.profile, notes=cell.notes, phases=cell.phases,
                      shared_eager=shared_eager, shapes=DYNAMIC if cell.dynamic_batch else STATIC,
                      inductor=cell.settings.inductor, compilation=compilation)
