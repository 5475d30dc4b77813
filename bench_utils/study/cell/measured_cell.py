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
from typing import Any, Callable

import torch

from ...measurement.compare import Comparison, compare
from ...measurement.devices import quiet_toolchain_logs
from ...measurement.flops import compute_block, count_forward_flops
from ...measurement.power import EnergyProbe
from ...measurement.timing import Measurement, measure
from ...variants import aot_inductor, modes as compile_module, portable_cache as portable
from ...variants.agreement import task_agreement
from ...variants.batch_shapes import (DYNAMIC, STATIC, SharedCompilation, mark_batch_dynamic,
                                     one_graph_for_all_batch_sizes)
from ...variants.compile_cost import compile_cold_then_warm, fresh_caches, no_recompile, reuse_compiled
from ...variants.parity import compare_outputs, fp64_reference, unjudged
from ...variants.precision import tf32_in_force
from ...zoo.loading import LoadedModel
from .memory_and_energy import energy_per_inference, memory_of, outside_timing, release
from .time_by_phase import Phases
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
    notes: list[str] = field(default_factory=list)   # figures not measured, and why
    phases: Phases = field(default_factory=Phases)   # where the cell's time went
    shared_eager: "CellResult | None" = None         # a compiled cell's eager side, as an eager cell
    shared_from: str | None = None                   # an eager result taken from that mode's pairs
    shapes: str = STATIC                             # dynamic: one compilation for all batch sizes
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


def run_cell(loaded: LoadedModel, *, batch_size: int, mode: str, settings: Settings | None = None,
             math_settings: dict[str, Any] | None = None, warm_compile: bool = True,
             phases: Phases | None = None, compilation: SharedCompilation | None = None,
             **setting_values: Any) -> CellResult:
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
    (``variants.portable_cache``), after the timed runs.
    """
    phases = phases if phases is not None else Phases()
    settings = Settings.from_parameters({**(settings or Settings()).to_parameters(), **setting_values})
    shapes = settings.shapes
    compile_module.check_mode(mode)
    if shapes == DYNAMIC and (mode == CompileMode.EAGER or mode in compile_module.AOT_MODES):
        raise ValueError(f"shapes 'dynamic' needs a torch.compile mode, not {mode!r}")
    device = torch.device(loaded.device)
    tf32_by_work = tf32_in_force(math_settings or {}, device, loaded.dtype)
    tf32 = any(tf32_by_work.values())
    inputs = loaded.inputs(batch_size)  # built once, outside every timed region
    eager_fn = _forward(loaded.model, inputs, "eager")

    def compute(latency_ms: float, eager_latency_ms: float | None = None) -> dict[str, Any]:
        return compute_block(flops, gpu_name=_gpu_name(device), dtype=loaded.dtype,
                             tf32_matmul=tf32_by_work["matmul"], tf32_conv=tf32_by_work["convolution"],
                             latency_ms=latency_ms, eager_latency_ms=eager_latency_ms)

    with torch.no_grad():  # inference, as the guide measures it
        with phases.timing("flops"):
            flops = count_forward_flops(eager_fn)
        if mode != CompileMode.EAGER:
            with one_graph_for_all_batch_sizes(shapes == DYNAMIC):  # a batch of 1 not specialized
                return _compiled_cell(loaded, inputs, eager_fn, compute, device, tf32, phases,
                                      batch_size=batch_size, mode=mode, settings=settings,
                                      warm_compile=warm_compile,
                                      compilation=compilation if shapes == DYNAMIC else None)
        with EnergyProbe(device) as clocks:  # clocks and throttling at the start and end
            start = time.perf_counter()
            measurement = measure(eager_fn, warmup=settings.warmup, runs=settings.runs, device=device,
                                  sync=settings.sync)
            phases.add_loop(time.perf_counter() - start, sum(measurement.times_ms))
        notes: list[str] = []
        memory = outside_timing("memory", notes, device,
                                lambda: memory_of(eager_fn, device, loaded, inputs, phases))
        with phases.timing("energy"):
            energy = outside_timing("energy", notes, device, lambda: energy_per_inference(
                device, {"eager": (eager_fn, measurement.mean_ms)}, settings.sync, clocks.report))
        return CellResult(mode, batch_size, measurement, memory=memory,
                          compute=compute(measurement.mean_ms), energy=energy, notes=notes,
                          phases=phases)


def _fresh_start(model: torch.nn.Module, inputs: dict[str, torch.Tensor], artifacts: bytes | None, mode: str,
                 backend: str, fullgraph: bool, dynamic: bool | None, device: torch.device,
                 dynamic_batch: bool) -> dict[str, Any]:
    """A fresh process started from this cell's saved compile cache (``variants.portable_cache``)."""
    if dynamic_batch:
        raise ValueError("a dynamic-batch compilation is timed in this process only")
    if artifacts is None:
        raise ValueError(f"the {backend} compilation left no cache artifacts to carry")
    return portable.startup_from_artifacts(model, inputs, artifacts, mode=mode, backend=backend,
                                           fullgraph=fullgraph, dynamic=dynamic, device=device.type)


