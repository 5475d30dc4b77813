"""Why it got faster: each compiled cell's profile (``Record.profile``) as a table and one sentence per cell, every
word read off the profile's numbers, eager beside compiled, per inference (docs/report.md, "Why it got faster").

How busy is the profile's busy time per call over the *timed* latency, not over the profiled call's wall: the
profiler slows the host (its walls ran 1.0 to 3.3 times the timed latency on the H200), which called one eager cell
both host-bound and busy with work; the table gives that ratio. Below ``LAUNCH_BOUND_BUSY`` in eager the device
mostly waited for the host (launches, Python), which fusing kernels and CUDA graphs remove; above it, the work
itself dominates. One verdict per eager cell: its share averaged over the compiled cells profiled beside it.
"""

from __future__ import annotations

from babel.lists import format_list
import pandas as pd

from ..records.schema import ProfileBlock, ProfileSide
from .i18n import Catalog
from .markdown import ltr, markdown_table, mode_label, ms
from ..vocabulary import CompileMode, Status, WorkKind

LAUNCH_BOUND_BUSY = 0.5
# the work Inductor generates kernels for, which fusion takes over: element-wise operators and reductions,
# normalizations, copies and layout changes (matrix products and attention it mostly calls out for)
FUSABLE = (WorkKind.ELEMENTWISE, WorkKind.NORMALIZATION, WorkKind.COPY_LAYOUT)


def profiled(data: pd.DataFrame) -> pd.DataFrame:
    """The compiled cells whose record holds both sides of a profile, in the report's order, with each side's busy
    share of its timed latency (``eager_busy``, ``compiled_busy``, ``busy_share``) and the one share its eager
    cell's verdict reads (``eager_cell_busy``)."""
    if data.empty or "profile" not in data:
        return data.iloc[0:0]
    has_both = data["profile"].map(lambda block: isinstance(block, ProfileBlock) and block.eager is not None
                                   and block.compiled is not None)
    rows = data[(data["mode"] != CompileMode.EAGER) & (data["status"] == Status.OK) & has_both].copy()
    rows["eager_busy"] = [busy_share(block.eager, timed) for block, timed in
                          zip(rows["profile"], rows["eager_interleaved_ms"])]
    rows["compiled_busy"] = [busy_share(block.compiled, timed) for block, timed in zip(rows["profile"], rows["mean_ms"])]
    rows["eager_cell_busy"] = rows.groupby(EAGER_CELL, dropna=False)["eager_busy"].transform("mean")
    return rows.sort_values(["environment", "task_rank", "label", "batch_size", "mode"])


EAGER_CELL = ["environment", "label", "batch_size", "dtype"]  # the eager cell a compiled cell's pairs timed


def busy_share(side: ProfileSide, timed_ms: float | None) -> float:
    """How busy the device was in a timed call: the profile's busy time per call over the timed latency (at most 1;
    the profiled call's own fraction where no latency was timed); NaN where neither is known."""
    if side.busy_ms is not None and timed_ms is not None and pd.notna(timed_ms) and timed_ms > 0:
        return min(1.0, side.busy_ms / timed_ms)
    return side.busy_fraction if side.busy_fraction is not None else float("nan")


def profiled_over_timed(side: ProfileSide, timed_ms: float | None) -> float:
    """The profiled call's wall over the timed latency (above 1: the profiler's cost on the host); NaN if unknown."""
    if side.wall_ms is None or timed_ms is None or pd.isna(timed_ms) or timed_ms <= 0:
        return float("nan")
    return side.wall_ms / timed_ms


def _count(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 0 if float(value).is_integer() else 1), catalog)


def _share(fraction: float, catalog: Catalog) -> str:
    return ltr(catalog.percent(fraction), catalog) if pd.notna(fraction) else "–"


def _ratio(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 1) + "×", catalog) if pd.notna(value) else "–"


