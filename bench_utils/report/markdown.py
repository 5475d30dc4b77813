"""Markdown for the report: tables, and numbers kept left-to-right inside right-to-left text."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .i18n import Catalog

LRI, PDI = "\u2066", "\u2069"   # Unicode isolates: keep a run left-to-right in RTL text


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


def status_text(status: str, catalog: Catalog) -> str:
    return catalog.t("status_oom") if status == "oom" else catalog.t(
        "status_error") if status == "error" else catalog.t("status_missing")


def ms(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 2), catalog)


def speedup_cells(row: pd.Series, catalog: Catalog) -> tuple[str, str]:
    if pd.isna(row["speedup"]):
        return "–", "–"
    value = ltr(catalog.number(row["speedup"], 2) + "×", catalog)
    if pd.isna(row["ci_low"]):  # one pair of blocks: no interval exists, none is shown
        return value, "–"
    interval = ltr(f"{catalog.number(row['ci_low'], 2)}–{catalog.number(row['ci_high'], 2)}", catalog)
    return value, interval


def integer(value: Any, catalog: Catalog) -> str:
    if value is None or pd.isna(value):
        return "–"
    return ltr(str(int(value)), catalog)


def number(value: Any, digits: int, catalog: Catalog) -> str:
    """A number, or a dash where nothing was measured."""
    if value is None or pd.isna(value):
        return "–"
    return ltr(catalog.number(value, digits), catalog)


def mib(value: Any, catalog: Catalog) -> str:
    if value is None or pd.isna(value):
        return "–"
    return ltr(catalog.number(value / 2**20, 1), catalog)
