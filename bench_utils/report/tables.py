"""The report's result tables beside the guide's (``guide_table``): switch costs, clocks, compile cost, start-up,
memory, hardware, and the guide's published figures beside ours.

Pure functions from the report's frame to Markdown. Nothing is silently dropped: a cell that ran out of memory says
OOM, one that failed says error, one that was not in the grid is marked as not measured.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from .energy_text import joules_text
from .frame import compiled_modes
from .i18n import Catalog
from .markdown import (environment_label, integer, ltr, markdown_table, mib, mode_label, number, region_mib,
                       speedup_cells)
from ..vocabulary import CompileMode, Status

REFERENCE_CSV = Path(__file__).parent / "data" / "hf_torch_compile_reference.csv"


def is_true(value) -> bool:
    """True, not None or NaN (a row made from a compiled cell's pairs leaves a flag column NaN), whether pandas
    holds it as Python's bool or numpy's."""
    return pd.api.types.is_bool(value) and bool(value)


def switch_table(data: pd.DataFrame, catalog: Catalog) -> str | None:
    """What the first call after switching sides cost, per compiled cell measured with switch calls (kept out
    of its statistics): the median over the blocks that followed the other side's of that call's excess over its
    block's mean, eager and compiled, in ms and as a share of the block's mean; None where no cell has them."""
    rows = []
    for row in _compiled_rows(data):
        if pd.isna(row.get("switch_calls")) or not row.get("switch_calls"):
            continue
        rows.append([*_cell_columns(row, catalog), *(
            "–" if pd.isna(cost) else ltr(f"{catalog.number(cost, 3)} ({catalog.percent(share, 1)})", catalog)
            for cost, share in ((row["eager_switch_cost_ms"], row["eager_switch_cost_share"]),
                                (row["switch_cost_ms"], row["switch_cost_share"])))])
    return _cell_table(rows, catalog, "col_switch_eager", "col_switch_compiled") if rows else None


def clocks_table(data: pd.DataFrame, catalog: Catalog) -> str | None:
    """Per compiled cell whose record read the GPU after every block: the SM clock and temperature ranges
    over its blocks, and how eager's block means moved from the first third of the cell to the last (a move
    at a steady clock is the host's, not the GPU's); None where no cell has them."""
    def span(low: float, high: float) -> str:
        text = catalog.number(low, 0) if low == high else f"{catalog.number(low, 0)}–{catalog.number(high, 0)}"
        return ltr(text, catalog)

    rows = []
    for row in _compiled_rows(data):
        if pd.isna(row.get("sm_clock_min_mhz")):
            continue
        trend = row["eager_trend"]
        rows.append([*_cell_columns(row, catalog), span(row["sm_clock_min_mhz"], row["sm_clock_max_mhz"]),
                     span(row["temperature_min_c"], row["temperature_max_c"]),
                     "–" if pd.isna(trend) else ltr(("+" if trend >= 0 else "") + catalog.percent(trend, 1), catalog)])
    return _cell_table(rows, catalog, "col_sm_clock", "col_temperature", "col_eager_trend") if rows else None


def _compiled_rows(data: pd.DataFrame) -> list[pd.Series]:
    """The measured compiled cells, in the order every per-cell table lists them."""
    if data.empty:
        return []
    compiled = data[(data["mode"] != CompileMode.EAGER) & (data["status"] == Status.OK)]
    return [row for _, row in compiled.sort_values(["environment", "task_rank", "label", "mode",
                                                    "batch_size"]).iterrows()]


def _cell_columns(row: pd.Series, catalog: Catalog) -> list[str]:
    return [environment_label(row["environment"], catalog), ltr(row["label"], catalog),
            mode_label(row["mode"], catalog), ltr(str(row["batch_size"]), catalog)]


def _cell_table(rows: list[list[str]], catalog: Catalog, *columns: str) -> str:
    """``rows`` under the per-cell headers (device, model, mode, batch) and ``columns``' (message keys); "no results"
    where there are none."""
    headers = [catalog.t(key) for key in ("col_device", "col_model", "col_mode", "col_batch", *columns)]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


FIRST_IN_KERNEL_MARK = "†"  # a cold compile that was the first of its model and mode in its kernel
AHEAD_MARK = "‡"            # a cold compile made by a compile process beside the measuring kernel


def compile_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """Cold and warm compile cost, graphs, breaks, recompiles, and the calls after which the cold compile pays off
    and, where the warm one was measured (the first compiled cell of its model and mode in a kernel, whose cold
    compile is marked: it paid what the kernel's later compiles of them did not), the warm one."""
    rows = []
    for row in _compiled_rows(data):
        even, warm_even = row["break_even"], row["break_even_warm"]
        cold = number(row["compile_s"], 1, catalog)
        mark = (FIRST_IN_KERNEL_MARK if is_true(row.get("first_of_mode_in_kernel")) else
                AHEAD_MARK if is_true(row.get("cold_compiled_ahead")) else None)
        rows.append([*_cell_columns(row, catalog), f"{cold} {mark}" if mark and cold != "–" else cold,
                     number(row["compile_warm_s"], 1, catalog), integer(row["graphs"], catalog),
                     integer(row["graph_breaks"], catalog), integer(row["recompiles"], catalog),
                     catalog.t("never") if even is None or pd.isna(even) else ltr(catalog.number(even, 0), catalog),
                     "–" if pd.isna(row["compile_warm_s"]) else
                     catalog.t("never") if pd.isna(warm_even) else ltr(catalog.number(warm_even, 0), catalog)])
    return _cell_table(rows, catalog, "col_compile_s", "col_compile_warm_s", "col_graphs", "col_breaks",
                       "col_recompiles", "col_break_even", "col_break_even_warm")


def startup_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """Seconds from a process's start of work to the model's first answer, per variant (docs/report.md lists them):
    one eager call; a compiled mode's compiling calls, cold and warm; a fresh interpreter's, from an AOTInductor
    package or a portable cache, marked where the carried cache missed."""
    ok = data[data["status"] == Status.OK] if not data.empty else data
    rows = []
    for (environment, _, label, batch, dtype), group in ok.groupby(
            ["environment", "task_rank", "label", "batch_size", "dtype"], sort=True):
        by_mode = group.set_index("mode")
        eager = by_mode.loc["eager", "mean_ms"] if "eager" in by_mode.index else None  # ms: seconds read 0.00
        for mode in compiled_modes(group):
            row = by_mode.loc[mode]
            rows.append([environment_label(environment, catalog), ltr(label, catalog), mode_label(mode, catalog),
                         ltr(str(batch), catalog), _eager_call(row, eager, catalog),  # ms
                         number(row["first_answer_s"], 1, catalog), number(row["warm_first_answer_s"], 2, catalog),
                         _fresh_process(row, catalog)])
    return _cell_table(rows, catalog, "col_eager_first_s", "col_cold_first_s", "col_warm_first_s",
                       "col_fresh_process_s")


def _eager_call(compiled: pd.Series, eager_cell_ms: float | None, catalog: Catalog) -> str:
    """Eager compiles nothing: its start-up is one call (its first-ever call's lazy set-up is not measured apart),
    the eager side of this row's own pairs (a mode's pairs measured eager apart from another mode's: ResNet-50's
    3.69 ms beside default and 5.06 ms beside reduce-overhead on the H200); where they kept no eager figure, the
    eager cell's own, said so."""
    paired = compiled["eager_interleaved_ms"]
    if pd.notna(paired):
        return number(paired, 2, catalog)
    if eager_cell_ms is None or pd.isna(eager_cell_ms):
        return "–"
    return catalog.t("eager_cell_figure", value=number(eager_cell_ms, 2, catalog))


def _fresh_process(row: pd.Series, catalog: Catalog) -> str:
    text = number(row["fresh_process_s"], 2, catalog)
    missed = pd.notna(row["fresh_cache_hits"]) and row["fresh_cache_hits"] == 0
    return f"{text} ({catalog.t('flag_cache_missed')})" if missed else text


def dynamic_batch_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """One compilation for all batch sizes beside a compilation per batch size: the speed-up of
    each at every batch size, and the graphs the one compilation still compiled there."""
    ok = data[(data["status"] == Status.OK) & (data["shapes"] == "dynamic")] if not data.empty else data
    rows = []
    for _, one in ok.sort_values(["environment", "task_rank", "label", "mode", "batch_size"]).iterrows():
        static_mode = one["compile_mode"]
        static = data[(data["environment"] == one["environment"]) & (data["label"] == one["label"])
                      & (data["batch_size"] == one["batch_size"]) & (data["dtype"] == one["dtype"])
                      & (data["mode"] == static_mode) & (data["status"] == Status.OK)]
        static_cells = speedup_cells(static.iloc[0], catalog) if not static.empty else ("–", "–")
        rows.append([*_cell_columns(one, catalog), *static_cells, *speedup_cells(one, catalog),
                     integer(one["compiled_at_batch"], catalog), integer(one["batch_recompiles"], catalog)])
    return _cell_table(rows, catalog, "col_static_speedup", "col_ci95", "col_dynamic_speedup", "col_ci95",
                       "col_compiled_at", "col_batch_recompiles")


def memory_table(data: pd.DataFrame, catalog: Catalog) -> str:
    rows = [[*_cell_columns(row, catalog), region_mib(row["eager_peak_bytes"], row["eager_peak_method"], catalog),
             region_mib(row["peak_bytes"], row["peak_method"], catalog), _graph_pool(row, catalog),
             mib(row["reserved_bytes"], catalog), ltr(catalog.number(row["throughput"], 1), catalog)]
            for row in _compiled_rows(data)]
    return _cell_table(rows, catalog, "col_memory_eager", "col_memory_compiled", "col_graph_pool", "col_reserved",
                       "col_throughput")


def _graph_pool(row: pd.Series, catalog: Catalog) -> str:
    """The CUDA-graph pool; where a row's other CUDA-graph modes' graphs share it, saying with which."""
    shared, text = row.get("graph_pool_shared_with"), mib(row["graph_pool_bytes"], catalog)
    if not isinstance(shared, str) or not shared:
        return text
    return f"{text} ({catalog.t('pool_shared_with', modes=ltr(shared, catalog))})"


def hardware_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """FLOPs of a forward pass, achieved TFLOP/s and % of the device's dense peak, joules per batch (one call),
    eager beside compiled; a dash wherever a figure was not measured. A joules figure whose window ran at another
    pace than the timed calls (``energy_readings.PACE_RATIO``) gives both, and one measured while the GPU reported
    a throttle reason names it."""
    def with_peak(tflops, percent):
        text = number(tflops, 2, catalog)
        return text if percent is None or pd.isna(percent) else f"{text} ({catalog.percent(percent / 100)})"

    rows = [[*_cell_columns(row, catalog),
             number(row["flops"] / 1e9 if row["flops"] is not None and pd.notna(row["flops"]) else None, 2, catalog),
             with_peak(row["eager_tflops"], row["eager_percent_of_peak"]),
             with_peak(row["tflops"], row["percent_of_peak"]),
             joules_text(row["eager_joules"], row["eager_window_ms"], row["eager_interleaved_ms"],
                         row["eager_energy_throttled"], catalog),
             joules_text(row["joules"], row["window_ms"], row["mean_ms"], row["energy_throttled"], catalog)]
            for row in _compiled_rows(data)]
    return _cell_table(rows, catalog, "col_gflop", "col_tflops_eager", "col_tflops_compiled", "col_joules_eager",
                       "col_joules_compiled")


def reference_table(data: pd.DataFrame, catalog: Catalog,
                    reference_csv: str | os.PathLike = REFERENCE_CSV) -> str:
    """The guide's speed-up beside ours for the same model, batch size and compile mode."""
    reference = pd.read_csv(reference_csv)
    reference = reference[reference["status"] == Status.OK].copy()
    reference["guide_speedup"] = reference["eager_ms"] / reference["compiled_ms"]
    ours = data[(data["status"] == Status.OK) & data["speedup"].notna()] if not data.empty else data
    rows = []
    for _, mine in ours.sort_values(["environment", "task_rank", "label", "batch_size"]).iterrows():
        matches = reference[(reference["model"].str.lower() == mine["label"].lower())
                            & (reference["batch_size"] == mine["batch_size"])
                            & (reference["compile_mode"] == mine["mode"])]
        for _, guide in matches.sort_values(["gpu", "torch_version"]).iterrows():
            rows.append([ltr(mine["label"], catalog), ltr(str(mine["batch_size"]), catalog),
                         mode_label(mine["mode"], catalog),
                         ltr(f"{guide['gpu']} (torch {guide['torch_version']})", catalog),
                         ltr(catalog.number(guide["guide_speedup"], 2) + "×", catalog),
                         environment_label(mine["environment"], catalog),
                         ltr(catalog.number(mine["speedup"], 2) + "×", catalog)])
    headers = [catalog.t("col_model"), catalog.t("col_batch"), catalog.t("col_mode"), catalog.t("col_guide_gpu"),
               catalog.t("col_guide_speedup"), catalog.t("col_our_device"), catalog.t("col_our_speedup")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def reference_torch_versions(reference_csv: str | os.PathLike = REFERENCE_CSV) -> str:
    """The torch versions of the guide's published figures, as they are written there."""
    return " / ".join(sorted(pd.read_csv(reference_csv)["torch_version"].dropna().unique()))


def comparison_table(data: pd.DataFrame, catalog: Catalog) -> str | None:
    """Speed-ups side by side, one column per environment (device, torch version); None for one."""
    ok = data[(data["status"] == Status.OK) & data["speedup"].notna()] if not data.empty else data
    if ok.empty or ok["environment"].nunique() < 2:
        return None
    environments = sorted(ok["environment"].unique())
    rows = []
    for (_, label, batch, mode, dtype), group in ok.groupby(["task_rank", "label", "batch_size", "mode", "dtype"]):
        by_environment = group.set_index("environment")
        row = [ltr(label, catalog), ltr(str(batch), catalog), mode_label(mode, catalog), ltr(dtype, catalog)]
        for environment in environments:
            if environment in by_environment.index:
                value, interval = speedup_cells(by_environment.loc[environment], catalog)
                row.append(f"{value} ({interval})")
            else:
                row.append(catalog.t("status_missing"))
        rows.append(row)
    headers = [catalog.t("col_model"), catalog.t("col_batch"), catalog.t("col_mode"), catalog.t("col_dtype"),
               *(environment_label(environment, catalog) for environment in environments)]
    return markdown_table(headers, rows)
