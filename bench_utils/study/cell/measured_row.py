"""A row: every torch.compile mode of one model, dtype and batch size, timed beside one eager series in one span
(docs/study.md, *The task notebooks*), so that a row of the page has one eager figure (timed apart, ResNet-50 at
batch 1 on the H200 read 3.69 ms eager beside default and 5.06 ms beside reduce-overhead).

The modes compile one after another as their cells would (``variants.row_compilation``), then are timed together
with ``compare_many``; each mode's figures after the timed runs are taken as its cell takes them (``measured_cell``).
The row's shared work counts in its first mode's phases, the joint timed runs in every mode's, a share each. A mode
whose compilation fails gets its exception; a failure of the joint part raises (the kernel then times each mode on
its own).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import torch

from ...measurement.block_clocks import BlockClocks
from ...measurement.compare import compare_many
from ...measurement.devices import quiet_toolchain_logs
from ...measurement.power import EnergyProbe
from ...records.key import warmed_up_as_its_eager_cell
from ...settings import Settings
from ...variants import cell_plan, modes
from ...variants.cell_plan import EAGER_MEMORY, FRESH_PROCESS, LATER_REPLICATE, WARM_COMPILE
from ...variants.compilation import forward_call
from ...variants.compile_cost import CompiledCell, no_recompile
from ...variants.inductor_config import inductor_configuration
from ...variants.kept_caches import KeptCell
from ...variants.precision import tf32_in_force
from ...variants.row_compilation import RowCompilation
from ...vocabulary import CUDA_GRAPH_MODES, CompileMode, Replicate
from ...zoo.loading import LoadedModel
from .measured_cell import CellContext, CellResult, Timed, after_timing, compiled_result, count_flops, references_for
from .after_timing import release
from .time_by_phase import Phases, now_doing

EAGER_SIDE = CompileMode.EAGER.value   # the row's baseline, as compare_many names it


def run_row(loaded: LoadedModel, batch_size: int, row_modes: Sequence[str], settings: Settings, *,
            math_settings: dict[str, Any] | None = None, warm_modes: Sequence[str] = (),
            trace_prefixes: Mapping[str, str | None] | None = None,
            kept: Mapping[str, KeptCell] | None = None) -> dict[str, CellResult | Exception]:
    """Measure ``row_modes`` of ``loaded`` at ``batch_size`` beside one eager series, as ``settings`` say: each
    mode's result, or the exception its compilation raised. ``warm_modes``: the modes whose warm compile (and
    portable cache) this row measures (their first batch size in the kernel); ``math_settings``, the traces'
    prefixes and each mode's ``kept`` caches as ``run_cell`` takes them."""
    settings = settings.checked()
    if len(set(row_modes)) != len(row_modes) or not row_modes:
        raise ValueError(f"a row needs distinct compile modes, got {list(row_modes)}")
    for mode in row_modes:
        if not cell_plan.timed_in_rows(mode, settings.shapes):
            raise ValueError(f"{mode!r} with shapes {settings.shapes!r} is not timed in a row (variants.cell_plan)")
    device = torch.device(loaded.device)
    kept = kept or {}
    plans = {mode: cell_plan.plan_cell(mode, warmup=settings.warmup, runs=settings.runs, cuda=device.type == "cuda",
                                       profile=settings.profile, shapes=settings.shapes,
                                       portable_cache=settings.portable_cache, warm_compile=mode in warm_modes,
                                       cold_kept=mode in kept and kept[mode].cold() is not None,
                                       first_replicate=settings.replicate == Replicate.R1)
             for mode in row_modes}
    tf32_by_work = tf32_in_force(math_settings or {}, device, loaded.dtype)
    inputs = loaded.inputs(batch_size)  # built once, outside every timed region
    eager_fn = forward_call(loaded.model, inputs, CompileMode.EAGER)
    phases = {mode: Phases() for mode in row_modes}
    prefixes = (trace_prefixes or {}) if settings.keep_traces else {}
    with torch.no_grad():  # inference, as the guide measures it
        flops = count_flops(eager_fn, plans[row_modes[0]], phases[row_modes[0]])
        cells = {mode: CellContext(loaded, inputs, eager_fn, device, tf32_by_work, flops, settings, plans[mode],
                                   phases[mode], batch_size, trace_prefix=prefixes.get(mode),
                                   notes=[note for key, note in plans[mode].not_taken.items() if key == LATER_REPLICATE])
                 for mode in row_modes}
        results = _row(cells, RowCompilation(row_modes, batch_size, settings, device, kept=kept,
                                             keep_cache={mode: plan.has(FRESH_PROCESS) for mode, plan in plans.items()}))
    _split_time(phases, row_modes)
    return results


