"""What ``notebooks/explore.ipynb`` shows: one or more studies, a slice picked by the reader,
and two environments compared.

Each view is drawn as one HTML output with a display id. Under papermill that output is the
whole story (the slice the parameters name); in a live kernel, ipywidgets controls below it
redraw it in place, so the notebook reads the same either way and needs no detection of who
runs it. Selection logic is in ``selection``, the comparison in ``regressions``.
"""

from __future__ import annotations

import base64
from collections import Counter
import html
import os
from pathlib import Path
from typing import Callable, Iterable

from IPython.display import HTML, display
from matplotlib.figure import Figure
import numpy as np
import pandas as pd

from ..errors import UserError
from ..records.results_file import skipped_lines_said
from . import geometric_means, plots, regressions, selection as slices, tables, why
from ..records.results_file import check_readable
from .frame import frame, latest_records, project_paths, results_files
from .i18n import Catalog
from .markdown import markdown_html

FIELDS = ("environment", "batch_size", "mode", "dtype")


def speedup_figure(table: pd.DataFrame, title: str) -> Figure:
    """Speed-up per model with its 95 % interval, a line at 1 (no change)."""
    ok = table[table["speedup"].notna()]
    with plots.style():  # the axes take the style they are made in
        figure = Figure(figsize=(7, 0.5 + 0.45 * max(len(ok), 1)))
        axis = figure.subplots()
        if ok.empty:
            axis.text(0.5, 0.5, "no compiled cell measured here", ha="center", va="center")
            axis.set_axis_off()
        else:
            y = np.arange(len(ok))
            errors = [ok["speedup"] - ok["ci_low"], ok["ci_high"] - ok["speedup"]]
            axis.errorbar(ok["speedup"], y, xerr=errors, fmt="o", capsize=4)
            axis.axvline(1.0, color="grey", linestyle="--", linewidth=1)
            axis.set_yticks(y, ok["model"])
            axis.invert_yaxis()
            axis.set_xlabel("speed-up (eager / compiled, 95 % interval)")
        axis.set_title(title)
    return figure


def figure_html(figure: Figure) -> str:
    return f'<img src="data:image/png;base64,{base64.b64encode(plots.png_bytes(figure)).decode()}"/>'


def table_html(table: pd.DataFrame) -> str:
    if table.empty:
        return "<p>nothing measured here</p>"
    # escape: its names are the records' (a Styler shows its cells as HTML otherwise)
    return table.style.format(precision=3, na_rep="–", escape="html").hide(axis="index").to_html()


