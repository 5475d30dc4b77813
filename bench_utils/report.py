"""The report's content: tables built from result records, in a locale.

Pure functions from records to Markdown tables, so that the report notebook only
displays them and tests can check every one. Nothing is silently dropped: a cell
that ran out of memory says OOM, one that failed says error, one that was not in
the grid is marked as not measured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from . import stats
from .env import gpu_name
from .i18n import Catalog
from .models import REGISTRY
from .records import read_records, record_key

REFERENCE_CSV = Path(__file__).parent / "data" / "hf_torch_compile_reference.csv"
NOISY_CV = 0.10                 # coefficient of variation above which a cell is noisy
NOISY_OUTLIER_FRACTION = 0.05   # or more than this share of runs beyond 1.5 IQR
DRIFT = 0.10                    # standalone vs interleaved eager mean: relative difference flagged
LRI, PDI = "\u2066", "\u2069"   # Unicode isolates: keep a run left-to-right in RTL text
TASK_ORDER = ["image-classification", "image-segmentation", "object-detection"]


# --- loading ---------------------------------------------------------------------------

def results_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """results.jsonl files from files or study folders."""
    files = []
    for path in map(Path, paths):
        candidate = path / "results.jsonl" if path.is_dir() else path
        if not candidate.exists():
            raise ValueError(f"no results at {path} (expected a results.jsonl or a study folder)")
        files.append(candidate)
    return files


def latest_records(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """Every cell's latest record, across all the files given.

    A cell is the same on the same device kind, processor and torch version whatever
    study folder it came from; the record with the latest timestamp wins (a cell
    measured again replaces its earlier record, an error included).
    """
    records = read_records(results_files(paths))
    records.sort(key=lambda r: (r.get("environment") or {}).get("timestamp_utc") or "")
    latest: dict[tuple, dict[str, Any]] = {}
    for record in records:
        latest[record_key(record)[1:]] = record  # [1:]: without the study name
    return list(latest.values())


def device_name(record: dict[str, Any]) -> str:
    environment = record.get("environment") or {}
    if record["cell"]["device"].startswith("cuda"):
        return gpu_name(environment, "cuda:0") or "GPU"
    return f"CPU ({environment.get('cpu_model') or 'unknown'})"


def label_of(model: str) -> str:
    return REGISTRY[model].label if model in REGISTRY else model


def frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per record with everything the report shows."""
    rows = []
    for record in records:
        cell = record["cell"]
        latency = record.get("latency") or {}
        speedup = record.get("speedup") or {}
        compiled = record.get("compile") or {}
        memory = record.get("memory") or {}
        eager_memory = memory.get("eager") or {}
        cuda = cell["device"].startswith("cuda")
        peak_key = "cuda_peak_allocated_bytes" if cuda else "rss_peak_increase_bytes"
        count = latency.get("count") or 0
        rows.append({
            "device_name": device_name(record),
            "torch_version": (record.get("environment") or {}).get("torch_version"),
            "task": cell["task"], "model": cell["model"], "label": label_of(cell["model"]),
            "device": cell["device"],
            "error": ((record.get("error") or "").strip().splitlines() or [None])[-1],
            "batch_size": cell["batch_size"], "mode": cell["compile_mode"], "dtype": cell["dtype"],
            "status": record["status"],
            "mean_ms": latency["mean"] * 1e3 if latency else np.nan,
            "p50_ms": latency["p50"] * 1e3 if latency else np.nan,
            "median_ms": latency["median"] * 1e3 if latency else np.nan,
            "p99_ms": latency["p99"] * 1e3 if latency else np.nan,
            "cv": latency["stdev"] / latency["mean"] if latency else np.nan,
            "outlier_fraction": latency.get("outliers", 0) / count if count else np.nan,
            "speedup": speedup.get("mean", np.nan),
            "ci_low": (speedup.get("mean_ci95") or [np.nan, np.nan])[0],
            "ci_high": (speedup.get("mean_ci95") or [np.nan, np.nan])[1],
            "eager_interleaved_ms": speedup.get("eager_mean_ms", np.nan),
            "parity": (record.get("parity") or {}).get("parity"),
            "compile_s": (compiled["compile_time_ms"] / 1e3
                          if compiled.get("compile_time_ms") is not None else np.nan),
            "graphs": compiled.get("graphs"), "graph_breaks": compiled.get("graph_breaks"),
            "recompiles": compiled.get("recompiles"),
            "break_even": compiled.get("break_even_calls"),
            "peak_bytes": memory.get(peak_key), "eager_peak_bytes": eager_memory.get(peak_key),
            "reserved_bytes": memory.get("cuda_peak_reserved_bytes"),
            "throughput": (record.get("throughput") or {}).get("value", np.nan),
            "weights": (record.get("config") or {}).get("weights"),
            "timer": latency.get("timer"), "warmup": latency.get("warmup"), "runs": count or None,
        })
    result = pd.DataFrame(rows)
    if not result.empty:
        result["task_rank"] = result["task"].map({t: i for i, t in enumerate(TASK_ORDER)}).fillna(9)
    return result


