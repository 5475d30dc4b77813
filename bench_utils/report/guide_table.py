"""The guide's table and more: per device, dtype and batch size, each model's eager latency, every compiled
mode's latency, speed-up and interval beside it, and the flags that say what to read with care.

Since rows (``study.cell.measured_row``) a batch size's modes are timed beside one eager series: a table whose
every row was timed so has one eager column. Records of the earlier design (each mode beside an eager series of its own)
keep an eager column per mode, and such a row is flagged *eager timed per mode*.
"""

from __future__ import annotations

from babel.lists import format_list
import pandas as pd

from ..measurement import stats
from .energy_text import throttled_flag
from .frame import compiled_modes
from .i18n import Catalog
from .markdown import environment_label, ltr, markdown_table, mode_label, ms, rests_on, speedup_cells, status_text
from .steadiness import steadiness_flags
from .tables import is_true
from ..vocabulary import CompileMode, Status


def is_noisy(row: pd.Series) -> bool:
    return row["status"] == Status.OK and stats.is_noisy(row["cv"], row.get("outlier_shift"))


def paired_eager_is_noisy(row: pd.Series) -> bool:
    """The eager side of a compiled cell's pairs, judged as a cell is (where its runs are kept)."""
    cv = row.get("eager_interleaved_cv")
    return row["status"] == Status.OK and pd.notna(cv) and stats.is_noisy(
        cv, row.get("eager_interleaved_shift"))


def lacks_cuda_graphs(row: pd.Series) -> bool:
    """A CUDA cell of a CUDA-graph mode that did not run in CUDA graphs throughout: inductor skipped
    some or all (the record's compile block gives the skips and their reasons), or its graph pool is
    empty or was not measured."""
    if row["status"] != Status.OK or not is_true(row.get("cuda_graphs_requested")) or not row["device"].startswith("cuda"):
        return False
    pool = row.get("graph_pool_bytes")  # cuda_graphs may be "partial": not True
    return not is_true(row.get("cuda_graphs")) or pool is None or pd.isna(pool) or pool <= 0


def guide_tables(data: pd.DataFrame, catalog: Catalog) -> list[tuple[str, str]]:
    """(caption, Markdown table) per device, dtype and batch size: the guide's table and more.

    Each compiled mode's speed-up stands beside the eager latency it was measured against, the eager side of its own
    pairs (in records of the earlier design one eager column made ResNet-50's 5.58x on the H200 look like 4.05x).
    Where a model has no measured compiled cell, the first eager column shows its eager cell. *drift* marks a row
    whose eager figures lie more than ``stats.DRIFT`` apart. p50 and p99 are the first compiled mode's (eager's
    where none is shown)."""
    tables: list[tuple[str, str]] = []
    if data.empty:
        return tables
    modes = compiled_modes(data)
    many = len(modes) > 1
    columns: list[str | None] = [*modes] or [None]  # None: the eager column alone
    for (device, dtype), per_device in data.groupby(["environment", "dtype"], sort=True, dropna=False):
        # by label: a variant of a model (channels_last) is a row of its own
        models = (per_device.sort_values(["task_rank", "label"])
                  .drop_duplicates("label")[["task", "label", "label"]].values.tolist())
        for batch in sorted(per_device["batch_size"].unique()):
            flat = per_device[per_device["batch_size"] == batch]
            cells = flat.set_index(["label", "mode"])
            one_eager = not many or timed_together(flat)  # every row's modes beside one eager series: one column
            headers = [catalog.t("col_task"), catalog.t("col_model")]
            for index, column in enumerate(columns):
                if not one_eager and column is not None:  # several modes: each column a mode
                    headers.append(catalog.t("col_eager_beside_ms", mode=mode_label(column, catalog)))
                elif index == 0:
                    headers.append(catalog.t("col_eager_ms"))
                if column is not None:
                    headers += [catalog.t("col_compiled_ms", mode=mode_label(column, catalog)),
                                catalog.t("col_speedup", mode=mode_label(column, catalog)), catalog.t("col_ci95")]
            side = mode_label(modes[0] if modes else CompileMode.EAGER.value, catalog)
            headers += [catalog.t("col_p50_of", mode=side), catalog.t("col_p99_of", mode=side),
                        catalog.t("col_rests_on"), catalog.t("col_flags")]
            rows = []
            for task, model, label in models:
                row = [catalog.t(f"task_{task}") if f"task_{task}" in catalog.messages else ltr(task, catalog),
                       ltr(label, catalog)]
                flags: set[str] = set()
                noisy: list[str] = []  # the series whose mean is not to take at face value, said in the flag
                eager = cells.loc[(model, "eager")] if (model, "eager") in cells.index else None
                eager_text = _cell_latency(eager, catalog, flags)
                if eager is not None and is_noisy(eager):
                    noisy.append(catalog.t("noisy_series_eager"))
                eager_means = [eager["mean_ms"]] if eager is not None and eager["status"] == Status.OK else []
                paired_eager = None  # one eager column: the figure the row's modes were timed against
                rested: list[tuple[str, pd.Series]] = []  # each measured compiled mode's cell
                for index, mode in enumerate(columns):
                    compiled = cells.loc[(model, mode)] if mode is not None and (model, mode) in cells.index else None
                    # the compiled cell where it was measured
                    measured = compiled if compiled is not None and compiled["status"] == Status.OK else None
                    if measured is not None and pd.notna(measured["eager_interleaved_ms"]):
                        if not one_eager:
                            row.append(ms(measured["eager_interleaved_ms"], catalog))
                        elif paired_eager is None:
                            paired_eager = measured["eager_interleaved_ms"]
                        eager_means.append(measured["eager_interleaved_ms"])
                        if paired_eager_is_noisy(measured):
                            noisy.append(catalog.t("noisy_series_eager"))
                    elif not one_eager:
                        row.append(eager_text if index == 0 else "–")
                    if mode is None:
                        continue
                    row.append(_cell_latency(compiled, catalog, flags, mode_label(mode, catalog) if many else None))
                    if compiled is not None and is_noisy(compiled):
                        noisy.append(catalog.t("noisy_series_compiled_mode", mode=mode_label(mode, catalog)) if many
                                     else catalog.t("noisy_series_compiled"))
                    row += list(speedup_cells(measured, catalog)) if measured is not None else ["–", "–"]
                    if measured is not None:
                        rested.append((mode, measured))
                if one_eager:  # no compiled mode measured: the eager cell's own figure
                    row.insert(2, eager_text if paired_eager is None else ms(paired_eager, catalog))
                if many and not timed_together(flat[flat["label"] == model]):
                    flags.add(catalog.t("flag_eager_per_mode"))  # measured the earlier way: one eager per mode
                if noisy:  # eager, compiled or both (with several modes, which): eager first, each once
                    eager_word = catalog.t("noisy_series_eager")
                    series = sorted(dict.fromkeys(noisy), key=lambda name: name != eager_word)
                    flags.add(catalog.t("flag_noisy", series=format_list(series, locale=catalog.locale)))
                if stats.drifted(*eager_means):
                    flags.add(catalog.t("flag_drift"))
                if eager is not None and eager["status"] != Status.OK and len(eager_means):
                    # the eager figures shown are the pairs'; the eager cell's own run failed: say so
                    flags.add(catalog.t("flag_eager_cell", status=status_text(eager["status"], catalog)))
                source = cells.loc[(model, modes[0])] if modes and (model, modes[0]) in cells.index else (
                    eager if not modes else None)
                shown = source if source is not None and source["status"] == Status.OK else None
                row += [ms(shown["p50_ms"], catalog) if shown is not None else "–",
                        ms(shown["p99_ms"], catalog) if shown is not None else "–",
                        _rests_on_text(rested, eager, catalog), ", ".join(sorted(flags)) or ""]
                rows.append(row)
            caption = catalog.t("table_caption", device=environment_label(device, catalog),
                                batch=ltr(str(batch), catalog))
            if data["dtype"].nunique() > 1:
                caption += f" ({ltr(dtype, catalog)})"
            tables.append((caption, markdown_table(headers, rows)))
    return tables


