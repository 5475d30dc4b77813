"""The result record of a measured cell: the cell's result in the record schema."""

from __future__ import annotations

from typing import Any, Mapping

from ...measurement.compare import Comparison
from ...measurement.paired import METHOD
from ...records.build import JsonBlock, make_record
from ...variants import modes as compile_module
from ...zoo.loading import LoadedModel
from .measured_cell import CellResult
from ...vocabulary import Status


SIDES = {"baseline": "eager", "candidate": "compiled"}  # compare's sides, as a record names them


def speedup_block(comparison: Comparison, timed_with: tuple[str, ...] = (),
                  round_order: list[str] | None = None) -> JsonBlock:
    """The speed-up over interleaved eager, the eager latency it was measured against (every call, so
    that what moves eager can be read afterwards), and how the blocks ran: their size, the switch calls
    kept out of the statistics and, on a GPU, its clock after each block. ``timed_with``: the compiled modes
    timed beside that eager series (a row's, ``measured_row``), and ``round_order`` each round's order of the
    sides, eager (0) then those modes (1...)."""
    eager = comparison.baseline
    baseline = ("eager, interleaved in random-order pairs of blocks" if len(timed_with) < 2 else
                f"eager, interleaved with {', '.join(timed_with)} in random-order rounds of blocks")
    block: JsonBlock = {
        "baseline": baseline,
        "method": METHOD,
        "mean": comparison.speedup_mean,
        "mean_ci95": _bounds(comparison.speedup_mean_ci95),
        "median": comparison.speedup_median,
        "median_ci95": _bounds(comparison.speedup_median_ci95),
        "excludes_one": comparison.excludes_one,
        "paired_pvalue": comparison.pvalue,
        "pairs": comparison.blocks,
        "order_seed": comparison.order_seed,
        "order": comparison.order,
        "eager_mean_ms": eager.mean_ms,
        "eager_median_ms": eager.median_ms,
        "eager_p99_ms": eager.p99_ms,
        "eager_ci95_mean_ms": list(eager.ci95_mean_ms),
        "eager_outliers": eager.outliers,
        "eager_values": [t / 1000.0 for t in eager.times_ms],
        "block_runs": comparison.block_runs(),
        "switch_calls": comparison.switch_calls,
        "switch_ms": {SIDES[side]: [list(calls) for calls in blocks] for side, blocks in comparison.switch_ms.items()},
    }
    if timed_with:
        block["timed_with"] = list(timed_with)
    if round_order:
        block["round_order"] = list(round_order)
    if comparison.block_probes:
        block["block_clocks"] = {SIDES[side]: list(probes) for side, probes in comparison.block_probes.items()}
    return block


def _bounds(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval else None


def cell_record(result: CellResult, loaded: LoadedModel, *, study: str,
                config: JsonBlock | None = None,
                compile_options: dict[str, Any] | None = None,
                environment: JsonBlock | None = None, variant: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The result record of a measured cell. ``variant``: the identity settings it was measured under
    (``Settings.variant_fields``: its replicate, say; a missing one is its default); the loaded model's layout
    and the result's shapes and Inductor configuration stand for theirs, as what was measured."""
    compile_block = {**(compile_options or compile_module.options(result.mode)), **result.compile}
    extra: dict[str, Any] = {"model": loaded.info()}
    if result.comparison is not None:
        extra["speedup"] = speedup_block(result.comparison, result.timed_with, result.round_order)
    for name in ("parity", "agreement", "compute", "energy", "profile"):
        if getattr(result, name) is not None:
            extra[name] = getattr(result, name)
    if result.shared_from is not None:  # one measurement, several records: say so
        row = len(result.timed_with) > 1
        extra["shared_measurement"] = {
            "with_compile_mode": result.shared_from,
            "design": (f"eager series of the row timed with {', '.join(result.timed_with)} in random-order "
                       "rounds of blocks" if row else
                       f"eager side of the {result.shared_from} cell's random-order pairs of blocks") +
                      ", measured there interleaved with the compiled runs; not timed again",
            **({"timed_with": list(result.timed_with)} if result.timed_with else {})}
    if result.notes:  # figures taken after the timed runs that could not be taken
        extra["notes"] = list(result.notes)
    memory: JsonBlock | None = result.memory
    if result.eager_memory is not None:
        memory = {**(memory or {}), "eager": result.eager_memory}
    cell: JsonBlock = {"study": study, "task": loaded.task, "model": loaded.key, "batch_size": result.batch_size,
                       "compile_mode": result.mode, "dtype": loaded.dtype, "device": loaded.device, **(variant or {}),
                       "memory_format": loaded.memory_format, "shapes": result.shapes, "inductor": result.inductor}
    return make_record(
        cell, status=Status.OK, measurement=result.measurement, memory=memory, compile=compile_block,
        # the weights measured, never the request ("auto" resolves to random or pretrained)
        config={**(config or {}), "weights": loaded.weights}, environment=environment,
        extra=extra)
