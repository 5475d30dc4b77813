"""One slice of a study, as the exploration notebook shows it: an environment, batch size,
compiled mode and dtype picked by the reader, and the tables of that slice.

Everything here is pandas on ``frame.frame``'s rows, so the notebook's controls and its
papermill parameters go through the same code, and tests reach all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import pandas as pd

from ..errors import UserError
from ..measurement import stats
from .frame import compiled_modes
from ..vocabulary import CompileMode

MIB = 2 ** 20


@dataclass(frozen=True)
class Selection:
    """What the reader looks at; None means the first value the results hold."""

    environment: str | None = None
    batch_size: int | None = None
    mode: str | None = None
    dtype: str | None = None


def options(data: pd.DataFrame, selection: Selection | None = None) -> dict[str, list]:
    """The values each field of a selection can take, in display order, each given the fields before it as
    ``selection`` has them (None there: the first value): the environments; that environment's batch sizes with a
    compiled cell; the compiled modes measured at that batch size; the dtypes of that mode there. So no choice
    offered draws an empty slice (a control that leads nowhere), and a field with one value has one option."""
    empty: dict[str, list] = {"environment": [], "batch_size": [], "mode": [], "dtype": []}
    if data.empty:
        return empty
    selection = selection or Selection()
    found = dict(empty, environment=sorted(data["environment"].unique()))
    environment = selection.environment if selection.environment in found["environment"] else found["environment"][0]
    on = data[data["environment"] == environment]
    compiled = on[on["mode"] != CompileMode.EAGER]
    found["batch_size"] = sorted(int(b) for b in (compiled if not compiled.empty else on)["batch_size"].unique())
    batch = _int_or_none(selection.batch_size)
    batch = batch if batch in found["batch_size"] else found["batch_size"][0]
    at_batch = compiled[compiled["batch_size"] == batch]
    found["mode"] = compiled_modes(at_batch)
    mode = selection.mode if selection.mode in found["mode"] else (found["mode"] or [None])[0]
    # float32 first, as the guide measured: the first slice a reader sees is the guide's
    found["dtype"] = sorted(at_batch[at_batch["mode"] == mode]["dtype"].unique(), key=lambda d: (d != "float32", d))
    return found


def _int_or_none(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]  # papermill -p batch_size "1"
    except (TypeError, ValueError):
        return None


def resolve(data: pd.DataFrame, selection: Selection) -> Selection:
    """``selection`` with every None filled in; a value the results do not hold is an error that
    names the values they do hold."""
    if data.empty:
        raise UserError("the results hold no records")
    resolved = selection
    for field in fields(Selection):  # environment first: the others depend on those before them
        available = options(data, resolved)[field.name]
        value = getattr(resolved, field.name)
        if field.name == "batch_size" and value is not None:
            value = int(value)
        if value is None:
            if not available:
                raise UserError(f"the results hold no compiled cell ({field.name}: none to choose)")
            value = available[0]
        elif value not in available:
            raise UserError(f"{field.name} {value!r} is not in the results; "
                            f"they hold: {', '.join(map(str, available)) or 'none'}")
        resolved = replace(resolved, **{field.name: value})
    return resolved


def cells(data: pd.DataFrame, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The compiled rows and the eager rows of a resolved selection."""
    where = ((data["environment"] == selection.environment) & (data["batch_size"] == selection.batch_size)
             & (data["dtype"] == selection.dtype))
    order = ["task_rank", "label"]
    compiled = data[where & (data["mode"] == selection.mode)].sort_values(order)
    eager = data[where & (data["mode"] == CompileMode.EAGER)].sort_values(order)
    return compiled, eager