def _split_time(phases: dict[str, Phases], row_modes: Sequence[str]) -> None:
    """Each mode's ``cell_s``: the others their own parts' seconds, the first mode the rest of the row's span (its
    shared work included), so that the row's records add up to its time once."""
    span = time.perf_counter() - phases[row_modes[0]].started
    for mode in row_modes[1:]:
        own = sum(phases[mode].seconds.values())
        phases[mode].stop(own)
        span -= own
    phases[row_modes[0]].stop(max(span, 0.0))


def _row(cells: dict[str, CellContext], row: RowCompilation) -> dict[str, CellResult | Exception]:
    quiet_toolchain_logs()
    lead = next(iter(cells.values()))
    failed: dict[str, Exception] = {}
    compiled: dict[str, CompiledCell] = {}
    try:
        with row.around_row():
            references = references_for(lead)
            eager_memory = lead.memory("eager memory", lead.eager_fn, lead.plan.calls(EAGER_MEMORY))
            for mode, cell in cells.items():
                try:
                    with cell.phases.timing("compile"), inductor_configuration(cell.settings.inductor) as options:
                        compiled[mode] = row.compile(mode, cell.loaded.model, cell.inputs,
                                                     warm=cell.plan.has(WARM_COMPILE))
                    compiled[mode].cold_stats["inductor_options"] = options
                except Exception as exc:  # this mode's cell fails (an OOM, say); the others go on
                    failed[mode] = exc
                    release(lead.device)
            if not compiled:
                return dict(failed)
            with inductor_configuration(lead.settings.inductor):  # the cache keys the modes compiled under
                row.make_callable(lead.loaded.model, lead.inputs, compiled,
                                  again=lambda mode: cells[mode].phases.timing("compile"))
            timed, round_order = _timed_row({mode: cells[mode] for mode in compiled}, compiled)
            figures = {}
            for mode in compiled:  # each mode's recompiles counted from its own figures' start
                compiled[mode].after_warm = modes.dynamo_snapshot()
                figures[mode] = after_timing(cells[mode], timed[mode], references, row.compilations[mode])
    finally:
        release(lead.device)
    _say_shared_pool(figures)
    warmup = next(iter(timed.values())).comparison.baseline.warmup
    stands = warmed_up_as_its_eager_cell(warmup, lead.plan.setting_warmup)
    results: dict[str, CellResult | Exception] = {}
    for mode in cells:
        if mode in failed:
            results[mode] = failed[mode]
            continue
        results[mode] = compiled_result(cells[mode], timed[mode], figures[mode], row.compilations[mode],
                                        eager_memory, eager_stands=stands, timed_with=tuple(compiled),
                                        round_order=round_order if len(compiled) > 1 else None)
    return results


def _timed_row(cells: dict[str, CellContext], compiled: dict[str, CompiledCell]) -> tuple[dict[str, Timed], list[str]]:
    """Eager and every mode in rounds of blocks, each round in its random order, no recompile allowed: each mode's
    timed result, and the rounds' order (``RowComparison.order_text``)."""
    lead = next(iter(cells.values()))
    settings = lead.settings
    warmup = max(cell.plan.warmup for cell in cells.values())  # a CUDA-graph mode's longer warm-up, for every side
    now_doing("timed")  # said before the window, never in it
    with BlockClocks(lead.device) as block_clocks, no_recompile(), \
            EnergyProbe(lead.device) as clocks:
        start = time.perf_counter()
        row = compare_many(lead.eager_fn, {mode: compiled[mode].forward for mode in cells}, baseline_name=EAGER_SIDE,
                           warmup=warmup, runs=lead.plan.runs, blocks=settings.blocks, device=lead.device,
                           sync=settings.sync, order_seed=settings.seed, between_blocks=block_clocks)
        seconds = time.perf_counter() - start
    # the joint loop: each mode its own timed calls and a share of eager's, the rest (warm-up, switch calls, the
    # reads between blocks) split evenly
    share = 1.0 / len(cells)
    eager_s = sum(row.baseline.times_ms) / 1000.0
    own_s = {mode: sum(row.comparisons[mode].candidate.times_ms) / 1000.0 for mode in cells}
    rest_s = max(0.0, seconds - eager_s - sum(own_s.values()))
    for mode, cell in cells.items():
        timed_s = own_s[mode] + eager_s * share
        cell.phases.add_loop(timed_s + rest_s * share, timed_s * 1000.0)
    return ({mode: Timed(compiled[mode], row.comparisons[mode], clocks.report) for mode in cells},
            row.order_text())


def _say_shared_pool(figures: dict[str, Any]) -> None:
    """Where a row holds several CUDA-graph modes, their graphs live in one pool (one CUDA-graph tree per device), so
    each one's ``cuda_graph_pool_bytes`` is theirs together: its memory block names the others."""
    graphed = [mode for mode in figures if mode in CUDA_GRAPH_MODES]
    for mode in graphed:
        memory = figures[mode].memory
        if len(graphed) > 1 and memory is not None and memory.get("cuda_graph_pool_bytes") is not None:
            memory["cuda_graph_pool_shared_with"] = [other for other in graphed if other != mode]