# --- formatting ------------------------------------------------------------------------

def ltr(text: str, catalog: Catalog) -> str:
    """Keep numbers, model names and code left-to-right inside right-to-left text."""
    return f"{LRI}{text}{PDI}" if catalog.direction == "rtl" else text


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    def clean(value: str) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(clean, headers)) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(clean, row)) + " |" for row in rows]
    return "\n".join(lines)


def _status_text(status: str, catalog: Catalog) -> str:
    return catalog.t("status_oom") if status == "oom" else catalog.t(
        "status_error") if status == "error" else catalog.t("status_missing")


def _ms(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 2), catalog)


def _speedup(row: pd.Series, catalog: Catalog) -> tuple[str, str]:
    if pd.isna(row["speedup"]):
        return "–", "–"
    value = ltr(catalog.number(row["speedup"], 2) + "×", catalog)
    interval = ltr(f"{catalog.number(row['ci_low'], 2)}–{catalog.number(row['ci_high'], 2)}", catalog)
    return value, interval


def is_noisy(row: pd.Series) -> bool:
    return bool(row["status"] == "ok" and (row["cv"] > NOISY_CV or
                                           row["outlier_fraction"] > NOISY_OUTLIER_FRACTION))


def compiled_modes(data: pd.DataFrame) -> list[str]:
    order = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
    present = set(data["mode"]) - {"eager"}
    return [mode for mode in order if mode in present] + sorted(present - set(order))


# --- sections ---------------------------------------------------------------------------

def guide_tables(data: pd.DataFrame, catalog: Catalog) -> list[tuple[str, str]]:
    """(caption, Markdown table) per device, dtype and batch size: the guide's table and more."""
    tables = []
    if data.empty:
        return tables
    modes = compiled_modes(data)
    several_torch = data["torch_version"].nunique() > 1
    for (device, torch_version, dtype), per_device in data.groupby(
            ["device_name", "torch_version", "dtype"], sort=True, dropna=False):
        models = (per_device.sort_values(["task_rank", "label"])
                  .drop_duplicates("model")[["task", "model", "label"]].values.tolist())
        for batch in sorted(per_device["batch_size"].unique()):
            cells = per_device[per_device["batch_size"] == batch].set_index(["model", "mode"])
            headers = [catalog.t("col_task"), catalog.t("col_model"), catalog.t("col_eager_ms")]
            for mode in modes:
                headers += [catalog.t("col_compiled_ms", mode=mode), catalog.t("col_speedup", mode=mode),
                            catalog.t("col_ci95")]
            headers += [catalog.t("col_p50"), catalog.t("col_p99"), catalog.t("col_flags")]
            rows = []
            for task, model, label in models:
                row = [catalog.t(f"task_{task}") if f"task_{task}" in catalog.messages else task,
                       ltr(label, catalog)]
                flags = set()
                eager = cells.loc[(model, "eager")] if (model, "eager") in cells.index else None
                row.append(_cell_latency(eager, catalog, flags))
                first = None
                for mode in modes:
                    compiled = cells.loc[(model, mode)] if (model, mode) in cells.index else None
                    row.append(_cell_latency(compiled, catalog, flags))
                    if compiled is not None and compiled["status"] == "ok":
                        row += list(_speedup(compiled, catalog))
                        first = first if first is not None else compiled
                    else:
                        row += ["–", "–"]
                if (first is not None and eager is not None and eager["status"] == "ok"
                        and abs(eager["mean_ms"] / first["eager_interleaved_ms"] - 1) > DRIFT):
                    flags.add(catalog.t("flag_drift"))
                source = first if first is not None else eager
                ok = source is not None and source["status"] == "ok"
                row += [_ms(source["p50_ms"], catalog) if ok else "–",
                        _ms(source["p99_ms"], catalog) if ok else "–",
                        ", ".join(sorted(flags)) or ""]
                rows.append(row)
            caption = catalog.t("table_caption", device=ltr(device, catalog), batch=ltr(str(batch), catalog))
            if data["dtype"].nunique() > 1:
                caption += f" ({ltr(dtype, catalog)})"
            if several_torch:  # runs of several torch versions: one table each, named
                caption += f" ({ltr('torch ' + str(torch_version), catalog)})"
            tables.append((caption, markdown_table(headers, rows)))
    return tables


