"""The summary's geometric-mean speed-ups: per device, dtype, batch size, compiled mode and memory format, over the
models measured at every batch size of that device, dtype, mode and layout (its trend over batch sizes is the batch
size's, not a change of models), and over all the models measured at that batch size, the models the first leaves
out named. A cell's speed-up is ``measurement.paired``'s: the geometric mean over its pairs of blocks of eager's
block mean over compiled's, not a ratio of mean latencies; the summary's text says so.
"""

from __future__ import annotations

from babel.lists import format_list
import pandas as pd

from ..measurement import stats
from .i18n import Catalog
from .markdown import environment_label, ltr, markdown_table, mode_label
from ..vocabulary import Status


def geomean_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """The module's two geometric means per row (a model in channels_last is not counted twice in one mean: the
    layout is part of the row), the last column naming the models the first leaves out (on the H200, 8, 6 and 7
    models were measured at batch 1, 4 and 16)."""
    rows = []
    ok = data[(data["status"] == Status.OK) & data["speedup"].notna()] if not data.empty else data
    for (device, dtype, mode, layout), per_mode in ok.groupby(["environment", "dtype", "mode", "memory_format"]):
        everywhere = models_at_every_batch_size(per_mode)
        for batch, group in per_mode.groupby("batch_size"):  # numerically: 1, 4, 16
            same = group[group["label"].isin(everywhere)]
            left_out = sorted(set(group["label"]) - everywhere)
            rows.append([environment_label(device, catalog), ltr(dtype, catalog), ltr(str(batch), catalog),
                         mode_label(mode, catalog) + (f" ({ltr(layout, catalog)})" if layout != "contiguous" else ""),
                         _geomean(same["speedup"], catalog), ltr(str(len(same)), catalog),
                         _geomean(group["speedup"], catalog), ltr(str(len(group)), catalog),
                         format_list([ltr(label, catalog) for label in left_out], locale=catalog.locale) or "–"])
    headers = [catalog.t("col_device"), catalog.t("col_dtype"), catalog.t("col_batch"), catalog.t("col_mode"),
               catalog.t("col_geomean_every_batch"), catalog.t("col_models"), catalog.t("col_geomean_all"),
               catalog.t("col_models"), catalog.t("col_geomean_left_out")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def models_at_every_batch_size(rows: pd.DataFrame) -> set[str]:
    """The models (by label) that ``rows`` (one device, dtype, mode and layout) measured at each of its batch sizes."""
    per_batch = [set(group["label"]) for _, group in rows.groupby("batch_size")]
    return set.intersection(*per_batch) if per_batch else set()


def _geomean(speedups: pd.Series, catalog: Catalog) -> str:
    if speedups.empty:
        return "–"
    return ltr(catalog.number(stats.geometric_mean(speedups.to_numpy()), 2) + "×", catalog)
