"""One cell's record in a few lines, for a terminal (``python -m bench_utils cell``)."""

from __future__ import annotations

from typing import Any, Mapping

from ..records.schema import Record


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
            lines.append(f"parity    {parity.parity} ({parity.method} against a {parity.reference} reference, "
                         f"tolerance {tolerance}; worst {parity.worst_tensor}, RMSE ratio {parity.rmse_ratio})")
        agreement = record.agreement
        if agreement and agreement.value is not None:
            lines.append(f"agreement {agreement.metric} {agreement.value:.4f} with eager")
    return "\n".join(lines)
