"""Markdown for the report: tables, numbers kept left-to-right inside right-to-left text, and
the names of environments and compile modes in the report's language."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .frame import NOT_MEASURABLE, TORCH_SEPARATOR
from .i18n import Catalog
from ..vocabulary import Status

LRI, PDI = "\u2066", "\u2069"   # Unicode isolates: keep a run left-to-right in RTL text


WORD_JOINER = "\u2060"  # no line break here, and nothing shown


def ltr(text: str, catalog: Catalog) -> str:
    """Keep numbers, model names and code left-to-right inside right-to-left text, unbroken at a hyphen: a
    narrow Arabic table header broke "(reduce-overhead)" after "reduce-", and the line's right-to-left order
    then put its bracket at the wrong end."""
    if catalog.direction != "rtl":
        return text
    return f"{LRI}{str(text).replace('-', '-' + WORD_JOINER)}{PDI}"


def environment_label(environment: str, catalog: Catalog, isolate: bool = True) -> str:
    """An environment as ``frame`` names it, in the catalog's words.

    ``frame`` keeps its names locale-neutral (they group and sort the rows): "CPU (<model>)",
    "CPU (unknown)", "GPU" where the GPU's name is not recorded, or the GPU's name; then
    " · torch <version>" where several versions were measured. The words CPU, GPU and unknown
    become the catalog's ``device_*`` messages; names and versions are kept left-to-right
    (``isolate=False`` for figures, whose text takes no isolates)."""
    code = (lambda text: ltr(text, catalog)) if isolate else str
    device, torch, version = environment.partition(TORCH_SEPARATOR)
    if device == "GPU":
        label = catalog.t("device_gpu")
    elif device.startswith("CPU (") and device.endswith(")"):
        model = device[len("CPU ("):-1]
        label = catalog.t("device_cpu", model=catalog.t("device_unknown") if model == "unknown" else code(model))
    else:
        label = code(device)
    return label + (" · " + code("torch " + version) if torch else "")


def mode_label(mode: str, catalog: Catalog) -> str:
    """A compile mode in the catalog's words, its torch.compile name kept left-to-right."""
    return catalog.mode_name(mode, lambda name: ltr(name, catalog))


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    def clean(value: str) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(clean, headers)) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(clean, row)) + " |" for row in rows]
    return "\n".join(lines)


def status_text(status: str, catalog: Catalog) -> str:
    return catalog.t("status_oom") if status == Status.OOM else catalog.t(
        "status_error") if status == Status.ERROR else catalog.t("status_missing")


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


def region_mib(value: Any, method: Any, catalog: Catalog) -> str:
    """A region's memory (``frame.region_memory``) in MiB; where it was measured but no figure could
    see it (a CPU's resident memory that did not move), says so rather than 0 or a dash."""
    if method == NOT_MEASURABLE:
        return catalog.t("memory_not_measurable")
    return mib(value, catalog)
