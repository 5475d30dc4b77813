"""Records as a table: the latest record of each cell, one row each, for the report and notebooks.

Every table and plot of the report, and of a task notebook, starts from ``frame``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from ..errors import UserError
from ..measurement import stats
from ..paths import PROJECT_ROOT
from ..records.schema import CompileBlock, LatencyBlock, MemoryBlock, Record, SpeedupBlock
from .cell_text import gate_cannot_fail
from .energy_readings import energy_columns
from .region_memory import region_columns
from .replicate_rows import combined, replicate_columns
from ..records.key import eager_side_stands_for_its_cell, latest_per_key
from ..records.results_file import read_records
from ..parameters import text_list
from ..zoo.registry import label_of
from .i18n import DYNAMIC_BATCH_SUFFIX, INDUCTOR_SEPARATOR
from ..vocabulary import COMPILED_MODE_ORDER, CompileMode, Status

TASK_ORDER = ["image-classification", "image-segmentation", "object-detection"]
TORCH_SEPARATOR = " · torch "  # an environment: its device, then its torch version where several
# Variants are folded into the names tables group by, so that each is a row or a column of its own
# beside the guide's way: channels_last into the model's label, one compilation for all batch sizes
# into the mode's name (``DYNAMIC_BATCH_SUFFIX``, which the catalog translates).
CHANNELS_LAST_LABEL = " (channels_last)"


def project_paths(results_paths: Iterable[str | os.PathLike] | str | os.PathLike) -> list[Path]:
    """A notebook's ``results_paths`` as paths: a list, one path, or one string of comma-separated
    paths (papermill's ``-p``; a path with a comma goes in a list); relative ones are the
    project's (JupyterLab runs from notebooks/)."""
    if isinstance(results_paths, os.PathLike):
        results_paths = [results_paths]
    if not isinstance(results_paths, str):
        results_paths = [os.fspath(path) for path in results_paths]
    paths = [Path(item) for item in text_list("results_paths", results_paths)]
    return [path if path.is_absolute() else PROJECT_ROOT / path for path in paths]


def results_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """results.jsonl files from files or study folders."""
    files = []
    for path in map(Path, paths):
        candidate = path / "results.jsonl" if path.is_dir() else path
        if not candidate.exists():
            raise UserError(f"no results at {path} (expected a results.jsonl or a study folder)")
        files.append(candidate)
    return files


class DuplicateCellWarning(UserWarning):
    """Two records claim the same row of the report; the later one is shown. ``record`` is that later one (a view
    that says it in its own words lists them: the exploration notebook)."""

    def __init__(self, message: str, record: Record | None = None) -> None:
        super().__init__(message)
        self.record = record


# a row's cell, whichever machine measured it (``row_key``)
MACHINE_KEY = ["device_name", "torch_version", "task", "model", "memory_format", "shapes", "inductor", "batch_size",
               "compile_mode", "dtype"]


def latest_records(paths: Iterable[str | os.PathLike]) -> list[Record]:
    """Every cell's latest record (``records.key.latest_per_key``: a cell measured again replaces its earlier record,
    an error included), across all the files given. Two records that differ in settings or host but would fill the
    same row of a table are not averaged: the later one is shown, and a warning names both."""
    shown: dict[tuple, Record] = {}
    for record in latest_per_key(read_records(results_files(paths))):
        cell = record.cell
        row = (*row_key(record), cell.replicate)
        if row in shown:
            earlier = shown[row]
            named = f"{cell.model}, batch {cell.batch_size}, {cell.compile_mode}, {device_name(record)}"
            warnings.warn(DuplicateCellWarning(
                f"two records claim one cell ({named}): {_where(earlier)} and {_where(record)} differ in their "
                "settings or host; the later is shown", record=record), stacklevel=2)
        shown[row] = record
    return list(shown.values())


def row_key(record: Record) -> tuple:
    """A record's cell as a row of the report holds it, whichever machine measured it (``MACHINE_KEY``'s values)."""
    cell = record.cell
    return (device_name(record), record.environment.torch_version, cell.task, cell.model, cell.memory_format,
            cell.shapes, cell.inductor, cell.batch_size, cell.compile_mode, cell.dtype)


def machine_of(record: Record) -> str | None:
    """The machine that measured a GPU record: its GPU's UUID (None for a CPU's, or a GPU without one)."""
    gpu = record.environment.gpu("cuda:0") if record.cell.device_kind == "cuda" else None
    return gpu.uuid if gpu is not None else None


def with_machines(data: pd.DataFrame, shown: Iterable[Record], every: Iterable[Record]) -> pd.DataFrame:
    """``data`` with ``machines``: how many GPUs (by UUID) measured the figure each row shows (its records among
    ``shown``), and ``machines_all``: how many measured its cell (``every`` machine's ``ok`` records); NaN where
    none is known (a CPU's cell, a GPU without a UUID)."""
    if data.empty:
        return data

    def counts(records: Iterable[Record]) -> list[float]:
        seen: dict[tuple, set[str]] = {}
        for record in records:
            machine = machine_of(record)
            if record.status == Status.OK and machine:
                seen.setdefault(row_key(record), set()).add(machine)
        return [len(seen.get(tuple(row[column] for column in MACHINE_KEY), ())) or np.nan
                for _, row in data.iterrows()]

    return data.assign(machines=counts(shown), machines_all=counts(every))


def _where(record: Record) -> str:
    if record.origin is None:
        return "?"
    source, line = Path(record.origin[0]), record.origin[1]
    return f"{source.parent.name}/{source.name}:{line}"


def device_name(record: Record) -> str:
    environment = record.environment
    if record.cell.device_kind == "cuda":
        cap = record.config.gpu_memory_gib  # a smaller card, emulated
        return (environment.gpu_name("cuda:0") or "GPU") + (f" ({cap:g} GiB cap)" if cap is not None else "")
    kind = environment.accelerator_type  # a cluster's declared kind of CPU node
    return f"CPU ({environment.cpu_model or 'unknown'}{f', {kind}' if kind else ''})"


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else value


def frame(records: Iterable[Record | Mapping[str, Any]]) -> pd.DataFrame:
    """One row per record (a ``Record``, or one as its JSON line holds it) with everything the report shows."""
    rows = pd.DataFrame([{**_row(record), **replicate_columns(record)} for record in map(Record.of, records)])
    result = _with_eager_from_pairs(combined(rows))
    if not result.empty:
        result["task_rank"] = result["task"].map({t: i for i, t in enumerate(TASK_ORDER)}).fillna(9)
        result["environment"] = environments(result)
    return result


def row_names(record: Record) -> tuple[str, str]:
    """The model and the mode as the rows name them: "ResNet (channels_last)", "default+dynamic-batch"."""
    cell = record.cell
    return (label_of(cell.model) + (CHANNELS_LAST_LABEL if cell.memory_format == "channels_last" else ""),
            cell.compile_mode + (DYNAMIC_BATCH_SUFFIX if cell.shapes == "dynamic" else "")
            + (INDUCTOR_SEPARATOR + cell.inductor if cell.inductor != "default" else ""))


def _row(record: Record) -> dict[str, Any]:
    cell, latency, speedup = record.cell, record.latency, record.speedup
    compiled = record.compile or CompileBlock()
    memory = record.memory or MemoryBlock()
    parity, compute, config = record.parity, record.compute, record.config
    cuda = cell.device_kind == "cuda"
    count = latency.count if latency else 0
    label, mode = row_names(record)
    eager_values = speedup.eager_values if speedup else None
    interval = speedup.mean_ci95 if speedup and speedup.mean_ci95 else [np.nan, np.nan]
    portable, batch_shapes = compiled.portable_cache, compiled.batch_shapes
    return {
        "device_name": device_name(record), "study": cell.study, "torch_version": record.environment.torch_version,
        "task": cell.task, "model": cell.model, "label": label, "device": cell.device,
        "memory_format": cell.memory_format, "shapes": cell.shapes, "error": record.error_line,
        "batch_size": cell.batch_size, "compile_mode": cell.compile_mode, "mode": mode, "inductor": cell.inductor,
        "dtype": cell.dtype, "status": record.status,
        "mean_ms": latency.mean * 1e3 if latency else np.nan,
        "p50_ms": latency.p50 * 1e3 if latency else np.nan,
        "median_ms": latency.median * 1e3 if latency else np.nan,
        "p99_ms": latency.p99 * 1e3 if latency else np.nan,
        "cv": _cv(latency.values if latency else None),  # both sides' spread by one rule, from their calls
        "outlier_fraction": (latency.outliers or 0) / count if latency and count else np.nan,
        "outlier_shift": _shift(latency.values if latency else None),
        "speedup": speedup.mean if speedup else np.nan,
        "ci_low": interval[0], "ci_high": interval[1],
        "eager_interleaved_ms": _or_nan(speedup.eager_mean_ms if speedup else None),
        "eager_interleaved_median_ms": _or_nan(speedup.eager_median_ms if speedup else None),
        "eager_interleaved_p99_ms": _or_nan(speedup.eager_p99_ms if speedup else None),
        "eager_interleaved_cv": _cv(eager_values),
        "eager_interleaved_shift": _shift(eager_values),
        # the design since the first GPU run: each block's first call kept out (NaN: measured before it)
        "switch_calls": _or_nan(speedup.switch_calls if speedup else None),
        **_switch_costs(latency, speedup, cell.compile_mode),
        # the compiled modes timed beside its eager series (since rows; None: each mode had an eager series of its own)
        "timed_with": ", ".join(speedup.timed_with) if speedup and speedup.timed_with else None,
        **_clocks_and_trend(speedup),
        "eager_source": None,  # an eager row made from a compiled cell's pairs: that cell's mode
        "eager_side_stands": eager_side_stands_for_its_cell(record),  # its pairs' eager is the eager cell
        "parity": parity.parity if parity else None,
        # a pass that says nothing: every output of eager below the tolerance (``cell_text.gate_cannot_fail``)
        "parity_blind": gate_cannot_fail(record),
        # what judged it: float64, eager's own dtype ("same-dtype") or nothing ("none"); at which tolerance
        "parity_reference": parity.reference if parity else None,
        "parity_tolerance": parity.tolerance.key if parity and parity.tolerance else None,
        "pvalue": speedup.paired_pvalue if speedup else None, "pairs": speedup.pairs if speedup else None,
        "speedup_method": speedup.method if speedup else None,
        "agreement": record.agreement.value if record.agreement else None,
        "compile_s": (compiled.cold_ms / 1e3  # the cost a first user pays
                      if compiled.cold_ms is not None else np.nan),
        "compile_warm_s": (compiled.warm_ms / 1e3 if compiled.warm_ms is not None else np.nan),
        # start-up: a compiled model's time to its first answer, as a process meets it
        "first_answer_s": _seconds(compiled.cold_calls_ms),
        "warm_first_answer_s": _seconds(compiled.warm_calls_ms),
        "fresh_process_s": fresh_process_seconds(compiled),
        "fresh_cache_hits": portable.fx_graph_cache_hits if portable else None,
        "batch_recompiles": batch_shapes.recompiles_at_this_batch_size if batch_shapes else None,
        "compiled_at_batch": batch_shapes.compiled_at_batch_size if batch_shapes else None,
        "graphs": compiled.graphs, "graph_breaks": compiled.graph_breaks,
        "recompiles": compiled.recompiles,
        "break_even": compiled.break_even_calls,
        # the warm compile is measured at the first compiled cell of its model and mode in a kernel, whose cold one
        # was that kernel's first of them (Segformer at batch 1 on the H200: 16.7 s, against 10.2 and 9.8 s at 4 and
        # 16): the calls the warm cost pays off after, beside the cold
        "first_of_mode_in_kernel": compiled.warm_ms is not None and compiled.cold_measured_in is None,
        # the cold compile a compile process made beside the measuring kernel, on cores of its own (compile ahead)
        "cold_compiled_ahead": bool(compiled.extra("compiled_ahead")),
        "break_even_warm": _warm_break_even(compiled, speedup, latency),
        # a CUDA-graph mode's pool counts whether inductor kept its graphs or not: what the mode asked
        **region_columns("", memory, cuda,
                         graphs=cell.compile_mode != CompileMode.EAGER and bool(compiled.cuda_graphs_requested)),
        **region_columns("eager_", memory.eager or MemoryBlock(), cuda),  # eager takes no pool: one alive is a compilation's
        "reserved_bytes": memory.cuda_peak_reserved_increase_bytes,
        "graph_pool_bytes": memory.cuda_graph_pool_bytes,
        "graph_pool_shared_with": ", ".join(memory.cuda_graph_pool_shared_with or []) or None,
        # what the mode asked for, and what inductor did (True, "partial", False; see variants.cuda_graph_checks)
        "cuda_graphs_requested": compiled.cuda_graphs_requested, "cuda_graphs": compiled.cuda_graphs,
        "flops": compute.flops if compute else None,
        "tflops": compute.tflops if compute else None,
        "percent_of_peak": compute.percent_of_peak if compute else None,
        "eager_tflops": compute.eager_tflops if compute else None,
        "eager_percent_of_peak": compute.eager_percent_of_peak if compute else None,
        # joules, each energy window's pace and the throttle reasons read around it and around the timed runs
        **energy_columns(record.energy, cell.compile_mode == CompileMode.EAGER),
        "throughput": _or_nan(record.throughput.value if record.throughput else None),
        "profile": record.profile,  # why it got faster (report.why); None: not profiled
        "weights": config.weights, "backend": config.backend,
        "beside_compiles": config.beside_compiles,  # compile processes beside its timing: compiling, or paused
        "timer": latency.timer if latency else None, "warmup": latency.warmup if latency else None,
        "runs": count or None,
    }


def _warm_break_even(compiled: CompileBlock, speedup: SpeedupBlock | None, latency: LatencyBlock | None) -> float:
    """The calls after which the warm compile pays for itself, by the saving per call the cold break-even reads
    (the pairs' eager mean less the compiled one); NaN where no warm compile was measured here, or where compiling
    never pays (the cold column says never)."""
    if compiled.warm_ms is None or speedup is None or speedup.eager_mean_ms is None or latency is None:
        return np.nan
    calls = stats.break_even_calls(compiled.warm_ms, speedup.eager_mean_ms, latency.mean * 1e3)
    return np.nan if calls is None else float(calls)


def _shift(values: list[float] | None) -> float:
    return stats.outlier_shift(values) if values else np.nan


def _cv(values: list[float] | None) -> float:
    """The calls' coefficient of variation (``measurement.stats.summarize``'s); NaN where none were timed."""
    return float(stats.summarize(values)["cv"]) if values else np.nan


def _switch_costs(latency: LatencyBlock | None, speedup: SpeedupBlock | None, mode: str) -> dict[str, float]:
    """What the first call after switching sides cost each side (ms, the median over the blocks that followed the
    other side's: half the pairs start with the side that ended the pair before, and their first call switched
    nothing; on the H200 counting them made ResNet's 43.2 % read 41.1 %); NaN in a record measured before switch
    calls were kept apart, or without its eager runs or the order its blocks ran in."""
    costs = {"switch_cost_ms": np.nan, "eager_switch_cost_ms": np.nan,
             "switch_cost_share": np.nan, "eager_switch_cost_share": np.nan}  # of each block's mean (median)
    switched = speedup.after_a_switch(mode) if speedup is not None else None
    if speedup is None or not speedup.block_runs or not speedup.switch_calls or switched is None:
        return costs
    switch, sizes = speedup.switch_ms, speedup.block_runs
    for prefix, side, switch_ms, values in (
            ("", "compiled", switch.compiled if switch else None, latency.values if latency else None),
            ("eager_", "eager", switch.eager if switch else None, speedup.eager_values)):
        if values and switch_ms and len(switch_ms) == len(switched[side]):
            steady = stats.split_blocks([value * 1e3 for value in values], sizes)
            kept = [(calls, block) for calls, block, real in zip(switch_ms, steady, switched[side]) if real]
            calls, blocks = [calls for calls, _ in kept], [block for _, block in kept]
            costs[f"{prefix}switch_cost_ms"] = stats.switch_cost(calls, blocks)
            costs[f"{prefix}switch_cost_share"] = stats.switch_cost(calls, blocks, share=True)
    return costs


def _clocks_and_trend(speedup: SpeedupBlock | None) -> dict[str, float]:
    """The GPU's SM clock and temperature read after every block (both sides: lowest and highest), and how
    eager's block means moved over the cell: the last third's mean over the first third's, less 1. NaN in a
    record that has none (measured before NVML was read per block, or on a CPU)."""
    clocks_read = speedup.block_clocks if speedup else None
    probes = [*(clocks_read.eager or []), *(clocks_read.compiled or [])] if clocks_read else []
    clocks = [probe.sm_clock_mhz for probe in probes if probe.sm_clock_mhz is not None]
    temperatures = [probe.temperature_c for probe in probes if probe.temperature_c is not None]
    result = {"sm_clock_min_mhz": min(clocks, default=np.nan), "sm_clock_max_mhz": max(clocks, default=np.nan),
              "temperature_min_c": min(temperatures, default=np.nan),
              "temperature_max_c": max(temperatures, default=np.nan), "eager_trend": np.nan}
    values, sizes = (speedup.eager_values, speedup.block_runs) if speedup else (None, None)
    if values and sizes and len(sizes) >= 3:
        means = [float(np.mean(block_values)) for block_values in stats.split_blocks(values, sizes)]
        third = len(means) // 3
        result["eager_trend"] = float(np.mean(means[-third:]) / np.mean(means[:third]) - 1)
    return result


# An eager cell no record holds, whose figures a compiled cell's pairs measured: the columns it takes
# from that compiled row (eager's own column -> the eager row's).
EAGER_FROM_PAIRS = {"eager_interleaved_ms": "mean_ms", "eager_interleaved_median_ms": "median_ms",
                    "eager_interleaved_p99_ms": "p99_ms", "eager_interleaved_cv": "cv",
                    "eager_interleaved_shift": "outlier_shift", "eager_peak_bytes": "peak_bytes",
                    "eager_peak_method": "peak_method", "eager_tflops": "tflops",
                    "eager_percent_of_peak": "percent_of_peak", "eager_joules": "joules",
                    "eager_window_ms": "window_ms", "eager_energy_throttled": "energy_throttled"}
# what an eager row of the same cell shares with the compiled row it comes from
SAME_CELL = ["device_name", "torch_version", "task", "model", "label", "device", "memory_format", "batch_size",
             "dtype", "flops", "weights", "timer", "runs", "throttled"]


def _with_eager_from_pairs(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` and, for every eager cell that no record holds but a compiled cell measured (the eager side
    of its pairs, where it stands for the eager cell: ``records.key.eager_side_stands_for_its_cell``, the rule
    resume counts by), that eager row, from the first compiled mode's pairs (``eager_source``): a figure a
    record holds is never shown as not measured. A run cut short by a time limit leaves such cells."""
    if data.empty:
        return data
    keys = ["device_name", "torch_version", "task", "model", "memory_format", "batch_size", "dtype", "device"]
    def key_of(values) -> tuple[str, ...]:  # missing values alike, whichever form pandas gave them
        return tuple("" if pd.isna(value) else str(value) for value in values)

    have_eager = {key_of(values) for values in data.loc[data["compile_mode"] == CompileMode.EAGER, keys].values}
    rank = {str(mode): i for i, mode in enumerate(COMPILED_MODE_ORDER)}
    paired = data[data["eager_side_stands"].astype(bool) & data["eager_interleaved_ms"].notna()]
    paired = paired.assign(_rank=paired["compile_mode"].map(lambda mode: rank.get(mode, len(rank))))
    added = []
    for key, group in paired.sort_values("_rank").groupby(keys, sort=False, dropna=False):
        if key_of(key) in have_eager:
            continue
        source = group.iloc[0]
        row: dict[str, Any] = {column: np.nan for column in data.columns}
        row.update({column: source[column] for column in SAME_CELL})
        row.update({to: source[column] for column, to in EAGER_FROM_PAIRS.items()})
        row["p50_ms"] = row["median_ms"]  # the same statistic
        row.update(compile_mode=CompileMode.EAGER.value, mode=CompileMode.EAGER.value, shapes="static",
                   status="ok", error=None, parity=None, profile=None, eager_source=source["compile_mode"],
                   throughput=source["batch_size"] * 1e3 / source["eager_interleaved_ms"],
                   outlier_fraction=np.nan)
        added.append(row)
    return pd.concat([data, pd.DataFrame(added, columns=data.columns)], ignore_index=True) if added else data


def _seconds(parts: list | None, scale: float = 1e-3) -> float:
    """The sum of ``parts`` (ms unless ``scale`` says otherwise) in seconds; NaN if not measured."""
    if not parts or any(part is None for part in parts):
        return np.nan
    return float(sum(parts)) * scale


def fresh_process_seconds(compiled: CompileBlock) -> float:
    """A new interpreter's imports, load and first answer (s): from an AOTInductor package, or from a
    torch.compile mode's portable cache (model build, cache load and compiling calls); NaN if neither."""
    fresh = compiled.aot.fresh_process if compiled.aot else None
    if fresh:
        return _seconds([fresh.import_s, fresh.load_s, fresh.first_call_s], scale=1.0)
    portable = compiled.portable_cache
    if portable:
        return _seconds([portable.import_s, portable.model_load_s, portable.first_answer_s], scale=1.0)
    return np.nan


def environments(data: pd.DataFrame) -> pd.Series:
    """What each row was measured on, as tables and plots group it: the device, and the torch
    version where the records span several (they are never averaged or overlaid together)."""
    if data["torch_version"].nunique(dropna=False) <= 1:
        return data["device_name"]
    return data["device_name"] + TORCH_SEPARATOR + data["torch_version"].astype(str)


def compiled_modes(data: pd.DataFrame) -> list[str]:
    # each beside its static self
    order = [name for mode in COMPILED_MODE_ORDER for name in (str(mode), mode + DYNAMIC_BATCH_SUFFIX)]
    present = set(data["mode"]) - {"eager"}
    return [mode for mode in order if mode in present] + sorted(present - set(order))