def _compile(loaded: LoadedModel, inputs: dict[str, torch.Tensor], mode: str, settings: Settings,
             device: torch.device, warm_compile: bool, compilation: SharedCompilation | None,
             package_folder: str | None) -> tuple[Any, Any, bytes | None]:
    """The cell's compilation (cold, then warm where asked), an AOTInductor package where
    ``package_folder``, or the dynamic-batch ``compilation`` called at a new batch size; with the
    model the forward calls and, for a portable cache, the cache artifacts."""
    made: list[Any] = []  # the compiled model the last forward calls

    def make_forward(model: Callable) -> Callable[[], Any]:
        made[:] = [model]
        return _forward(model, inputs, mode)

    artifacts = None
    if package_folder is not None:
        compiled = aot_inductor.compiled_cell(loaded.model, inputs, make_forward, device, package_folder,
                                              warm=warm_compile)
    elif compilation is not None:
        compiled = reuse_compiled(compilation.model, mode, make_forward, device,
                                  compilation.compiled_at_batch_size, backend=settings.backend)
    else:
        with portable.recording():  # this compilation's cache artifacts, none older
            compiled = compile_cold_then_warm(loaded.model, mode, make_forward, device, backend=settings.backend,
                                              fullgraph=settings.fullgraph, dynamic=settings.dynamic,
                                              warm=warm_compile)
        if settings.portable_cache and settings.shapes != DYNAMIC:
            artifacts = portable.saved_artifacts()
    return compiled, made[0] if made else None, artifacts


