"""A cell's replicates as one row of the report: its runs pooled, its speed-up over the replicates.

A cell measured in replicates (fresh kernels, ``replicates`` in a grid: 3 by default on a GPU) leaves one record
per replicate, each with its share of the runs and of the pairs. The page shows one row per cell:

- latencies (mean, median, p50, p99, spread, outliers) from the replicates' calls pooled, each side;
- the speed-up and its interval over the replicates from ``measurement.replicates`` (``covers_runs``: the spread
  between runs is in the interval; docs/measurement.md, "Between runs"), from each record's per-pair log ratios;
- everything measured once per replicate and not pooled (compile cost, memory, energy, parity, profile) from
  the first replicate, which compiled first in its kernel as a cell measured once did.

A replicate that failed leaves the row to the others (its record says why). Rows of cells measured once keep
their figures, with ``replicates`` 1 and ``covers_runs`` False: their interval is within one run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..measurement import stats
from ..measurement.regime import block_regime
from ..measurement.replicates import METHOD, replicated_speedup
from ..records.schema import Record
from ..vocabulary import CompileMode

# what makes two records replicates of one cell: all of a row's identity but the replicate
CELL_COLUMNS = ["device_name", "torch_version", "task", "model", "memory_format", "shapes", "inductor", "batch_size",
                "compile_mode", "dtype", "device"]
PRIVATE = ["_values_ms", "_eager_values_ms", "_log_ratios"]


def replicate_columns(record: Record) -> dict[str, Any]:
    """What a row keeps of a record for combining it with its cell's other replicates, and each side's regime
    shift (``measurement.regime``: the levels' ratio; NaN where steady, or where the record kept no blocks, which
    ``regime_checked`` says)."""
    latency, speedup = record.latency, record.speedup
    values = [value * 1e3 for value in latency.values] if latency else None
    eager = [value * 1e3 for value in speedup.eager_values] if speedup and speedup.eager_values else None
    sizes = speedup.block_runs if speedup else None
    ratios = pair_log_ratios(values, eager, sizes)  # None: the record kept no calls in blocks
    compiled = record.cell.compile_mode != CompileMode.EAGER  # an eager record has no pairs to look in
    return {"replicate": record.cell.replicate, "_values_ms": values, "_eager_values_ms": eager,
            "_log_ratios": ratios, "regime_checked": (ratios is not None) if compiled else None,
            "regime_eager": regime_ratio(eager, sizes), "regime_compiled": regime_ratio(values, sizes)}


def regime_ratio(values_ms: list[float] | None, block_runs: list[int] | None) -> float:
    """How far apart the two levels of a side's block means are where they changed regime; NaN where not."""
    shift = block_regime(values_ms, block_runs)
    return shift.ratio if shift else np.nan


def pair_log_ratios(compiled_ms: list[float] | None, eager_ms: list[float] | None,
                    block_runs: list[int] | None) -> list[float] | None:
    """Each pair's log(eager block mean / compiled block mean), from the calls as run; None where the record
    lacks them (written before eager's calls were kept)."""
    if not compiled_ms or not eager_ms or not block_runs:
        return None
    if not sum(block_runs) == len(compiled_ms) == len(eager_ms):
        return None
    pairs = zip(stats.split_blocks(eager_ms, block_runs), stats.split_blocks(compiled_ms, block_runs))
    return [math.log(float(np.mean(eager)) / float(np.mean(compiled))) for eager, compiled in pairs]


def _side(values: list[float]) -> dict[str, float]:
    summary = stats.summarize(values)
    return {"mean": summary["mean"], "median": summary["median"], "p99": summary["p99"], "cv": summary["cv"],
            "shift": stats.outlier_shift(values)}


def _combined_row(rows: pd.DataFrame) -> dict[str, Any]:
    ok = rows[rows["status"] == "ok"]
    base = (ok if not ok.empty else rows).sort_values("replicate").iloc[0].to_dict()
    for column in ("regime_eager", "regime_compiled"):  # any replicate's shift: the largest
        base[column] = (ok if not ok.empty else rows)[column].max()
    checked = (ok if not ok.empty else rows)["regime_checked"].dropna()  # every replicate's blocks, compiled
    base["regime_checked"] = bool(checked.all()) if len(checked) else None
    if len(ok) < 2 or any(values is None for values in ok["_values_ms"]):
        return {**base, "replicates": 1}  # the figures shown are one replicate's
    base["replicates"] = len(ok)
    values = [value for replicate in ok["_values_ms"] for value in replicate]
    side = _side(values)
    base.update(mean_ms=side["mean"], median_ms=side["median"], p50_ms=side["median"], p99_ms=side["p99"],
                cv=side["cv"], outlier_shift=side["shift"], runs=len(values),
                throughput=base["batch_size"] * 1e3 / side["mean"],
                outlier_fraction=stats.outlier_count(values) / len(values))
    if all(values is not None for values in ok["_eager_values_ms"]):
        eager = _side([value for replicate in ok["_eager_values_ms"] for value in replicate])
        base.update(eager_interleaved_ms=eager["mean"], eager_interleaved_median_ms=eager["median"],
                    eager_interleaved_p99_ms=eager["p99"], eager_interleaved_cv=eager["cv"],
                    eager_interleaved_shift=eager["shift"])
    if all(ratios is not None for ratios in ok["_log_ratios"]):
        result = replicated_speedup(list(ok["_log_ratios"]))
        low, high = result.mean_ci95 or (np.nan, np.nan)
        base.update(speedup=result.mean, ci_low=low, ci_high=high, between_sd=result.between_sd,
                    covers_runs=result.covers_runs, speedup_method=METHOD, pairs=sum(map(len, ok["_log_ratios"])),
                    pvalue=np.nan)  # a p-value over 3 replicates says little: the interval says it
    return base


def combined(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` (``frame``'s rows, one per record) with each cell's replicates as one row (see the module)."""
    if data.empty or "replicate" not in data:
        return data.drop(columns=[c for c in PRIVATE if c in data])
    data = data.assign(replicates=1, between_sd=np.nan, covers_runs=False)
    keys = [column for column in CELL_COLUMNS if column in data]
    rows = [_combined_row(group) if len(group) > 1 else group.iloc[0].to_dict()
            for _, group in data.groupby(keys, sort=False, dropna=False)]
    return pd.DataFrame(rows, columns=data.columns).drop(columns=PRIVATE).reset_index(drop=True)