def change_text(eager: ProfileSide, compiled: ProfileSide, catalog: Catalog) -> str:
    """What moved between the two sides' kinds of work: the work fusion took over where fused time appeared (the
    kinds it left, most first), and the largest other change where it is at least a twentieth of eager's busy
    time; else the kind whose time changed most."""
    before, after = eager.kinds_ms or {}, compiled.kinds_ms or {}
    moved = {kind: before.get(kind, 0.0) - after.get(kind, 0.0) for kind in FUSABLE}
    moved = {kind: amount for kind, amount in sorted(moved.items(), key=lambda item: -item[1]) if amount > 0}
    fused = after.get(WorkKind.FUSED, 0.0) - before.get(WorkKind.FUSED, 0.0)
    parts = []
    if fused > 0 and moved:
        kinds = format_list([catalog.t(f"kind_{kind.value}") for kind in moved], locale=catalog.locale)
        parts.append(catalog.t("why_change_fused", eager_ms=ms(sum(moved.values()), catalog), kinds=kinds,
                               fused_ms=ms(fused, catalog)))
    others = [kind for kind in WorkKind if kind not in FUSABLE and kind != WorkKind.FUSED] if parts else list(WorkKind)
    kind = max(others, key=lambda k: abs(before.get(k, 0.0) - after.get(k, 0.0)))
    change = abs(before.get(kind, 0.0) - after.get(kind, 0.0))
    if not parts or change >= 0.05 * sum(before.values()):
        parts.append(catalog.t("why_change_kind", kind=catalog.t(f"kind_{kind.value}"),
                               eager_ms=ms(before.get(kind, 0.0), catalog),
                               compiled_ms=ms(after.get(kind, 0.0), catalog)))
    return "; ".join(parts)


def sentence(row: pd.Series, catalog: Catalog) -> str:
    """One sentence for a compiled cell (a row of ``profiled``), from its profile's numbers and timed latencies."""
    eager, compiled = row["profile"].eager, row["profile"].compiled
    unit = catalog.t("why_unit_kernels" if eager.work_unit == "kernels" else "why_unit_operators")
    busy = row["eager_cell_busy"]  # its eager cell's one share: the same verdict beside every mode
    diagnosis = catalog.t("why_launch_bound" if pd.notna(busy) and busy < LAUNCH_BOUND_BUSY else "why_work_bound")
    parts = [catalog.t("why_sentence", model=ltr(str(row["label"]), catalog), batch=int(row["batch_size"]),
                       mode=mode_label(str(row["mode"]), catalog),
                       eager_calls=_count(eager.work_calls, catalog),
                       compiled_calls=_count(compiled.work_calls, catalog), unit=unit,
                       eager_busy=_share(row["eager_busy"], catalog), compiled_busy=_share(row["compiled_busy"], catalog)),
             diagnosis, change_text(eager, compiled, catalog)]
    if (compiled.compiled_regions or 0) > 1:
        parts.append(catalog.t("why_graph_breaks", graphs=_count(compiled.compiled_regions or 0, catalog)))
    return "; ".join(parts) + "."


def why_table(rows: pd.DataFrame, catalog: Catalog) -> str:
    """Kernels or operator calls per inference, busy share of the timed latency and the profiled call's wall over
    it, eager -> compiled, per compiled cell (rows of ``profiled``)."""
    t = catalog.t
    headers = [t("col_model"), t("col_batch"), t("col_mode"), t("col_work_calls"), t("col_busy"),
               t("col_profiled_over_timed"), t("col_compiled_graphs"), t("col_breaks")]
    body = []
    for _, row in rows.iterrows():
        eager, compiled = row["profile"].eager, row["profile"].compiled
        breaks = row.get("graph_breaks")
        slower = [_ratio(profiled_over_timed(side, timed), catalog)
                  for side, timed in ((eager, row["eager_interleaved_ms"]), (compiled, row["mean_ms"]))]
        body.append([ltr(str(row["label"]), catalog), _count(row["batch_size"], catalog),
                     mode_label(str(row["mode"]), catalog),
                     f"{_count(eager.work_calls, catalog)} → {_count(compiled.work_calls, catalog)}",
                     f"{_share(row['eager_busy'], catalog)} → {_share(row['compiled_busy'], catalog)}",
                     f"{slower[0]} → {slower[1]}",
                     _count(compiled.compiled_regions or 0, catalog),
                     _count(breaks, catalog) if pd.notna(breaks) else "–"])
    return markdown_table(headers, body)


def extreme_batches(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and mode, its smallest and largest batch size: where fusion and launches differ most."""
    keep = rows.groupby(["label", "mode"])["batch_size"].transform(lambda sizes: sizes.isin([sizes.min(), sizes.max()]))
    return rows[keep]
