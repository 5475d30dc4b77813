"""The guide's plots, with seaborn, labelled in the report's locale: per device, the improvement per model and
batch size; per device and batch size, the duration plot and the improvement plot. Improvement is
(speed-up - 1) x 100 %. Arabic is shaped by matplotlib (3.11+) in DejaVu Sans, which has Arabic glyphs.

Figures are ``matplotlib.figure.Figure`` objects built and saved inside a style context: this module changes
neither the user's matplotlib backend nor their seaborn theme, so a JupyterLab user's own plots stay as they were.
"""

from __future__ import annotations

from contextlib import contextmanager
import io
from typing import Callable, Iterator
import warnings

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
import pandas as pd
import seaborn as sns

from .i18n import Catalog
from .markdown import environment_label
from ..vocabulary import CompileMode, Status, WorkKind

FONT = "DejaVu Sans"


@contextmanager
def style() -> Iterator[None]:
    """The report's look (seaborn's whitegrid, a font with Arabic glyphs), for this block only. Text is drawn as
    written: a record's "$x$" in a model's name is no formula (mathtext would fail on a stray "$\\")."""
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook"), \
            matplotlib.rc_context({"font.family": FONT, "text.parse_math": False}):
        yield


def png_bytes(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG, drawn in the report's style (tick labels are drawn only now)."""
    buffer = io.BytesIO()
    with style():
        figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


# The characters of a name a plot shows (a record may hold 256; the tables show it whole): its start and its end,
# where a variant's suffix is, unless two names of a plot would then read alike. A title's device: twice as many.
SHORT_NAME = 40


def short_name(text: str, limit: int = SHORT_NAME) -> str:
    return text if len(text) <= limit else f"{text[:limit - 12]}…{text[-11:]}"


def _short_labels(data: pd.DataFrame) -> pd.DataFrame:
    labels = data["label"].unique()
    if len({short_name(label) for label in labels}) < len(labels):
        return data
    return data.assign(label=data["label"].map(short_name))


def _improvement(data: pd.DataFrame) -> pd.DataFrame:
    ok = data[(data["status"] == Status.OK) & data["speedup"].notna()].copy()
    ok["improvement"] = (ok["speedup"] - 1.0) * 100.0
    return _short_labels(ok.sort_values(["task_rank", "label"]))


def _figure(title: str, catalog: Catalog, draw: Callable[[Axes], None] | None, size: tuple[float, float] = (9, 4)):
    """A figure of one axis in the report's style, titled, ``draw`` drawing on it (None: nothing to draw, said so)."""
    figure = Figure(figsize=size)
    with style():
        axis = figure.subplots()
        if draw is None:
            axis.text(0.5, 0.5, catalog.t("no_results"), ha="center", va="center")
            axis.set_axis_off()
        else:
            draw(axis)
        axis.set_title(title)
        with warnings.catch_warnings():  # names too long for its margins: the saved picture takes them whole
            warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
            figure.tight_layout()
    return figure


def _label(axis, catalog: Catalog, y_key: str) -> None:
    axis.set_xlabel(catalog.t("axis_model"))
    axis.set_ylabel(catalog.t(y_key))
    axis.tick_params(axis="x", rotation=30)


def _legend_outside(axis, title: str) -> None:
    """The legend right of the plot, never over a bar (one bar, or a tall one, filled the corner it took)."""
    axis.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def _title(catalog: Catalog, key: str, device: str, mode: str, **values) -> str:
    """A plot's title: the environment (no Unicode isolates: matplotlib orders mixed directions) and the mode."""
    shown = short_name(environment_label(device, catalog, isolate=False), 2 * SHORT_NAME)
    return catalog.t(key, device=shown, **values) + " — " + catalog.mode_name(mode)


def batch_comparison(data: pd.DataFrame, device: str, mode: str, catalog: Catalog):
    """Improvement per model, one bar per batch size (the guide's first plot kind)."""
    ok = _improvement(data[(data["environment"] == device) & (data["mode"] == mode)])

    def draw(axis) -> None:
        sns.barplot(data=ok, x="label", y="improvement", hue="batch_size", palette="crest", ax=axis)
        _legend_outside(axis, catalog.t("legend_batch"))
        axis.axhline(0, color="black", linewidth=0.8)
        _label(axis, catalog, "axis_improvement")

    return _figure(_title(catalog, "plot_batch_title", device, mode), catalog, None if ok.empty else draw)


def duration(data: pd.DataFrame, device: str, batch: int, mode: str, catalog: Catalog):
    """Eager vs compiled mean latency per model (the guide's duration plot)."""
    cells = _short_labels(data[(data["environment"] == device) & (data["batch_size"] == batch)
                               & (data["status"] == Status.OK)])
    rows = []
    for label, group in cells.sort_values(["task_rank", "label"]).groupby("label", sort=False):
        for kind, wanted in (("legend_eager", "eager"), ("legend_compiled", mode)):
            match = group[group["mode"] == wanted]
            if not match.empty:
                rows.append({"label": label, "variant": catalog.t(kind), "mean_ms": match["mean_ms"].iloc[0]})

    def draw(axis) -> None:
        sns.barplot(data=pd.DataFrame(rows), x="label", y="mean_ms", hue="variant", ax=axis)
        _legend_outside(axis, "")
        _label(axis, catalog, "axis_duration")

    return _figure(_title(catalog, "plot_duration_title", device, mode, batch=batch), catalog, draw if rows else None)


def percentage(data: pd.DataFrame, device: str, batch: int, mode: str, catalog: Catalog):
    """Improvement per model at one batch size (the guide's percentage plot)."""
    ok = _improvement(data[(data["environment"] == device) & (data["batch_size"] == batch) & (data["mode"] == mode)])

    def draw(axis) -> None:
        colors = ["#2a9d8f" if value >= 0 else "#e76f51" for value in ok["improvement"]]
        axis.bar(ok["label"], ok["improvement"], color=colors)
        low, high = (ok["ci_low"] - 1) * 100, (ok["ci_high"] - 1) * 100
        axis.errorbar(ok["label"], ok["improvement"], yerr=[ok["improvement"] - low, high - ok["improvement"]],
                      fmt="none", ecolor="black", capsize=3, linewidth=1)
        axis.axhline(0, color="black", linewidth=0.8)
        _label(axis, catalog, "axis_improvement")

    return _figure(_title(catalog, "plot_percentage_title", device, mode, batch=batch), catalog,
                   None if ok.empty else draw)


def at_a_glance(data: pd.DataFrame, device: str, catalog: Catalog):
    """Every measured compiled cell's speed-up on ``device`` with its 95 % interval and, where the spread between
    machines is known, the wider one a new machine's figure falls in; a log scale, eager's 1x marked (the page's
    first picture)."""
    ok = data[(data["environment"] == device) & (data["status"] == Status.OK) & data["speedup"].notna()
              & (data["compile_mode"] != CompileMode.EAGER)]
    ok = _short_labels(ok.sort_values(["task_rank", "label", "batch_size", "mode"]))
    modes = list(dict.fromkeys(ok["mode"]))
    colours = dict(zip(modes, sns.color_palette("deep", len(modes))))

    def draw(axis) -> None:
        rows = list(ok.itertuples())[::-1]  # the first cell on top
        places = range(len(rows))
        if "new_low" in ok and ok["new_low"].notna().any():
            axis.hlines(places, [row.new_low for row in rows], [row.new_high for row in rows], color="#d9d9d9",
                        linewidth=6, label=catalog.t("col_new_machine"))
        for mode in modes:
            mine = [(place, row) for place, row in zip(places, rows) if row.mode == mode]
            axis.errorbar([row.speedup for _, row in mine], [place for place, _ in mine],
                          xerr=[[row.speedup - row.ci_low for _, row in mine],
                                [row.ci_high - row.speedup for _, row in mine]],
                          fmt="o", color=colours[mode], capsize=2, markersize=4, label=catalog.mode_name(mode))
        axis.axvline(1.0, color="black", linewidth=0.8)
        axis.set_xscale("log")
        # around the speed-ups: an interval of 2 noisy pairs may reach 1e-10, drawn to the edge
        low, high = axis.get_xlim()
        low = max(low, min(ok["speedup"].min(), 1.0) / 4)
        high = min(high, max(ok["speedup"].max(), 1.0) * 4)
        axis.set_xlim(low, high)  # ticks a reader reads (no powers of ten: the page draws text as written)
        ticks = [tick for tick in (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16) if low <= tick <= high]
        axis.set_xticks(ticks, [catalog.number(tick, 2 if tick < 1 else 1 if tick % 1 else 0) + "×" for tick in ticks])
        axis.set_xticks([], minor=True)
        several = ok["dtype"].nunique() > 1  # a model's float32 and bfloat16 cells apart
        axis.set_yticks(list(places), [f"{row.label} · {row.batch_size}" + (f" · {row.dtype}" if several else "")
                                       for row in rows])
        axis.set_xlabel(catalog.t("axis_speedup"))
        _legend_outside(axis, "")

    title = catalog.t("plot_glance_title", device=short_name(environment_label(device, catalog, isolate=False),
                                                             2 * SHORT_NAME))
    return _figure(title, catalog, draw if len(ok) else None, size=(9, 1.2 + 0.28 * len(ok)))


def work_kinds(rows: pd.DataFrame, catalog: Catalog):
    """Time per inference by kind of work, eager beside compiled, one pair of stacked bars per cell
    (``report.why``: a model at its smallest and largest batch)."""
    bars = []
    for _, row in rows.iterrows():
        for side in ("eager", "compiled"):
            kinds = getattr(row["profile"], side).kinds_ms or {}
            bars.append((f"{short_name(row['label'])} · {int(row['batch_size'])} · {catalog.t(f'legend_{side}')}",
                         [kinds.get(kind, 0.0) for kind in WorkKind]))

    def draw(axis) -> None:
        colours = sns.color_palette("tab10", len(WorkKind))
        names = [label for label, _ in bars][::-1]  # the first cell on top
        left = [0.0] * len(bars)
        for index, kind in enumerate(WorkKind):
            widths = [values[index] for _, values in bars][::-1]
            axis.barh(names, widths, left=left, color=colours[index], label=catalog.t(f"kind_{kind.value}"))
            left = [start + width for start, width in zip(left, widths)]
        axis.set_xlabel(catalog.t("axis_work_ms"))
        axis.set_xlim(0, max(left) * 1.08 or 1.0)  # the longest bar short of the edge
        _legend_outside(axis, "")

    return _figure(catalog.t("plot_work_title"), catalog, draw if bars else None,
                   size=(9, 1.2 + 0.35 * max(len(bars), 1)))