def latency_table(data: pd.DataFrame, selection: Selection) -> pd.DataFrame:
    """One row per model: eager and compiled mean latency of the pairs the speed-up was measured from, the speed-up
    with its 95 % interval, the accuracy gate and the status; then eager's own cell, flagged where the two eager
    means drift apart (docs/report.md, "One slice"). A cell not measured is left empty."""
    compiled, eager = cells(data, selection)
    table = pd.merge(eager[["task_rank", "label", "mean_ms", "status"]],
                     compiled[["task_rank", "label", "eager_interleaved_ms", "mean_ms", "p99_ms", "speedup",
                               "ci_low", "ci_high", "parity", "parity_blind", "status", "error"]],
                     on=["task_rank", "label"], how="outer", suffixes=("_eager", "_compiled"))
    table = table.sort_values(["task_rank", "label"]).drop(columns="task_rank")
    table["eager_drift"] = [stats.drifted(alone, paired) if pd.notna(alone) and pd.notna(paired) else pd.NA
                            for alone, paired in zip(table["mean_ms_eager"], table["eager_interleaved_ms"])]
    if table["error"].isna().all():
        table = table.drop(columns="error")
    table = table.rename(columns={"label": "model", "eager_interleaved_ms": "eager_ms", "mean_ms_compiled": "compiled_ms",
                                  "p99_ms": "compiled_p99_ms", "status_compiled": "compiled_status",
                                  "mean_ms_eager": "eager_cell_ms", "status_eager": "eager_cell_status"})
    first = ["model", "eager_ms", "compiled_ms", "compiled_p99_ms", "speedup", "ci_low", "ci_high", "parity",
             "compiled_status"]
    return table[first + [c for c in table.columns if c not in first]].reset_index(drop=True)


def compile_table(data: pd.DataFrame, selection: Selection) -> pd.DataFrame:
    """What compiling cost each model: cold and warm compile, graphs, breaks, recompiles, and
    the calls after which compiling has paid for itself."""
    compiled, _ = cells(data, selection)
    columns = {"label": "model", "compile_s": "cold_compile_s", "compile_warm_s": "warm_compile_s",
               "graphs": "graphs", "graph_breaks": "graph_breaks", "recompiles": "recompiles",
               "break_even": "break_even_calls"}
    table = compiled[list(columns)].rename(columns=columns).reset_index(drop=True)
    counts = ["graphs", "graph_breaks", "recompiles", "break_even_calls"]
    table[counts] = table[counts].astype(float).round().astype("Int64")  # counts, missing where unmeasured
    return table


def memory_table(data: pd.DataFrame, selection: Selection) -> pd.DataFrame:
    """Peak memory of the compiled model against eager's (the dynamo harness's memory ratio), and which
    figure each is (``region_memory.region_memory``'s method, missing where not measured). A ratio is only taken
    between two figures of one kind."""
    compiled, _ = cells(data, selection)
    table = pd.DataFrame({"model": compiled["label"],
                          "eager_peak_mib": compiled["eager_peak_bytes"].astype(float) / MIB,
                          "compiled_peak_mib": compiled["peak_bytes"].astype(float) / MIB})
    like_for_like = (compiled["eager_peak_method"] == compiled["peak_method"]) & (table["eager_peak_mib"] > 0)
    table["memory_ratio"] = table["compiled_peak_mib"] / table["eager_peak_mib"].where(like_for_like)
    table["eager_method"], table["compiled_method"] = compiled["eager_peak_method"].values, compiled["peak_method"].values
    return table.reset_index(drop=True)


def summary_table(data: pd.DataFrame) -> pd.DataFrame:
    """Per environment: how many cells of each status, and which batch sizes, modes and dtypes."""
    if data.empty:
        return pd.DataFrame(columns=["environment", "cells"])
    rows = []
    for environment, group in data.groupby("environment"):
        row = {"environment": environment, "cells": len(group), "models": group["model"].nunique()}
        row.update(group["status"].value_counts().to_dict())
        row.update({"batch_sizes": ", ".join(map(str, sorted(group["batch_size"].unique()))),
                    "modes": ", ".join(["eager", *compiled_modes(group)] if "eager" in set(group["mode"])
                                       else compiled_modes(group)),
                    "dtypes": ", ".join(sorted(group["dtype"].unique())),
                    "weights": ", ".join(sorted(group["weights"].dropna().unique()))})
        rows.append(row)
    table = pd.DataFrame(rows)
    counts = [c for c in table.columns if c not in ("environment", "batch_sizes", "modes", "dtypes", "weights")]
    table[counts] = table[counts].fillna(0).astype(int)  # a status an environment never had: 0 cells
    return table