def _rests_on_text(rested: list[tuple[str, pd.Series]], eager: pd.Series | None, catalog: Catalog) -> str:
    """Runs, processes and machines of each measured compiled mode (named where there are several); the eager
    cell's where none was measured."""
    if len(rested) > 1:
        return "; ".join(f"{mode_label(mode, catalog)} {rests_on(cell, catalog)}" for mode, cell in rested)
    if rested:
        return rests_on(rested[0][1], catalog)
    return rests_on(eager, catalog) if eager is not None and eager["status"] == Status.OK else "–"


def _cell_latency(row: pd.Series | None, catalog: Catalog, flags: set[str], mode: str | None = None) -> str:
    if row is None:
        return catalog.t("status_missing")
    if row["status"] != Status.OK:
        return status_text(row["status"], catalog)
    if row["parity"] == "fail":
        flags.add(catalog.t("flag_parity_fail"))
    if is_true(row.get("parity_blind")):  # passed, but could not have failed: no word on accuracy
        flags.add(catalog.t("flag_gate_blind"))
    if row.get("parity_reference") in ("same-dtype", "none"):  # the gate fell back from float64
        flags.add(catalog.t(f"flag_parity_{row['parity_reference'].replace('-', '_')}",
                            tolerance=ltr(str(row.get("parity_tolerance")), catalog)))
    if row.get("batch_recompiles") is not None and row.get("batch_recompiles") > 0:  # one compilation did not serve
        flags.add(catalog.t("flag_batch_recompiled"))
    if lacks_cuda_graphs(row):
        flags.add(catalog.t("flag_no_cuda_graphs"))
    throttled = throttled_flag(row.get("throttled"), catalog)
    if throttled:  # the timed runs' clock was held down (a power cap, heat)
        flags.add(throttled)
    flags.update(steadiness_flags(row, catalog, mode))  # with several modes, which one shifted
    return ms(row["mean_ms"], catalog)


def timed_together(rows: pd.DataFrame) -> bool:
    """Whether each model's measured compiled modes (of one batch size and dtype, on one machine) were timed beside
    one eager series: a row (``study.cell.measured_row``) whose ``timed_with`` names them all. A model with one
    measured mode is; records measured the earlier way (no ``timed_with``) with several are not."""
    measured = rows[(rows["compile_mode"] != CompileMode.EAGER) & (rows["status"] == Status.OK)]
    for _, group in measured.groupby(_ROW_KEYS, dropna=False):
        if group["compile_mode"].nunique() < 2:
            continue
        modes = set(group["compile_mode"])
        named = [set(str(value).split(", ")) if isinstance(value, str) else set() for value in group["timed_with"]]
        if any(not modes <= together for together in named) or len({frozenset(n) for n in named}) > 1:
            return False
    return True


_ROW_KEYS = ["environment", "label", "batch_size", "dtype"]  # one row of the guide's table