def _compile_report(compiled: Any, compilation: SharedCompilation | None, batch_size: int,
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


def _compiled_cell(loaded: LoadedModel, inputs: dict[str, torch.Tensor], eager_fn: Callable[[], Any],
                   compute: Callable[..., dict[str, Any]], device: torch.device, tf32: bool,
                   phases: Phases, *, batch_size: int, mode: str, settings: Settings,
                   warm_compile: bool, compilation: SharedCompilation | None) -> CellResult:
    dynamic_batch, portable_cache = settings.shapes == DYNAMIC, settings.portable_cache
    backend, fullgraph, dynamic, warmup = settings.backend, settings.fullgraph, settings.dynamic, settings.warmup
    if compilation is None:
        compile_module.reset()  # no graph of an earlier model or cell may be reused
    if dynamic_batch:
        mark_batch_dynamic(inputs)
    quiet_toolchain_logs()
    notes: list[str] = []
    with phases.timing("parity"):
        # references are kept on the host: the measured device holds nothing but the models
        eager_out = compile_module.clone_outputs(eager_fn(), "cpu")
        fp64_out, fp64_missing = fp64_reference(loaded.model, inputs)
        fp64_out = compile_module.clone_outputs(fp64_out, "cpu")
    release(device)
    # eager's memory before this cell compiles: no CUDA-graph pool of its own is alive yet (a dynamic-batch
    # cell's earlier compilation may be)
    eager_memory = outside_timing("eager memory", notes, device,
                                  lambda: memory_of(eager_fn, device, loaded, inputs, phases))
    requested_warmup = warmup
    artifacts = fresh = None  # the portable cache's, where asked for
    if mode in compile_module.CUDA_GRAPH_MODES:
        warmup = max(warmup, 2)  # replays settle after the recording call
    try:
        # cold compile; open for the whole cell: nothing falls back to the shared cache
        aot = mode in compile_module.AOT_MODES  # its package lives in a folder of the cell's own
        with fresh_caches(), (tempfile.TemporaryDirectory(prefix="aoti-") if aot else nullcontext()) as package_folder:
            with phases.timing("compile"):
                compiled, made, artifacts = _compile(loaded, inputs, mode, settings, device, warm_compile,
                                                     compilation, package_folder if aot else None)
            if dynamic_batch:
                compilation = compilation or SharedCompilation(mode, made, batch_size, {
                    key: compiled.cold_stats[key] for key in ("graphs", "graph_breaks", "break_reasons")})
            compiled_fn = compiled.forward
            with no_recompile(), EnergyProbe(device) as clocks:
                start = time.perf_counter()
                comparison = compare(eager_fn, compiled_fn, warmup=warmup, runs=settings.runs, blocks=settings.blocks,
                                     device=device, sync=settings.sync, order_seed=settings.seed)
                phases.add_loop(time.perf_counter() - start, sum(comparison.baseline.times_ms)
                                + sum(comparison.candidate.times_ms))

            def energy() -> dict[str, Any] | None:
                with no_recompile():
                    return energy_per_inference(device, {"eager": (eager_fn, comparison.baseline.mean_ms),
                                            "compiled": (compiled_fn, comparison.candidate.mean_ms)},
                                   settings.sync, clocks.report)

            def gate() -> tuple[dict[str, Any], dict[str, Any] | None]:
                compiled_out = compile_module.clone_outputs(compiled_fn(), "cpu")
                return (compare_outputs(eager_out, compiled_out, loaded.dtype, tf32=tf32, fp64=fp64_out,
                                        fp64_missing=fp64_missing),
                        task_agreement(loaded.task, eager_out, compiled_out))

            with phases.timing("energy"):
                energy_block = outside_timing("energy", notes, device, energy)
            with phases.timing("parity"):
                parity, agreement = outside_timing("accuracy gate", notes, device, gate) or (
                    unjudged(loaded.dtype, tf32, notes[-1]), None)  # judged by nothing, and why
            memory = outside_timing("memory", notes, device,
                                    lambda: memory_of(compiled_fn, device, loaded, inputs, phases))
            at_end = compile_module.dynamo_snapshot()
            if portable_cache and not aot:
                with phases.timing("compile"):
                    fresh = outside_timing("portable cache", notes, device, lambda: _fresh_start(
                        loaded.model, inputs, artifacts, mode, backend, fullgraph, dynamic, device, dynamic_batch))
    finally:  # this cell's graphs and CUDA-graph pools must not outlive it (unless shared on)
        if not dynamic_batch:
            compile_module.reset()
        release(device)

    eager_ms = comparison.baseline.mean_ms
    # the cell's first call is the cold compiling one, not compare's own first (warm) call
    measurement = dataclasses.replace(comparison.candidate, first_call_ms=compiled.cold_calls_ms[0])
    report = _compile_report(compiled, compilation, batch_size, at_end, eager_ms, measurement.mean_ms)
    if portable_cache and not aot and fresh is not None:
        report["portable_cache"] = fresh
    eager_energy = None
    if energy_block is not None and energy_block.get("eager") is not None:
        eager_energy = {"timed_runs": energy_block.get("timed_runs"), "eager": energy_block["eager"]}
    # eager, as the pairs measured it: an eager cell of this batch size need not time it again
    # (unless this mode's warm-up differs from the one the eager cell asks for)
    shared_eager = None if warmup != requested_warmup else CellResult(
        "eager", batch_size, comparison.baseline, memory=eager_memory, compute=compute(eager_ms),
        energy=eager_energy, shared_from=mode,
        notes=[note for note in notes if note.startswith("eager memory")])
    return CellResult(mode, batch_size, measurement, comparison=comparison, compile=report,
                      parity=parity, agreement=agreement, memory=memory, eager_memory=eager_memory,
                      compute=compute(measurement.mean_ms, eager_ms), energy=energy_block, notes=notes,
                      phases=phases, shared_eager=shared_eager, shapes=DYNAMIC if dynamic_batch else STATIC,
                      compilation=compilation)
