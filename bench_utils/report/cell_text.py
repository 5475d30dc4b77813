"""One cell's record in a few lines, for a terminal (``python -m bench_utils cell``), and whether its accuracy
gate could have failed (``gate_cannot_fail``), which every view of a cell says in place of "passed"."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..records.schema import ParityBlock, Record

# The unit roundoff of each dtype the gate judges: a value computed in it is off its float64 counterpart by at least
# its last rounding, ``UNIT_ROUNDOFF * |value| / sqrt(12)`` as a root mean square over many values.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 2.0**-53}
# How far the largest value of an output can lie above its root mean square: sqrt of the elements of the largest
# output a model hands back (10**12 elements). Only a gate whose outputs lie this far below its tolerance is
# derived blind from an old record: a bound, never a guess.
LARGEST_OVER_RMS = 1e6
FP64_JUDGED = "allclose or rmse-vs-fp64"  # a tensor's ``judged_by`` where the float64 reference judged it


def gate_cannot_fail(record: Record | Mapping[str, Any]) -> bool:
    """Whether ``record``'s accuracy gate passed only because it could not fail: every floating output of eager lay
    below its tolerance (random weights made MobileNet's logits about 1e-25 on the H200), so allclose passes any
    compiled output of their scale. A record whose gate failed, or did not run, is False.

    Records since the gate says so carry it (``parity.can_fail``). For older ones it is derived where their figures
    bound the outputs' scale: eager's root-mean-square distance to float64 is at least the last rounding of its
    dtype, so ``rmse_eager * sqrt(12) / unit roundoff`` bounds each output's root mean square, and
    ``LARGEST_OVER_RMS`` times that its largest value. Every output must be bounded below the tolerance (all of them
    listed, each judged against float64); else the gate is taken as one that could fail."""
    parity = Record.of(record).parity
    if parity is None or parity.parity != "pass":
        return False
    if parity.can_fail is not None:
        return not parity.can_fail
    return _derived_blind(parity)


def _derived_blind(parity: ParityBlock) -> bool:
    """An old record's gate, blind by the bound ``gate_cannot_fail`` states."""
    tol, roundoff = parity.tolerance.tol if parity.tolerance else None, UNIT_ROUNDOFF.get(parity.dtype or "")
    tensors = parity.per_tensor or {}
    if tol is None or roundoff is None or not tensors or len(tensors) != parity.tensors:
        return False
    for found in tensors.values():
        if not isinstance(found, Mapping) or found.get("judged_by") != FP64_JUDGED:
            return False
        rmse = found.get("rmse_eager")
        if not isinstance(rmse, (int, float)) or isinstance(rmse, bool):
            return False
        if rmse * math.sqrt(12) / roundoff * LARGEST_OVER_RMS >= tol:
            return False
    return True


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _s(ms: float | None) -> str:
    return f"{ms / 1e3:.1f} s" if ms is not None else "–"


def format_cell(record: Record | Mapping[str, Any]) -> str:
    """A few lines summing up a cell record (a ``Record``, or its JSON), for terminals."""
    record = Record.of(record)
    cell, latency = record.cell, record.latency
    checkpoint = record.model.checkpoint if record.model else None
    lines = [f"{cell.model} ({checkpoint}, {record.config.weights} weights) batch {cell.batch_size}, {cell.dtype}, "
             f"{cell.device}, mode {cell.compile_mode}" + (", channels_last" if cell.memory_format == "channels_last"
                                                         else "")]
    if latency is None:
        return "\n".join([*lines, f"{record.status}: {record.error_line}"])
    lines.append(f"latency   mean {_ms(latency.mean)}, median {_ms(latency.median)}, p99 {_ms(latency.p99)} "
                 f"over {latency.count} runs")
    speedup, compiled = record.speedup, record.compile
    if speedup is not None and compiled is not None:
        interval = speedup.mean_ci95
        lines.append(f"eager     mean {speedup.eager_mean_ms:.3f} ms (interleaved)")
        lines.append(f"speed-up  {speedup.mean:.3f}x " + (
            f"(95 % CI {interval[0]:.3f} to {interval[1]:.3f} over {speedup.pairs} pairs"
            f"{', excludes 1' if speedup.excludes_one else ', includes 1'})" if interval
            else "(no interval: one pair)"))
        reasons = list(compiled.break_reasons or {})
        breaks = f"{compiled.graph_breaks} graph breaks" + (f" ({'; '.join(reasons[:3])})" if reasons else "")
        lines.append(f"compile   {_s(compiled.cold_ms)} cold, {_s(compiled.warm_ms)} warm, {compiled.graphs} graphs, "
                     f"{breaks}, {compiled.recompiles} recompiles")
        fresh = compiled.portable_cache
        if fresh and fresh.first_answer_s is not None and fresh.import_s is not None:
            lines.append(f"fresh     {fresh.first_answer_s:.1f} s to the first answer from the portable cache "
                         f"(+{fresh.import_s:.1f} s imports; {fresh.fx_graph_cache_hits} cache hits, "
                         f"{fresh.fx_graph_cache_misses} misses)")
        even = compiled.break_even_calls
        lines.append("pays off  " + (f"after {even} calls" if even is not None else "never (not faster)"))
        parity = record.parity
        if parity is not None:
            tolerance = parity.tolerance.key if parity.tolerance else None
            verdict = "not informative (outputs below the tolerance)" if gate_cannot_fail(record) else parity.parity
            lines.append(f"parity    {verdict} ({parity.method} against a {parity.reference} reference, "
                         f"tolerance {tolerance}; worst {parity.worst_tensor}, RMSE ratio {parity.rmse_ratio})")
        agreement = record.agreement
        if agreement and agreement.value is not None:
            lines.append(f"agreement {agreement.metric} {agreement.value:.4f} with eager")
    return "\n".join(lines)
