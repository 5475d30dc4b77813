"""One cell's record in a few lines, for a terminal (``python -m bench_utils cell``)."""

from __future__ import annotations


def format_cell(record: dict) -> str:
    """A few lines summing up a cell record, for terminals."""
    cell, latency = record["cell"], record["latency"]
    lines = [f"{cell['model']} ({record['model']['checkpoint']}, {record['config']['weights']} "
             f"weights) batch {cell['batch_size']}, {cell['dtype']}, {cell['device']}, "
             f"mode {cell['compile_mode']}"
             + (", channels_last" if cell.get("memory_format") == "channels_last" else ""),
             f"latency   mean {latency['mean'] * 1e3:.3f} ms, median {latency['median'] * 1e3:.3f} ms, "
             f"p99 {latency['p99'] * 1e3:.3f} ms over {latency['count']} runs"]
    if "speedup" in record:
        speedup = record["speedup"]
        interval = speedup["mean_ci95"]
        lines.append(f"eager     mean {speedup['eager_mean_ms']:.3f} ms (interleaved)")
        lines.append(f"speed-up  {speedup['mean']:.3f}x " + (
            f"(95 % CI {interval[0]:.3f} to {interval[1]:.3f} over {speedup['pairs']} pairs"
            f"{', excludes 1' if speedup['excludes_one'] else ', includes 1'})" if interval
            else "(no interval: one pair)"))
        compiled = record["compile"]
        breaks = f"{compiled['graph_breaks']} graph breaks" + (
            f" ({'; '.join(list(compiled['break_reasons'])[:3])})" if compiled["break_reasons"] else "")
        lines.append(f"compile   {compiled['cold_ms'] / 1e3:.1f} s cold, {compiled['warm_ms'] / 1e3:.1f} s "
                     f"warm, {compiled['graphs']} graphs, {breaks}, {compiled['recompiles']} recompiles")
        fresh = compiled.get("portable_cache")
        if fresh:
            lines.append(f"fresh     {fresh['first_answer_s']:.1f} s to the first answer from the portable cache "
                         f"(+{fresh['import_s']:.1f} s imports; {fresh['fx_graph_cache_hits']} cache hits, "
                         f"{fresh['fx_graph_cache_misses']} misses)")
        even = compiled["break_even_calls"]
        lines.append("pays off  " + (f"after {even} calls" if even is not None else "never (not faster)"))
        parity = record["parity"]
        lines.append(f"parity    {parity['parity']} ({parity['method']} against a {parity['reference']} "
                     f"reference, tolerance {parity['tolerance']['key']}; worst {parity['worst_tensor']}, "
                     f"RMSE ratio {parity['rmse_ratio']})")
        agreement = record.get("agreement")
        if agreement:
            lines.append(f"agreement {agreement['metric']} {agreement['value']:.4f} with eager")
    return "\n".join(lines)
