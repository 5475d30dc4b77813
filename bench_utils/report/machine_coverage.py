"""A cell's figures across machines: the page's table of every machine's figure (``machines_table``), and
``python -m bench_utils coverage STUDY...``: do the intervals cover another machine's figure, on real records?

Every ``ok`` compiled record of the studies' results files is one replicate of one cell on one machine (its GPU's
UUID; the cell: its identity without study or replicate, on its GPU's name and torch version). A machine's figure of
a cell is ``measurement.between_machines.machine_figure`` of its records (each record's per-pair log ratios, or
where a record kept no calls, its speed-up's mean and interval). For every cell measured on two machines or more,
each machine is held out in turn: the spread between machines is estimated without any of that machine's figures,
the interval for a new machine's figure is built from the cell's other machines, and the held-out figure is
checked against it. The last line:

    covered X of Y (binomial 95 %: lo-hi); median width W

(W: the intervals' median width, high over low). Few held-out figures make it a smoke check, and it says so.
"""

from __future__ import annotations

from collections import defaultdict
import math
import os
from pathlib import Path
import statistics
from typing import Iterable

import pandas as pd
from scipy import stats as scipy_stats

from ..errors import UserError
from ..measurement.between_machines import (MIN_DOF, BetweenMachines, MachineFigure, between_machines, group_of,
                                            machine_figure, new_machine_interval, spread_for)
from ..measurement.paired import CONFIDENCE
from ..records.key import CellIdentity
from ..records.results_file import read_records
from ..records.schema import Record
from ..vocabulary import CompileMode, Status
from ..zoo.registry import label_of
from .frame import MACHINE_KEY, device_name, machine_of, row_key
from .i18n import Catalog
from .markdown import ltr, markdown_table, mode_label
from .replicate_rows import pair_log_ratios

SMOKE_BELOW = 30  # held-out figures: under this, the covered share says little (its binomial interval is wide)

CellKey = tuple[CellIdentity, str, str | None]  # the cell, its device's name (``frame.device_name``), torch's version


def _log_ratios(record: Record) -> list[float] | None:
    """A record's per-pair log ratios; where it kept no calls, a stand-in of two values whose mean and spread give
    its speed-up's mean and interval (a paired t-interval, ``pairs - 1`` degrees of freedom)."""
    latency, speedup = record.latency, record.speedup
    if latency is None or speedup is None:
        return None
    ratios = pair_log_ratios([value * 1e3 for value in latency.values],
                             [value * 1e3 for value in speedup.eager_values or []], speedup.block_runs)
    if ratios:
        return ratios
    if speedup.mean_ci95 is None or not speedup.pairs or speedup.pairs < 2:
        return None
    low, high = (math.log(bound) for bound in speedup.mean_ci95)
    se = (high - low) / 2 / float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, speedup.pairs - 1))
    # n values (n the pairs, made even) alternating around the mean, their standard error ``se`` on n - 1 degrees of
    # freedom: each is se * sqrt(n - 1) off it
    n = max(2, speedup.pairs - speedup.pairs % 2)
    off = se * math.sqrt(n - 1)
    return [math.log(speedup.mean) + (off if index % 2 else -off) for index in range(n)]


def _cell_key(record: Record) -> CellKey:
    return (CellIdentity.of_record(record).without_study().without_replicate(), device_name(record),
            record.environment.torch_version)


