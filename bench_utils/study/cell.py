"""One cell of the study: a model, a batch size and a compile mode, measured.

An eager cell is timed with ``measure``. A compiled cell is timed against eager
with ``compare`` (interleaved blocks, so drift cannot fake a speed-up), after its
first call, which compiles, is timed alone. It also reports the compile cost
(compile time, graphs, graph breaks, recompiles), the accuracy gate and the
memory of both variants. ``cell_record`` turns the result into a result record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..measurement.compare import Comparison, compare
from ..measurement.devices import quiet_toolchain_logs
from ..measurement.memory import MemoryProbe
from ..measurement.timing import Measurement, measure, time_first_call
from ..records import make_record
from ..variants import modes as compile_module
from ..variants.parity import compare_outputs
from ..zoo.loading import LoadedModel

MEMORY_CALLS = 3  # calls inside the memory probe, after warm-up


@dataclass
class CellResult:
    mode: str
    batch_size: int
    measurement: Measurement                 # this cell's latency (compiled, or eager)
    comparison: Comparison | None = None     # compiled vs interleaved eager
    compile: dict[str, Any] = field(default_factory=dict)
    parity: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    eager_memory: dict[str, Any] | None = None


def _forward(model: Callable, inputs: dict[str, torch.Tensor], mode: str) -> Callable[[], Any]:
    """One forward pass; decided here, so the timed loop holds nothing but the call."""
    if mode in compile_module.CUDA_GRAPH_MODES:
        def call_step():
            torch.compiler.cudagraph_mark_step_begin()  # a new inference: buffers may be reused
            return model(**inputs)
        return call_step
    return lambda: model(**inputs)


def _memory(fn: Callable[[], Any], device: torch.device, loaded: LoadedModel,
            inputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    with MemoryProbe(device, model=loaded.model, inputs=inputs) as probe:
        for _ in range(MEMORY_CALLS):
            fn()
    return probe.report


def run_cell(loaded: LoadedModel, *, batch_size: int, mode: str, runs: int = 300,
             warmup: int = 10, blocks: int = 10, backend: str = "inductor",
             fullgraph: bool = False, dynamic: bool | None = None) -> CellResult:
    """Measure ``loaded`` at ``batch_size`` in ``mode`` (eager, or a compile mode)."""
    compile_module.check_mode(mode)
    device = torch.device(loaded.device)
    inputs = loaded.inputs(batch_size)  # built once, outside every timed region
    eager_fn = _forward(loaded.model, inputs, "eager")
    with torch.no_grad():  # inference, as the guide measures it
        if mode == "eager":
            measurement = measure(eager_fn, warmup=warmup, runs=runs, device=device)
            return CellResult(mode, batch_size, measurement,
                              memory=_memory(eager_fn, device, loaded, inputs))

        compile_module.reset()  # no graph of an earlier model or cell may be reused
        quiet_toolchain_logs()
        reference = compile_module.clone_outputs(eager_fn())
        compiled = compile_module.compile_model(loaded.model, mode, backend=backend,
                                                fullgraph=fullgraph, dynamic=dynamic)
        compiled_fn = _forward(compiled, inputs, mode)
        at_start = compile_module.dynamo_snapshot()
        first_call_ms = time_first_call(compiled_fn, device)  # this call compiles
        after_first = compile_module.dynamo_snapshot()
        comparison = compare(eager_fn, compiled_fn, warmup=warmup, runs=runs, blocks=blocks,
                             device=device)
        parity = compare_outputs(reference, compile_module.clone_outputs(compiled_fn()),
                                 loaded.dtype)
        eager_memory = _memory(eager_fn, device, loaded, inputs)
        memory = _memory(compiled_fn, device, loaded, inputs)
        at_end = compile_module.dynamo_snapshot()

    measurement = dataclasses.replace(comparison.candidate, first_call_ms=first_call_ms)
    report = compile_module.compile_report(at_start, after_first, at_end)
    report["compile_time_ms"] = compile_module.compile_time_ms(first_call_ms,
                                                               comparison.baseline.mean_ms)
    report["break_even_calls"] = compile_module.break_even_calls(
        report["compile_time_ms"], comparison.baseline.mean_ms, measurement.mean_ms)
    return CellResult(mode, batch_size, measurement, comparison=comparison, compile=report,
                      parity=parity, memory=memory, eager_memory=eager_memory)


def speedup_block(comparison: Comparison) -> dict[str, Any]:
    """The speed-up over interleaved eager, and the eager latency it was measured against."""
    eager = comparison.baseline
    return {
        "baseline": "eager, interleaved",
        "mean": comparison.speedup_mean,
        "mean_ci95": list(comparison.speedup_mean_ci95),
        "median": comparison.speedup_median,
        "median_ci95": list(comparison.speedup_median_ci95),
        "excludes_one": comparison.excludes_one,
        "welch_pvalue": comparison.pvalue,
        "blocks": comparison.blocks,
        "eager_mean_ms": eager.mean_ms,
        "eager_median_ms": eager.median_ms,
        "eager_p99_ms": eager.p99_ms,
        "eager_ci95_mean_ms": list(eager.ci95_mean_ms),
        "eager_outliers": eager.outliers,
    }


def cell_record(result: CellResult, loaded: LoadedModel, *, study: str,
                config: dict[str, Any] | None = None,
                compile_options: dict[str, Any] | None = None,
                environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result record of a measured cell."""
    compile_block = {**(compile_options or compile_module.options(result.mode)), **result.compile}
    extra: dict[str, Any] = {"model": loaded.info()}
    if result.comparison is not None:
        extra["speedup"] = speedup_block(result.comparison)
    if result.parity is not None:
        extra["parity"] = result.parity
    memory = result.memory
    if result.eager_memory is not None:
        memory = {**(memory or {}), "eager": result.eager_memory}
    return make_record(
        study=study, task=loaded.task, model=loaded.key, batch_size=result.batch_size,
        compile_mode=result.mode, dtype=loaded.dtype, device=loaded.device, status="ok",
        measurement=result.measurement, memory=memory, compile=compile_block,
        # the weights measured, never the request ("auto" resolves to random or pretrained)
        config={**(config or {}), "weights": loaded.weights}, environment=environment,
        extra=extra)
