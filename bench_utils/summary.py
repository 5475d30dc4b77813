"""Tidy tables and quick plots of records, for notebooks and terminal summaries."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

COLUMNS = ["model", "batch_size", "compile_mode", "dtype", "device", "status", "mean_ms",
           "median_ms", "p99_ms", "speedup", "speedup_ci95", "parity", "compile_s", "error"]


def tidy(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per record with the figures a reader looks at first (ms, x, s)."""
    rows = []
    for record in records:
        cell, latency = record["cell"], record.get("latency") or {}
        speedup = record.get("speedup") or {}
        compiled = record.get("compile") or {}
        rows.append({
            **{key: cell[key] for key in ("model", "batch_size", "compile_mode", "dtype", "device")},
            "status": record["status"],
            "mean_ms": latency["mean"] * 1e3 if latency else None,
            "median_ms": latency["median"] * 1e3 if latency else None,
            "p99_ms": latency["p99"] * 1e3 if latency else None,
            "speedup": speedup.get("mean"),
            "speedup_ci95": (f"{speedup['mean_ci95'][0]:.2f}-{speedup['mean_ci95'][1]:.2f}"
                             if speedup else None),
            "parity": (record.get("parity") or {}).get("parity"),
            "compile_s": (compiled["compile_time_ms"] / 1e3
                          if compiled.get("compile_time_ms") is not None else None),
            "error": (record.get("error") or "").strip().splitlines()[-1][:120]
                     if record.get("error") else None,
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def plot_latency(frame: pd.DataFrame):
    """Mean latency per model and batch size, one bar per compile mode (ok cells)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    ok = frame[frame["status"] == "ok"].copy()
    figure, axis = plt.subplots(figsize=(8, 3.5))
    if ok.empty:
        axis.text(0.5, 0.5, "no measured cells", ha="center", va="center")
        axis.set_axis_off()
        return figure
    ok["cell"] = ok["model"] + " / bs " + ok["batch_size"].astype(str)
    sns.barplot(data=ok, x="cell", y="mean_ms", hue="compile_mode", ax=axis)
    axis.set_xlabel("")
    axis.set_ylabel("mean latency (ms)")
    axis.tick_params(axis="x", rotation=30)
    figure.tight_layout()
    return figure
