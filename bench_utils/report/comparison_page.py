"""A study re-run beside the published one: one verdict per compiled cell, as a page in each locale.

The judgement is ``regressions.compare_environments``' (the explore notebook's two-environment view), its words a
reader's: slower, faster, the same within the intervals, or inconclusive. Regressions are in red, as there.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..errors import UserError
from . import regressions
from .explorer_tables import VERDICT_KEYS, cell_named, comparison_html as comparison_table_html
from .frame import frame, latest_records
from .i18n import Catalog
from .markdown import ltr, markdown_html, plain
from .render import write_atomically
from .sanitize import CONTENT_SECURITY_POLICY

PUBLISHED, REPRODUCED = "published", "reproduced"
FOLDER = "comparison"


def both_studies(published: Path, reproduced: Path) -> pd.DataFrame:
    """The two study folders' records as one frame, each side's environment named ``PUBLISHED`` or ``REPRODUCED``."""
    sides = []
    for name, folder in ((PUBLISHED, published), (REPRODUCED, reproduced)):
        data = frame(latest_records([folder]))
        if data.empty:
            raise UserError(f"{folder} holds no record to compare")
        sides.append(data.assign(environment=name))
    return pd.concat(sides, ignore_index=True)


def verdict_line(row: pd.Series, catalog: Catalog) -> str:
    """"resnet, batch 1, default, float32: the same within the intervals (speed-up 1.21x -> 1.18x, ...)"."""
    cell = plain(cell_named(catalog, row["model"], row["batch_size"], row["mode"], row["dtype"]))  # as its table does
    verdict = catalog.t(VERDICT_KEYS[row["verdict"]])
    finite = all(pd.notna(row[name]) for name in ("speedup_base", "speedup_cand", "ratio_low", "ratio_high"))
    figures = catalog.t("reproduce_figures", published=ltr(catalog.number(row["speedup_base"]), catalog),
                        reproduced=ltr(catalog.number(row["speedup_cand"]), catalog),
                        ratio=ltr(catalog.number(row["speedup_ratio"]), catalog),
                        low=ltr(catalog.number(row["ratio_low"]), catalog),
                        high=ltr(catalog.number(row["ratio_high"]), catalog)) if finite else ""
    why = f" ({plain(row['why'])})" if row["why"] and not finite else ""  # the page's own words: not isolated
    return f"{cell}: {verdict}{why}" + (f" {figures}" if figures else "")


def _summary(table: pd.DataFrame, catalog: Catalog, tolerance: float) -> str:
    counts = table["verdict"].value_counts()
    return catalog.plural("reproduce_summary", len(table), cells=len(table), same=int(counts.get("same", 0)),
                     faster=int(counts.get("improvement", 0)), slower=int(counts.get("regression", 0)),
                     inconclusive=int(counts.get("inconclusive", 0)), tolerance=catalog.percent(tolerance))


def comparison_html(table: pd.DataFrame, catalog: Catalog, tolerance: float, names: tuple[str, str]) -> str:
    lines = "\n".join(f"<li>{markdown_html(verdict_line(row, catalog))}</li>" for _, row in table.iterrows())
    shown = comparison_table_html(table, catalog) if not table.empty else ""  # its cells escaped
    title = catalog.t("reproduce_title", published=names[0], reproduced=names[1])
    return (f'<!DOCTYPE html>\n<html lang="{catalog.locale}" dir="{catalog.direction}">\n<head>\n'
            f'<meta charset="utf-8">\n<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">\n'
            f'<title>{html.escape(title)}</title>\n</head>\n<body>\n'
            f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(_summary(table, catalog, tolerance))}</p>\n"
            f"<p>{html.escape(catalog.t('reproduce_method', tolerance=catalog.percent(tolerance)))}</p>\n"
            f"<ul>\n{lines}\n</ul>\n{shown}\n</body>\n</html>\n")


def comparison_markdown(table: pd.DataFrame, catalog: Catalog, tolerance: float, names: tuple[str, str]) -> str:
    lines = "\n".join(f"- {verdict_line(row, catalog)}" for _, row in table.iterrows())
    method = catalog.t("reproduce_method", tolerance=catalog.percent(tolerance))
    body = (f"# {catalog.t('reproduce_title', published=plain(names[0]), reproduced=plain(names[1]))}\n\n"
            f"{_summary(table, catalog, tolerance)}\n\n{method}\n\n{lines}\n")
    if catalog.direction == "rtl":
        body = f'<div dir="rtl" lang="{catalog.locale}">\n\n{body.strip()}\n\n</div>\n'
    return body


def render_comparison(published: Path, reproduced: Path, *, locales: Iterable[str] = ("en", "ar", "es"),
                      tolerance: float = 0.10) -> tuple[pd.DataFrame, list[Path]]:
    """``<reproduced>/comparison/<locale>/index.html`` and ``README.md``; the table and the paths written."""
    data = both_studies(published, reproduced)
    out = reproduced / FOLDER
    names = (os.path.basename(os.path.normpath(published)), os.path.basename(os.path.normpath(reproduced)))
    written = []
    for locale in locales:
        catalog = Catalog(locale)
        table = regressions.compare_environments(data, PUBLISHED, REPRODUCED, tolerance, catalog)
        folder = out / locale
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in (("index.html", comparison_html(table, catalog, tolerance, names)),
                           ("README.md", comparison_markdown(table, catalog, tolerance, names))):
            write_atomically(folder / name, text.encode("utf-8"))
            written.append(folder / name)
    return regressions.compare_environments(data, PUBLISHED, REPRODUCED, tolerance), written  # its reasons in English
