"""What the page says of a cell's steadiness: a regime shift inside its timed runs (``regime_eager``,
``regime_compiled``: the ratio of a side's two levels, ``report.replicate_rows``), and its ``replicates``: the fresh
processes its figures come from (its interval is then over them).
"""

from __future__ import annotations

from babel.lists import format_list
import pandas as pd

from .i18n import Catalog
from .markdown import ltr


def regime_flag(row: pd.Series, catalog: Catalog, mode: str | None = None) -> str | None:
    """``regime shift (eager x1.72 and compiled x1.66)`` where a side's block means changed level; None where
    neither did. ``mode``: the compiled side's mode, named where a row shows several."""
    compiled = catalog.t("noisy_series_compiled_mode", mode=mode) if mode else catalog.t("noisy_series_compiled")
    sides = [(catalog.t("noisy_series_eager"), row.get("regime_eager")), (compiled, row.get("regime_compiled"))]
    shifted = [f"{name} ×{ratio:.2f}" for name, ratio in sides if ratio is not None and not pd.isna(ratio)]
    return catalog.t("flag_regime", sides=format_list(shifted, locale=catalog.locale)) if shifted else None


def steadiness_flags(row: pd.Series, catalog: Catalog, mode: str | None = None) -> list[str]:
    """A compiled row's flags: its regime shift (``mode`` named where a row shows several), and its replicates
    where more than one."""
    flags = [flag for flag in (regime_flag(row, catalog, mode),) if flag]
    checked = row.get("regime_checked")
    if row.get("status") == "ok" and checked is not None and not pd.isna(checked) and not checked:
        flags.append(catalog.t("flag_regime_unchecked"))  # no blocks kept: no shift could be looked for
    replicates = row.get("replicates")
    if replicates is not None and not pd.isna(replicates) and replicates > 1:
        flags.append(catalog.t("flag_replicates", count=ltr(str(int(replicates)), catalog)))
    return flags