class Explorer:
    """The records of the given study folders or results.jsonl files (latest record per cell)."""

    def __init__(self, results_paths: Iterable[str | os.PathLike] | str | os.PathLike) -> None:
        self.paths = project_paths(results_paths)
        check_readable(results_files(self.paths))  # one line, not a KeyError's traceback
        with skipped_lines_said() as skipped:  # each listed below the cell that reads them, counted in the summary
            self.data = frame(latest_records(self.paths))
        self.skipped = skipped

    def summary_html(self) -> str:
        sources = ", ".join(html.escape(f"{p.parent.name}/{p.name}" if p.is_file() else p.name) for p in self.paths)
        skipped = "".join(f"<p><b>Lines of {html.escape(name)} skipped as unreadable: {count}</b> (torn, corrupt or "
                          "of another schema version; this cell's output lists them).</p>"
                          for name, count in Counter(f"{Path(line.path).parent.name}/{Path(line.path).name}"
                                                     for line in self.skipped).items())
        return (f"<h2>Summary</h2><p>{len(self.data)} cells from {sources}.</p>" + skipped
                + table_html(slices.summary_table(self.data))
                + "<h3>Geometric-mean speed-up</h3>"
                + markdown_html(geometric_means.geomean_table(self.data, Catalog("en"))))

    def summary(self) -> None:
        display(HTML(self.summary_html()))

    def slice_html(self, selection: slices.Selection) -> str:
        """Latency table, speed-up plot, compile cost and memory of one resolved selection."""
        where = (f"{selection.environment}, batch {selection.batch_size}, {selection.mode} "
                 f"vs eager, {selection.dtype}")
        latency = slices.latency_table(self.data, selection)
        return (f"<h2>{html.escape(where)}</h2><h3>Latency (ms) and speed-up</h3>" + table_html(latency)
                + figure_html(speedup_figure(latency, where))
                + "<h3>Compile cost</h3>" + table_html(slices.compile_table(self.data, selection))
                + "<h3>Peak memory</h3>" + table_html(slices.memory_table(self.data, selection))
                + self.why_html(selection))

    def why_html(self, selection: slices.Selection) -> str:
        """The report's "why it got faster" for the slice: time by kind of work, kernels or operator calls and
        busy fraction, one sentence per model (``report.why``)."""
        rows = why.profiled(self.data)
        rows = rows[(rows["environment"] == selection.environment) & (rows["batch_size"] == selection.batch_size)
                    & (rows["mode"] == selection.mode) & (rows["dtype"] == selection.dtype)]
        catalog = Catalog("en")
        if rows.empty:
            return f"<h3>{catalog.t('why_heading')}</h3><p>{html.escape(catalog.t('why_none'))}</p>"
        sentences = "".join(f"<li>{markdown_html(why.sentence(row, catalog))}</li>" for _, row in rows.iterrows())
        return (f"<h3>{catalog.t('why_heading')}</h3>" + figure_html(plots.work_kinds(rows, catalog))
                + markdown_html(why.why_table(rows, catalog)) + f"<ul>{sentences}</ul>")

    def show(self, environment: str | None = None, batch_size: int | None = None, mode: str | None = None,
             dtype: str | None = None, controls: bool = True) -> None:
        """The slice the arguments name (None: the first the results hold), with controls to
        pick another when ``controls`` (they need a live kernel; under papermill they are inert)."""
        chosen = slices.resolve(self.data, slices.Selection(environment, batch_size, mode, dtype))
        handle = display(HTML(self.slice_html(chosen)), display_id=True)
        if controls:
            display(self.slice_controls(chosen, lambda picked: handle.update(HTML(self.slice_html(picked)))))

    def slice_controls(self, chosen: slices.Selection, redraw: Callable[[slices.Selection], None]):
        """Dropdowns for the four fields; a change redraws, and an environment change offers
        that environment's batch sizes, modes and dtypes."""
        import ipywidgets as widgets

        dropdowns = {name: widgets.Dropdown(description=name.replace("_", " "), value=getattr(chosen, name),
                                            options=slices.options(self.data, chosen.environment)[name],
                                            style={"description_width": "initial"})
                     for name in FIELDS}
        busy: list[bool] = []  # set while options are being replaced, so one change redraws once

        def changed(_change) -> None:
            if busy:
                return
            busy.append(True)
            try:
                wanted = slices.Selection(*(dropdowns[name].value for name in FIELDS))
                available = slices.options(self.data, wanted.environment)
                for name in FIELDS[1:]:  # keep what still exists, else the first value
                    if dropdowns[name].options != tuple(available[name]):
                        value = dropdowns[name].value
                        dropdowns[name].options = available[name]
                        dropdowns[name].value = value if value in available[name] else available[name][0]
                redraw(slices.resolve(self.data, slices.Selection(*(dropdowns[n].value for n in FIELDS))))
            finally:
                busy.clear()

        for dropdown in dropdowns.values():
            dropdown.observe(changed, names="value")
        return widgets.HBox(list(dropdowns.values()))

    def comparison_html(self, baseline: str, candidate: str, tolerance: float) -> str:
        table = regressions.compare_environments(self.data, baseline, candidate, tolerance)
        counts = table["verdict"].value_counts()
        return (f"<h2>{html.escape(candidate)} against {html.escape(baseline)}</h2>"
                f"<p>{len(table)} compiled cells measured in both: {counts.get('regression', 0)} regressions "
                f"(red), {counts.get('improvement', 0)} improvements (green), {counts.get('inconclusive', 0)} "
                f"inconclusive (yellow). A regression: the cell no longer runs, fails the accuracy gate it "
                f"passed, or its speed-up over eager is more than {tolerance:.0%} lower with a ratio interval "
                f"below 1. The compiled latency ratio (above 1: slower) is shown, not judged.</p>"
                + (regressions.highlighted(table).to_html() if not table.empty else "<p>no cell in common</p>"))

    def compare(self, baseline: str | None = None, candidate: str | None = None, tolerance: float = 0.10,
                controls: bool = True) -> None:
        """Two environments side by side (default: the first two), regressions highlighted."""
        environments = slices.options(self.data)["environment"]
        if len(environments) < 2:
            if baseline is None and candidate is None:
                display(HTML(f"<p>One environment only ({html.escape(', '.join(environments) or 'none')}): "
                             "give several study folders to compare.</p>"))
                return
            raise UserError(f"nothing to compare: the results hold one environment only "
                            f"({', '.join(environments) or 'none'})")
        baseline = baseline or next(e for e in environments if e != candidate)
        candidate = candidate or next(e for e in environments if e != baseline)
        handle = display(HTML(self.comparison_html(baseline, candidate, tolerance)), display_id=True)
        if controls:
            import ipywidgets as widgets

            pick = {"baseline": widgets.Dropdown(description="baseline", options=environments, value=baseline),
                    "candidate": widgets.Dropdown(description="candidate", options=environments, value=candidate),
                    "tolerance": widgets.FloatSlider(description="tolerance", value=tolerance, min=0.0,
                                                     max=0.99, step=0.01)}  # what compare_environments takes

            def changed(_change) -> None:
                if pick["baseline"].value != pick["candidate"].value:
                    handle.update(HTML(self.comparison_html(pick["baseline"].value, pick["candidate"].value,
                                                            pick["tolerance"].value)))

            for control in pick.values():
                control.observe(changed, names="value")
            display(widgets.HBox(list(pick.values())))