def _cell_latency(row: pd.Series | None, catalog: Catalog, flags: set[str]) -> str:
    if row is None:
        return catalog.t("status_missing")
    if row["status"] != "ok":
        return _status_text(row["status"], catalog)
    if row["parity"] == "fail":
        flags.add(catalog.t("flag_parity_fail"))
    if is_noisy(row):
        flags.add(catalog.t("flag_noisy"))
    return _ms(row["mean_ms"], catalog)


def geomean_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """Geometric-mean speed-up per device, dtype, batch size and compiled mode."""
    rows = []
    ok = data[(data["status"] == "ok") & data["speedup"].notna()] if not data.empty else data
    for (device, dtype, batch, mode), group in ok.groupby(["device_name", "dtype", "batch_size", "mode"]):
        rows.append([ltr(device, catalog), ltr(dtype, catalog), ltr(str(batch), catalog), ltr(mode, catalog),
                     ltr(catalog.number(stats.geometric_mean(group["speedup"].to_numpy()), 2) + "×", catalog),
                     ltr(str(len(group)), catalog)])
    headers = [catalog.t("col_device"), "dtype", catalog.t("col_batch"), catalog.t("col_mode"),
               catalog.t("col_geomean"), catalog.t("col_models")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def compile_table(data: pd.DataFrame, catalog: Catalog) -> str:
    compiled = data[(data["mode"] != "eager") & (data["status"] == "ok")] if not data.empty else data
    rows = []
    for _, row in compiled.sort_values(["device_name", "task_rank", "label", "mode", "batch_size"]).iterrows():
        even = row["break_even"]
        rows.append([ltr(row["device_name"], catalog), ltr(row["label"], catalog), ltr(row["mode"], catalog),
                     ltr(str(row["batch_size"]), catalog), ltr(catalog.number(row["compile_s"], 1), catalog),
                     _int(row["graphs"], catalog), _int(row["graph_breaks"], catalog),
                     _int(row["recompiles"], catalog),
                     catalog.t("never") if even is None or pd.isna(even) else ltr(catalog.number(even, 0), catalog)])
    headers = [catalog.t("col_device"), catalog.t("col_model"), catalog.t("col_mode"), catalog.t("col_batch"),
               catalog.t("col_compile_s"), catalog.t("col_graphs"), catalog.t("col_breaks"),
               catalog.t("col_recompiles"), catalog.t("col_break_even")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def _int(value: Any, catalog: Catalog) -> str:
    if value is None or pd.isna(value):
        return "–"
    return ltr(str(int(value)), catalog)


def _mib(value: Any, catalog: Catalog) -> str:
    if value is None or pd.isna(value):
        return "–"
    return ltr(catalog.number(value / 2**20, 1), catalog)


def memory_table(data: pd.DataFrame, catalog: Catalog) -> str:
    compiled = data[(data["mode"] != "eager") & (data["status"] == "ok")] if not data.empty else data
    rows = [[ltr(row["device_name"], catalog), ltr(row["label"], catalog), ltr(row["mode"], catalog),
             ltr(str(row["batch_size"]), catalog), _mib(row["eager_peak_bytes"], catalog),
             _mib(row["peak_bytes"], catalog), _mib(row["reserved_bytes"], catalog),
             ltr(catalog.number(row["throughput"], 1), catalog)]
            for _, row in compiled.sort_values(["device_name", "task_rank", "label", "mode",
                                                "batch_size"]).iterrows()]
    headers = [catalog.t("col_device"), catalog.t("col_model"), catalog.t("col_mode"), catalog.t("col_batch"),
               catalog.t("col_memory_eager"), catalog.t("col_memory_compiled"), catalog.t("col_reserved"),
               catalog.t("col_throughput")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def reference_table(data: pd.DataFrame, catalog: Catalog,
                    reference_csv: str | os.PathLike = REFERENCE_CSV) -> str:
    """The guide's speed-up beside ours for the same model, batch size and compile mode."""
    reference = pd.read_csv(reference_csv)
    reference = reference[reference["status"] == "ok"].copy()
    reference["guide_speedup"] = reference["eager_ms"] / reference["compiled_ms"]
    ours = data[(data["status"] == "ok") & data["speedup"].notna()] if not data.empty else data
    rows = []
    for _, mine in ours.sort_values(["device_name", "task_rank", "label", "batch_size"]).iterrows():
        matches = reference[(reference["model"].str.lower() == mine["label"].lower())
                            & (reference["batch_size"] == mine["batch_size"])
                            & (reference["compile_mode"] == mine["mode"])]
        for _, guide in matches.sort_values(["gpu", "torch_version"]).iterrows():
            rows.append([ltr(mine["label"], catalog), ltr(str(mine["batch_size"]), catalog),
                         ltr(mine["mode"], catalog),
                         ltr(f"{guide['gpu']} (torch {guide['torch_version']})", catalog),
                         ltr(catalog.number(guide["guide_speedup"], 2) + "×", catalog),
                         ltr(mine["device_name"], catalog),
                         ltr(catalog.number(mine["speedup"], 2) + "×", catalog)])
    headers = [catalog.t("col_model"), catalog.t("col_batch"), catalog.t("col_mode"), catalog.t("col_guide_gpu"),
               catalog.t("col_guide_speedup"), catalog.t("col_our_device"), catalog.t("col_our_speedup")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def reference_torch_versions(reference_csv: str | os.PathLike = REFERENCE_CSV) -> str:
    """The torch versions of the guide's published figures, as they are written there."""
    return " / ".join(sorted(pd.read_csv(reference_csv)["torch_version"].dropna().unique()))


def methodology_text(data: pd.DataFrame, catalog: Catalog) -> str:
    ok = data[data["status"] == "ok"] if not data.empty else data
    if ok.empty:
        return catalog.t("no_results")
    timers = sorted(set(ok["timer"].dropna()))
    weights = sorted(set(ok["weights"].dropna()))
    return catalog.t(
        "methodology_text",
        timer="; ".join(catalog.t(f"timer_{timer}") for timer in timers),
        warmup=ltr(", ".join(str(int(v)) for v in sorted(set(ok["warmup"].dropna()))), catalog),
        runs=ltr(", ".join(str(int(v)) for v in sorted(set(ok["runs"].dropna()))), catalog),
        weights="; ".join(catalog.t(f"weights_{w}") for w in weights))


ENVIRONMENT_KEYS = ["torch_version", "torch_git_version", "torch_cuda_version", "cudnn_version",
                    "driver_version", "transformers_version", "timm_version", "triton_version",
                    "python_version", "cpu_model", "cpu_count_logical", "ram_total_bytes", "os_release",
                    "torch_num_threads", "tf32_matmul", "cudnn_benchmark", "git_commit"]


def environment_tables(records: Iterable[dict[str, Any]], catalog: Catalog) -> list[tuple[str, str]]:
    """One table per device: the environment of its latest record."""
    by_device: dict[str, dict[str, Any]] = {}
    for record in records:
        by_device[device_name(record)] = record.get("environment") or {}
    tables = []
    for device, environment in sorted(by_device.items()):
        rows = []
        for key in ENVIRONMENT_KEYS:
            value = environment.get(key)
            if key == "ram_total_bytes" and value:
                value = f"{value / 2**30:.1f} GiB"
            rows.append([key, ltr("n/a" if value is None else str(value), catalog)])
        tables.append((ltr(device, catalog), markdown_table([catalog.t("col_key"), catalog.t("col_value")], rows)))
    return tables


def timer_check_text(paths: Iterable[str | os.PathLike], catalog: Catalog) -> str | None:
    """The timer check saved in a study folder (timer_check.json), in words; None if absent."""
    import json

    for path in map(Path, paths):
        saved = (path if path.is_dir() else path.parent) / "timer_check.json"
        if saved.exists():
            check = json.loads(saved.read_text(encoding="utf-8"))
            return catalog.t(
                "timer_check_text", workload=ltr(check["workload"], catalog),
                device=ltr(check["device"], catalog), reference=ltr("torch.utils.benchmark.Timer", catalog),
                ours=ltr(catalog.number(check["measure_median_ms"], 3), catalog),
                theirs=ltr(catalog.number(check["torch_timer_median_ms"], 3), catalog),
                ratio=ltr(catalog.number(check["ratio_torch_timer"], 3), catalog),
                overhead=ltr(catalog.number(check["noop_overhead_median_us"], 2), catalog))
    return None
