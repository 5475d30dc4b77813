"""The exploration notebook's tables as a reader sees them: the report's localized headers, figures formatted
(a speed-up as 1.23×, its interval as one "1.10–1.36" column), the flags in words, and HTML whose headers wrap
so that a table fits JupyterLab's output area (968 px at a 1400 px window) instead of being cut off at its right.

``selection`` keeps the tables' figures as numbers (what tests and papermill users read); this module words them.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from .diagnosis import parity_word
from .i18n import Catalog
from .markdown import LRI, PDI, WORD_JOINER, integer, isolated, number, speedup_cells

NOT_AVAILABLE = "–"
# ``regressions.compare_environments``' verdicts in a reader's words (message keys)
VERDICT_KEYS = {"same": "reproduce_same", "improvement": "reproduce_faster", "regression": "reproduce_slower",
                "inconclusive": "reproduce_inconclusive"}
# every table: headers wrap (a header is words, not one line), cells keep a figure on one line, and the table
# never grows past its output area
TABLE_STYLES = [
    {"selector": "", "props": "max-width: 100%; font-size: 0.95em;"},
    {"selector": "th", "props": "white-space: normal; max-width: 9em; vertical-align: bottom; text-align: right;"},
    {"selector": "td", "props": "white-space: nowrap; text-align: right;"},
    {"selector": "td.col0, th.col_heading.col0", "props": "text-align: left;"},
]
# a column of words wraps; a figure's column breaks before its interval ("!important": over the table's own
# nowrap, whose selector is the more specific)
WORDS_CELL = {"white-space": "normal !important", "max-width": "16em", "text-align": "start !important"}
FIGURE_CELL = {"white-space": "normal !important", "max-width": "7em"}


# a comparison's verdicts: regressions in red, improvements in green, inconclusive cells in yellow
VERDICT_COLOURS = {"regression": "#f8d7da", "improvement": "#d4edda", "inconclusive": "#fff3cd"}


def table_html(table: pd.DataFrame, catalog: Catalog, wrapping: tuple[str, ...] = (),
               row_colours: list[str] | None = None, breaking: tuple[str, ...] = ()) -> str:
    """``table`` (already readable: strings and numbers) as HTML that fits; ``wrapping``: columns of words;
    ``breaking``: columns of a figure with its interval; ``row_colours``: a background per row ("" for none)."""
    if table.empty:
        return f"<p>{html.escape(catalog.t('explore_nothing_here'))}</p>"
    styler = (table.style.format(precision=2, na_rep=NOT_AVAILABLE, escape="html").hide(axis="index")
              .set_table_styles(TABLE_STYLES))
    for columns, style in ((wrapping, WORDS_CELL), (breaking, FIGURE_CELL)):
        for column in columns:
            if column in table.columns:
                styler = styler.set_properties(subset=[column], **style)
    if row_colours is not None:
        colours = dict(zip(table.index, row_colours))  # by the row's label, whatever the index
        styler = styler.apply(lambda row: [f"background-color: {colours[row.name]}" if colours[row.name] else ""]
                              * len(row), axis=1)
    direction = ' dir="rtl"' if catalog.direction == "rtl" else ""
    return f"<div{direction}>{styler.to_html()}</div>"


def _number(catalog: Catalog, value: Any, digits: int = 2) -> str | None:
    """``markdown.number`` (kept left-to-right in Arabic); None where nothing was measured (the table's dash)."""
    return None if value is None or pd.isna(value) else number(value, digits, catalog)


def cell_named(catalog: Catalog, label: str, batch_size: Any, mode: str, dtype: str) -> str:
    """A cell as the tables name it, "ViT, batch 1, default, float32": in Arabic each name left-to-right."""
    def name(text: Any) -> str:
        return isolated(text, catalog)
    return catalog.t("reproduce_cell", model=name(label), batch_size=integer(batch_size, catalog),
                     mode=catalog.mode_name(mode, name), dtype=name(dtype))


def comparison_view(table: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """``regressions.compare_environments``' table as the comparison page and the explore notebook show it: the
    cell in words, each side's speed-up with its interval, their ratio with its interval, the compiled latency
    ratio, and the verdict with its reason."""
    def figures(value: str, low: str, high: str) -> list[str | None]:  # the line breaks before the interval only
        shown = [None if pd.isna(v) else f"{catalog.number(v, 2)}×" + ("" if pd.isna(lo) or pd.isna(hi) else
                 f" ({catalog.number(lo, 2)}{WORD_JOINER}–{WORD_JOINER}{catalog.number(hi, 2)})")
                 for v, lo, hi in zip(table[value], table[low], table[high])]
        return [f"{LRI}{text}{PDI}" if text and catalog.direction == "rtl" else text for text in shown]  # one run

    cells = [cell_named(catalog, *cell) for cell in zip(table["model"], table["batch_size"], table["mode"],
                                                         table["dtype"])]
    verdicts = [catalog.t(VERDICT_KEYS[verdict]) + (f": {why}" if why else "")
                for verdict, why in zip(table["verdict"], table["why"])]
    return pd.DataFrame({
        catalog.t("col_cell"): cells,
        catalog.t("col_speedup_baseline"): figures("speedup_base", "ci_low_base", "ci_high_base"),
        catalog.t("col_speedup_candidate"): figures("speedup_cand", "ci_low_cand", "ci_high_cand"),
        catalog.t("col_speedup_ratio"): figures("speedup_ratio", "ratio_low", "ratio_high"),
        catalog.t("col_compiled_latency_ratio"): [_number(catalog, v) for v in table["compiled_latency_ratio"]],
        catalog.t("col_verdict"): verdicts,
    })


def comparison_html(table: pd.DataFrame, catalog: Catalog) -> str:
    """``comparison_view`` as HTML that fits, its rows coloured by verdict."""
    if table.empty:
        return f"<p>{html.escape(catalog.t('compare_none'))}</p>"
    figures = tuple(catalog.t(key) for key in ("col_speedup_baseline", "col_speedup_candidate", "col_speedup_ratio"))
    return table_html(comparison_view(table, catalog), catalog,
                      wrapping=(catalog.t("col_cell"), catalog.t("col_verdict")), breaking=figures,
                      row_colours=[VERDICT_COLOURS.get(verdict, "") for verdict in table["verdict"]])


def latency_view(table: pd.DataFrame, catalog: Catalog, mode: str) -> pd.DataFrame:
    """``selection.latency_table`` with the report's headers for ``mode``: model, eager beside it, compiled, p99,
    the speed-up and its interval, the accuracy gate, and the flags (a cell not ok, eager's own cell where it
    drifted from the eager the speed-up was measured against, or where it is not ok)."""
    name = catalog.mode_name(mode)
    flags = []
    for row in table.itertuples(index=False):
        said = []
        status = getattr(row, "compiled_status", None)
        if isinstance(status, str) and status != "ok":
            said.append(catalog.status_name(status))
        if getattr(row, "eager_drift", None) is True:
            said.append(catalog.t("flag_eager_cell_drift", value=_number(catalog, row.eager_cell_ms)))
        eager_status = getattr(row, "eager_cell_status", None)
        if isinstance(eager_status, str) and eager_status != "ok":
            said.append(catalog.t("flag_eager_cell", status=catalog.status_name(eager_status)))
        flags.append(", ".join(filter(None, said)))
    # the report's own cells: a speed-up and its interval, the gate's verdict (a gate that could not fail is no pass)
    speedups = [speedup_cells(row, catalog) for _, row in table.iterrows()]
    gates = [None if pd.isna(row["parity"]) else parity_word(row, catalog) for _, row in table.iterrows()]
    return pd.DataFrame({
        catalog.t("col_model"): [isolated(model, catalog) for model in table["model"]],
        catalog.t("col_eager_beside_ms", mode=name): [_number(catalog, v) for v in table["eager_ms"]],
        catalog.t("col_compiled_ms", mode=name): [_number(catalog, v) for v in table["compiled_ms"]],
        catalog.t("col_p99_of", mode=name): [_number(catalog, v) for v in table["compiled_p99_ms"]],
        catalog.t("col_speedup", mode=name): [value for value, _ in speedups],
        catalog.t("col_ci95"): [interval for _, interval in speedups],
        catalog.t("col_parity"): gates,
        catalog.t("col_flags"): flags,
    })


def compile_view(table: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """``selection.compile_table`` with the report's headers."""
    def count(value: Any) -> str | None:
        return None if value is None or pd.isna(value) else integer(value, catalog)

    return pd.DataFrame({
        catalog.t("col_model"): [isolated(model, catalog) for model in table["model"]],
        catalog.t("col_compile_s"): [_number(catalog, v, 1) for v in table["cold_compile_s"]],
        catalog.t("col_compile_warm_s"): [_number(catalog, v, 1) for v in table["warm_compile_s"]],
        catalog.t("col_graphs"): [count(v) for v in table["graphs"]],
        catalog.t("col_breaks"): [count(v) for v in table["graph_breaks"]],
        catalog.t("col_recompiles"): [count(v) for v in table["recompiles"]],
        catalog.t("col_break_even"): [count(v) if v is not None and not pd.isna(v) and v >= 0 else None
                                      for v in table["break_even_calls"]],
    })


def measured_by(catalog: Catalog, eager: Any, compiled: Any) -> str:
    """Which figure a memory row's two peaks are, in words: one name where both are of one kind."""
    eager, compiled = (catalog.t(f"measured_by_{'none' if method is None or pd.isna(method) else method}")
                       for method in (eager, compiled))
    return eager if eager == compiled else catalog.t("measured_by_sides", eager=eager, compiled=compiled)


def memory_view(table: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """``selection.memory_table`` with readable headers and its figures' kinds in words."""
    return pd.DataFrame({
        catalog.t("col_model"): [isolated(model, catalog) for model in table["model"]],
        catalog.t("col_peak_eager"): [_number(catalog, v, 1) for v in table["eager_peak_mib"]],
        catalog.t("col_peak_compiled"): [_number(catalog, v, 1) for v in table["compiled_peak_mib"]],
        catalog.t("col_memory_ratio"): [_number(catalog, v) for v in table["memory_ratio"]],
        catalog.t("col_measured_by"): [measured_by(catalog, eager, compiled)
                                       for eager, compiled in zip(table["eager_method"], table["compiled_method"])],
    })


def summary_view(table: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """``selection.summary_table`` with readable headers: a status column per status found, named in words."""
    named = {"environment": catalog.t("col_environment"), "cells": catalog.t("col_cells"),
             "models": catalog.t("col_models"), "batch_sizes": catalog.t("col_batch_sizes"),
             "modes": catalog.t("col_modes"), "dtypes": catalog.t("col_dtypes"), "weights": catalog.t("col_weights")}
    return table.rename(columns={column: named.get(column) or
                                 catalog.t("col_cells_status", status=catalog.status_name(column))
                                 for column in table.columns})
