"""Why it got faster: each compiled cell's profile (``Record.profile``) as a table and one sentence per cell.

Everything said is read off the profile's numbers, eager beside compiled, per inference: kernels (GPU) or
operator calls (CPU), how busy the device was, the compiled graphs run (more than one: graph breaks), and the
time by kind of work. The sentence's diagnosis is a threshold on eager's busy fraction: below
``LAUNCH_BOUND_BUSY`` the device spent most of eager's call waiting for the host (launches, Python), which is what
fusing kernels and CUDA graphs remove; above it, the work itself dominates.
"""

from __future__ import annotations

from babel.lists import format_list
import pandas as pd

from ..records.schema import ProfileBlock, ProfileSide
from .i18n import Catalog
from .markdown import ltr, markdown_table, mode_label
from ..vocabulary import CompileMode, Status, WorkKind

LAUNCH_BOUND_BUSY = 0.5
# the work Inductor generates kernels for, which fusion takes over: element-wise operators and reductions,
# normalizations, copies and layout changes (matrix products and attention it mostly calls out for)
FUSABLE = (WorkKind.ELEMENTWISE, WorkKind.NORMALIZATION, WorkKind.COPY_LAYOUT)


def profiled(data: pd.DataFrame) -> pd.DataFrame:
    """The compiled cells whose record holds both sides of a profile, in the report's order."""
    if data.empty or "profile" not in data:
        return data.iloc[0:0]
    has_both = data["profile"].map(lambda block: isinstance(block, ProfileBlock) and block.eager is not None
                                   and block.compiled is not None)
    rows = data[(data["mode"] != CompileMode.EAGER) & (data["status"] == Status.OK) & has_both]
    return rows.sort_values(["environment", "task_rank", "label", "batch_size", "mode"])


def sides(row: pd.Series) -> tuple[ProfileSide, ProfileSide]:
    """A profiled row's two sides (``profiled``)."""
    return row["profile"].eager, row["profile"].compiled


def _count(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 0 if float(value).is_integer() else 1), catalog)


def _busy(side: ProfileSide, catalog: Catalog) -> str:
    fraction = side.busy_fraction
    return ltr(catalog.percent(fraction), catalog) if fraction is not None else "–"


def _ms(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 2), catalog)


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
        parts.append(catalog.t("why_change_fused", eager_ms=_ms(sum(moved.values()), catalog), kinds=kinds,
                               fused_ms=_ms(fused, catalog)))
    others = [kind for kind in WorkKind if kind not in FUSABLE and kind != WorkKind.FUSED] if parts else list(WorkKind)
    kind = max(others, key=lambda k: abs(before.get(k, 0.0) - after.get(k, 0.0)))
    change = abs(before.get(kind, 0.0) - after.get(kind, 0.0))
    if not parts or change >= 0.05 * sum(before.values()):
        parts.append(catalog.t("why_change_kind", kind=catalog.t(f"kind_{kind.value}"),
                               eager_ms=_ms(before.get(kind, 0.0), catalog), compiled_ms=_ms(after.get(kind, 0.0), catalog)))
    return "; ".join(parts)


def sentence(row: pd.Series, catalog: Catalog) -> str:
    """One sentence for a compiled cell, from its profile's numbers only."""
    eager, compiled = sides(row)
    unit = catalog.t("why_unit_kernels" if eager.work_unit == "kernels" else "why_unit_operators")
    busy = eager.busy_fraction
    diagnosis = catalog.t("why_launch_bound" if busy is not None and busy < LAUNCH_BOUND_BUSY else "why_work_bound")
    parts = [catalog.t("why_sentence", model=ltr(str(row["label"]), catalog), batch=int(row["batch_size"]),
                       mode=mode_label(str(row["mode"]), catalog),
                       eager_calls=_count(eager.work_calls, catalog),
                       compiled_calls=_count(compiled.work_calls, catalog), unit=unit,
                       eager_busy=_busy(eager, catalog), compiled_busy=_busy(compiled, catalog)),
             diagnosis, change_text(eager, compiled, catalog)]
    if (compiled.compiled_regions or 0) > 1:
        parts.append(catalog.t("why_graph_breaks", graphs=_count(compiled.compiled_regions or 0, catalog)))
    return "; ".join(parts) + "."


def why_table(rows: pd.DataFrame, catalog: Catalog) -> str:
    """Kernels or operator calls per inference and busy fraction, eager -> compiled, per compiled cell."""
    t = catalog.t
    headers = [t("col_model"), t("col_batch"), t("col_mode"), t("col_work_calls"), t("col_busy"),
               t("col_compiled_graphs"), t("col_breaks")]
    body = []
    for _, row in rows.iterrows():
        eager, compiled = sides(row)
        breaks = row.get("graph_breaks")
        body.append([ltr(str(row["label"]), catalog), _count(row["batch_size"], catalog),
                     mode_label(str(row["mode"]), catalog),
                     f"{_count(eager.work_calls, catalog)} → {_count(compiled.work_calls, catalog)}",
                     f"{_busy(eager, catalog)} → {_busy(compiled, catalog)}",
                     _count(compiled.compiled_regions or 0, catalog),
                     _count(breaks, catalog) if pd.notna(breaks) else "–"])
    return markdown_table(headers, body)


def extreme_batches(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and mode, its smallest and largest batch size: where fusion and launches differ most."""
    keep = rows.groupby(["label", "mode"])["batch_size"].transform(lambda sizes: sizes.isin([sizes.min(), sizes.max()]))
    return rows[keep]
