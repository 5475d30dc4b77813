"""Tidy tables and quick plots of records, for notebooks and terminal summaries."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

COLUMNS = ["model", "batch_size", "compile_mode", "dtype", "device", "status", "mean_ms",
           "median_ms", "p99_ms", "speedup", "speedup_ci95", "parity", "compile_s", "error"]


def tidy(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per record with the figures a reader looks at first (ms, x, s).

    A view of ``report.frame``: one flattening of records for notebooks and reports.
    """
    from .report import frame

    data = frame(list(records))
    if data.empty:
        return pd.DataFrame(columns=COLUMNS)
    data = data.rename(columns={"mode": "compile_mode"})
    data["speedup_ci95"] = [f"{low:.2f}-{high:.2f}" if pd.notna(low) else None
                            for low, high in zip(data["ci_low"], data["ci_high"])]
    data["error"] = data["error"].str.slice(0, 120)
    return data[COLUMNS].reset_index(drop=True)


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