def figures_by_cell(records: Iterable[Record]) -> dict[CellKey, list[MachineFigure]]:
    """Each compiled cell's machines' figures, from ``ok`` records of a GPU."""
    ratios: dict[CellKey, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        machine = machine_of(record)
        if record.status != Status.OK or record.cell.compile_mode == CompileMode.EAGER or machine is None:
            continue
        found = _log_ratios(record)
        if found is None:
            continue
        ratios[_cell_key(record)][machine].append(found)
    figures: dict[CellKey, list[MachineFigure]] = {}
    for key, by_machine in ratios.items():
        found_figures = [figure for machine, replicates in sorted(by_machine.items())
                         if (figure := machine_figure(machine, replicates)) is not None]
        if found_figures:
            figures[key] = found_figures
    return figures


def by_group(figures: dict[CellKey, list[MachineFigure]], without: str | None = None
             ) -> dict[str, list[list[MachineFigure]]]:
    """The cells' figures by group (``between_machines.group_of``), none of machine ``without``'s."""
    groups: dict[str, list[list[MachineFigure]]] = defaultdict(list)
    for key, cell in figures.items():
        groups[group_of(key[0].batch_size or 1)].append([figure for figure in cell if figure.machine != without])
    return groups


def coverage_lines(paths: list[str | os.PathLike]) -> list[str]:
    """The check, as lines: one per held-out figure, then the spread per group, then the last line."""
    files = [Path(path) / "results.jsonl" if Path(path).is_dir() else Path(path) for path in paths]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise UserError(f"coverage: no results file at {', '.join(missing)} (give study folders or results files)")
    figures = figures_by_cell(read_records(files))
    lines, hits, widths = [], [], []
    for key, cell in sorted(figures.items(), key=lambda item: str(item[0])):
        if len(cell) < 2:
            continue
        identity = key[0]
        for held in cell:
            others = [figure for figure in cell if figure.machine != held.machine]
            between = spread_for(group_of(identity.batch_size or 1), by_group(figures, without=held.machine))
            if between is None:
                lines.append(f"  {identity.model} bs{identity.batch_size} {identity.compile_mode}: machine "
                             f"{held.machine[:12]} not checked: without it, the spread between machines rests on "
                             f"under {MIN_DOF} degrees of freedom")
                continue
            interval = new_machine_interval(others, between)
            seen = math.exp(held.log_speedup)
            hits.append(interval.covers(seen))
            widths.append(interval.high / interval.low)
            lines.append(f"  {identity.model} bs{identity.batch_size} {identity.compile_mode}: machine "
                         f"{held.machine[:12]} {seen:.3f}x, interval from {len(others)} other machine(s) "
                         f"{interval.low:.3f}-{interval.high:.3f} (between-machine sd {between.sd:.3f} from "
                         f"{between.cells} cell(s)): {'covered' if hits[-1] else 'NOT covered'}")
    groups = by_group(figures)
    for group in ("small batch", "large batch"):
        between = between_machines(groups.get(group, []))
        lines.append(f"{group}: " + ("no cell on two machines" if between is None else
                                     f"between-machine sd {between.sd:.3f} in log speed-up, from {between.cells} "
                                     f"cell(s) on two machines or more ({between.dof} degrees of freedom)"))
    if not hits:
        lines.append("covered 0 of 0: no cell measured on two machines or more")
        return lines
    covered = sum(hits)
    ci = scipy_stats.binomtest(covered, len(hits)).proportion_ci(confidence_level=CONFIDENCE)
    if len(hits) < SMOKE_BELOW:
        lines.append(f"a smoke check: {len(hits)} held-out figures (under {SMOKE_BELOW}, the share covered says "
                     "little; each lease on a new machine adds its cells)")
    lines.append(f"covered {covered} of {len(hits)} (binomial 95 %: {ci.low:.2f}-{ci.high:.2f}); "
                 f"median width {statistics.median(widths):.3f} (high over low)")
    return lines


def machines_table(records: Iterable[Record], catalog: Catalog) -> str | None:
    """Every cell measured on two machines or more: each machine's figure (its GPU's UUID, shortened), their mean and
    the interval for a new machine's figure (``between_machines``), after the spread between machines per group;
    None where no cell was measured on two machines (the tables above show each cell's latest record)."""
    figures = figures_by_cell(records)
    several = {key: cell for key, cell in figures.items() if len(cell) > 1}
    if not several:
        return None
    groups, rows = by_group(figures), []
    spreads: dict[str, BetweenMachines | None] = {}
    def order(item: tuple[CellKey, list[MachineFigure]]) -> tuple[str, int, str]:
        identity = item[0][0]
        return identity.model, identity.batch_size or 0, identity.compile_mode

    for (identity, _, _), cell in sorted(several.items(), key=order):
        group = group_of(identity.batch_size or 1)
        between = spreads.setdefault(group, spread_for(group, groups))
        shown = [ltr(f"{figure.machine.removeprefix('GPU-')[:8]} {catalog.number(math.exp(figure.log_speedup), 2)}×",
                     catalog) for figure in cell]
        interval = new_machine_interval(cell, between) if between is not None else None
        rows.append([ltr(label_of(identity.model), catalog), ltr(str(identity.batch_size), catalog),
                     mode_label(identity.compile_mode, catalog), ", ".join(shown),
                     ltr(catalog.number(interval.speedup if interval else
                                        math.exp(sum(f.log_speedup for f in cell) / len(cell)), 2) + "×", catalog),
                     ltr(f"{catalog.number(interval.low, 2)}–{catalog.number(interval.high, 2)}", catalog)
                     if interval else "–"])
    own = {group: between_machines(cells) for group, cells in groups.items()}
    sds = [catalog.t("machines_spread" if between == own.get(group) else "machines_spread_pooled",
                     group=catalog.t(f"machines_group_{group.split()[0]}"),
                     sd=ltr(catalog.number(between.sd, 3), catalog), dof=ltr(str(between.dof), catalog))
           for group, between in sorted(spreads.items(), reverse=True) if between is not None]  # small first
    text = catalog.t("machines_text", spreads="; ".join(sds) or catalog.t("machines_spread_unknown"))
    headers = [catalog.t("col_model"), catalog.t("col_batch"), catalog.t("col_mode"), catalog.t("col_machines"),
               catalog.t("col_over_machines"), catalog.t("col_new_machine")]
    return f"{text}\n\n{markdown_table(headers, rows)}"


def with_new_machine(data: pd.DataFrame, records: list[Record]) -> pd.DataFrame:
    """``data`` (the report's rows) with ``new_low`` and ``new_high``: each compiled row's interval for the figure a
    new machine of its kind will show (``between_machines.new_machine_interval`` over every machine's figure of its
    cell, one machine's included), NaN where the spread between machines is not known for its group."""
    if data.empty:
        return data
    figures = figures_by_cell(records)
    by_row = {row_key(record): _cell_key(record) for record in records}
    low, high = [], []
    for _, row in data.iterrows():
        key = by_row.get(tuple(row[column] for column in MACHINE_KEY))
        cell = figures.get(key) if key is not None else None
        # the spread between machines of its kind only (its device's name and torch's version)
        kind = {other: cells for other, cells in figures.items() if key is not None and other[1:] == key[1:]}
        between = spread_for(group_of(int(row["batch_size"])), by_group(kind)) if cell else None
        interval = new_machine_interval(cell, between) if cell and between is not None else None
        low.append(interval.low if interval else math.nan)
        high.append(interval.high if interval else math.nan)
    return data.assign(new_low=low, new_high=high)
