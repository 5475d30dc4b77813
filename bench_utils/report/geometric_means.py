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
from .frame import compiled_modes
from .i18n import Catalog
from .markdown import environment_label, ltr, markdown_table, mode_label
from .tables import REFERENCE_CSV
from ..vocabulary import AOT_MODES, Status

GUIDE_GPU = "A100"  # the guide's GPU set beside ours: its fastest, and the one with every mode


def geomean_table(data: pd.DataFrame, catalog: Catalog) -> str:
    """The module's two geometric means per row (a model in channels_last is not counted twice in one mean: the
    layout is part of the row), the last column naming the models the first leaves out (on the H200, 8, 6 and 7
    models were measured at batch 1, 4 and 16)."""
    rows = []
    ok = data[(data["status"] == Status.OK) & data["speedup"].notna()] if not data.empty else data
    guide = _guide_speedups()
    apart_all = ok[_beside_own_eager(ok)] if not ok.empty else ok
    for (device, dtype, mode, layout), per_mode in ok.groupby(["environment", "dtype", "mode", "memory_format"]):
        apart = per_mode[per_mode.index.isin(apart_all.index)]
        per_mode = per_mode.drop(apart.index)
        everywhere = models_at_every_batch_size(per_mode)
        for batch in sorted(set(per_mode["batch_size"]) | set(apart["batch_size"])):
            group = per_mode[per_mode["batch_size"] == batch]
            same = group[group["label"].isin(everywhere)]
            left_out = [ltr(label, catalog) for label in sorted(set(group["label"]) - everywhere)] + [
                f"{ltr(label, catalog)} — {catalog.t('flag_eager_per_mode')}"
                for label in sorted(apart[apart["batch_size"] == batch]["label"])]
            theirs = [guide.get((label.lower(), batch, mode)) for label in group["label"]]
            rows.append([environment_label(device, catalog), ltr(dtype, catalog), ltr(str(batch), catalog),
                         mode_label(mode, catalog) + (f" ({ltr(layout, catalog)})" if layout != "contiguous" else ""),
                         _geomean(same["speedup"], catalog), ltr(str(len(same)), catalog),
                         _geomean(group["speedup"], catalog), ltr(str(len(group)), catalog),
                         _geomean(pd.Series(theirs, dtype=float), catalog) if None not in theirs else "–",
                         format_list(left_out, locale=catalog.locale) or "–"])
    headers = [catalog.t("col_device"), catalog.t("col_dtype"), catalog.t("col_batch"), catalog.t("col_mode"),
               catalog.t("col_geomean_every_batch"), catalog.t("col_models"), catalog.t("col_geomean_all"),
               catalog.t("col_models"), catalog.t("col_geomean_guide", gpu=GUIDE_GPU),
               catalog.t("col_geomean_left_out")]
    return markdown_table(headers, rows) if rows else catalog.t("no_results")


def _beside_own_eager(ok: pd.DataFrame) -> pd.Series:
    """Whether each cell is a mode after its row's first (of its device, dtype, model and batch size) that was timed
    beside an eager series of its own (earlier design: no ``timed_with``), so not against the eager the first mode's
    speed-up is. A dynamic batch's or an AOTInductor cell times its own pairs by design: it stays."""
    order = compiled_modes(ok)
    in_row = (ok["shapes"] == "static") & ~ok["compile_mode"].isin([str(mode) for mode in AOT_MODES])
    keys = ["environment", "dtype", "label", "batch_size"]
    first = ok[in_row].groupby(keys)["mode"].agg(lambda modes: min(modes, key=order.index))
    return pd.Series([bool(row_in) and row.mode != first.get((row.environment, row.dtype, row.label, row.batch_size))
                      and not isinstance(row.timed_with, str) for row_in, row in zip(in_row, ok.itertuples())],
                     index=ok.index, dtype=bool)


def models_at_every_batch_size(rows: pd.DataFrame) -> set[str]:
    """The models (by label) that ``rows`` (one device, dtype, mode and layout) measured at each of its batch sizes."""
    per_batch = [set(group["label"]) for _, group in rows.groupby("batch_size")]
    return set.intersection(*per_batch) if per_batch else set()


def _guide_speedups() -> dict[tuple[str, int, str], float]:
    """The guide's speed-ups on ``GUIDE_GPU`` by (model, batch size, mode), eager over compiled mean latency: its main
    tables' (torch 2.0.1) where they have the cell, else its nightly tables' (reduce-overhead's only source)."""
    guide = pd.read_csv(REFERENCE_CSV)
    guide = guide[(guide["gpu"] == GUIDE_GPU) & (guide["status"] == Status.OK)]
    guide = guide.sort_values("torch_version", ascending=False)  # 2.0.1 last: it wins
    return {(str(row.model).lower(), int(row.batch_size), str(row.compile_mode)): row.eager_ms / row.compiled_ms
            for row in guide.itertuples()}


def _geomean(speedups: pd.Series, catalog: Catalog) -> str:
    if speedups.empty:
        return "–"
    return ltr(catalog.number(stats.geometric_mean(speedups.to_numpy()), 2) + "×", catalog)
