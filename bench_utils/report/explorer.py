"""What ``notebooks/explore.ipynb`` shows: one or more studies picked by the reader, a slice of them, and two
environments compared.

Each view is one HTML output with a display id: under papermill that output is the whole story (the slice the
parameters name); in a live kernel, ipywidgets controls redraw it in place (a study picker above the summary redraws
every view). So the notebook reads the same either way and needs no detection of who runs it. A control offers only
what draws something (``selection.options``).
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import replace
import html
import os
from pathlib import Path
from typing import Any, Callable, Iterable
import warnings

from IPython.display import HTML, display
from matplotlib.figure import Figure
import numpy as np
import pandas as pd

from ..errors import UserError
from ..records.results_file import check_readable, skipped_lines_said
from . import explorer_tables as views, geometric_means, plots, regressions, selection as slices, why
from .frame import DuplicateCellWarning, device_name, frame, latest_records, project_paths, results_files, row_names
from .i18n import Catalog
from .markdown import isolated, markdown_html
from .study_choices import relative, study_choices

FIELD_HEADERS = {"environment": "col_environment", "batch_size": "col_batch", "mode": "col_mode", "dtype": "col_dtype"}


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


def _once(redraw: Callable[[], None]) -> Callable[..., None]:
    """``redraw`` as a controls' observer that ignores the changes its own run makes (options replaced, values
    set), so that one change redraws once."""
    busy: list[bool] = []

    def changed(_change: Any = None) -> None:
        if not busy:
            busy.append(True)
            try:
                redraw()
            finally:
                busy.clear()
    return changed


def figure_html(figure: Figure) -> str:
    return (f'<img style="max-width: 100%" '
            f'src="data:image/png;base64,{base64.b64encode(plots.png_bytes(figure)).decode()}"/>')


class Explorer:
    """The records of the given study folders or results.jsonl files (latest record per cell), its views' words in
    ``language`` (a catalog of the report's: en, ar, es)."""

    def __init__(self, results_paths: Iterable[str | os.PathLike] | str | os.PathLike, language: str = "en") -> None:
        self.catalog = Catalog(language)
        # each live view's, run when the studies change; a view's cell run again replaces its own
        self._redraws: dict[str, Callable[[], None]] = {}
        self.load(results_paths)

    def load(self, results_paths: Iterable[str | os.PathLike] | str | os.PathLike) -> None:
        """Read these studies instead (the views already drawn are redrawn by the picker that calls it)."""
        paths = project_paths(results_paths)
        check_readable(results_files(paths))  # one line, not a KeyError's traceback
        # each skipped line listed below the cell that reads them and counted in the summary; two records of one
        # row said once there, in the notebook's words, not as a warning per row under the cell
        with warnings.catch_warnings(record=True) as caught, skipped_lines_said() as skipped:
            warnings.simplefilter("always", DuplicateCellWarning)
            data = frame(latest_records(paths))
        for warning in caught:
            if not issubclass(warning.category, DuplicateCellWarning):
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        self.paths, self.data, self.skipped = paths, data, skipped
        self.duplicates = [warning.message.record for warning in caught
                           if isinstance(warning.message, DuplicateCellWarning) and warning.message.record]

    # --- the studies, and their summary ---

    def summary_html(self) -> str:
        catalog = self.catalog
        sources = ", ".join(html.escape(f"{p.parent.name}/{p.name}" if p.is_file() else p.name) for p in self.paths)
        said = catalog.plural("explore_cells_from", len(self.data), count=catalog.number(len(self.data), 0),
                              sources=sources)
        skipped = "".join(f"<p>{html.escape(catalog.t('explore_skipped', name=isolated(name, catalog), count=n))}</p>"
                          for name, n in Counter(f"{Path(line.path).parent.name}/{Path(line.path).name}"
                                                     for line in self.skipped).items())
        rows = [views.cell_named(catalog, label, r.cell.batch_size, mode, r.cell.dtype)  # as the tables name them
                + f" ({isolated(device_name(r), catalog)})" for r in self.duplicates for label, mode in [row_names(r)]]
        duplicates = "<p>" + html.escape(catalog.plural("explore_duplicates", len(rows), count=len(rows), cells=(
            "؛ " if catalog.direction == "rtl" else "; ").join(rows))) + "</p>" if rows else ""
        return (f"<h2>{html.escape(catalog.t('summary_heading'))}</h2><p>{said}</p>" + skipped + duplicates
                + views.table_html(views.summary_view(slices.summary_table(self.data), catalog), catalog)
                + f"<h3>{html.escape(catalog.t('explore_geomean_heading'))}</h3>"
                + markdown_html(geometric_means.geomean_table(self.data, catalog)))

    def summary(self, controls: bool = False) -> None:
        """The summary; with ``controls``, the study picker above it (a live kernel)."""
        if controls:
            display(self.study_picker())
        handle = display(HTML(self.summary_html()), display_id=True)
        self._redraws["summary"] = lambda: handle.update(HTML(self.summary_html()))

    def study_picker(self) -> Any:
        """Every study the project holds (``study_choices``), the ones shown picked; picking others reads them
        and redraws every view."""
        import ipywidgets as widgets

        current = [relative(path) for path in self.paths]
        choices = study_choices(current)
        picker = widgets.SelectMultiple(options=[(choice.label, choice.path) for choice in choices],
                                        value=tuple(current), rows=min(8, max(2, len(choices))),
                                        description=self.catalog.t("explore_studies"),
                                        style={"description_width": "initial"},
                                        layout=widgets.Layout(width="min(100%, 40em)"))
        hint = self.catalog.t("explore_studies_hint")
        note = widgets.HTML(f"<small>{html.escape(hint)}</small>")

        def changed(_change: Any) -> None:
            if not picker.value:
                note.value = f"<small>{html.escape(self.catalog.t('explore_studies_none'))}</small>"
                return
            try:
                self.load(list(picker.value))
            except UserError as problem:  # an unreadable file: said here, the views keep what they showed
                note.value = f"<b>{html.escape(str(problem))}</b>"
                return
            note.value = f"<small>{html.escape(hint)}</small>"
            for redraw in self._redraws.values():
                redraw()

        picker.observe(changed, names="value")
        return widgets.VBox([picker, note])

    # --- one slice ---

    def slice_html(self, selection: slices.Selection) -> str:
        """Latency table, speed-up plot, compile cost and memory of one resolved selection."""
        catalog = self.catalog
        mode = str(selection.mode)
        where = catalog.t("explore_slice_title", environment=selection.environment, batch=selection.batch_size,
                          mode=catalog.mode_name(mode), dtype=selection.dtype)
        latency = slices.latency_table(self.data, selection)
        return (f"<h2>{html.escape(where)}</h2><h3>{html.escape(catalog.t('explore_latency_heading'))}</h3>"
                + views.table_html(views.latency_view(latency, catalog, mode), catalog,
                                   wrapping=(catalog.t("col_flags"),))
                + figure_html(speedup_figure(latency, where))
                + f"<h3>{html.escape(catalog.t('compile_heading'))}</h3>"
                + views.table_html(views.compile_view(slices.compile_table(self.data, selection), catalog), catalog)
                + f"<h3>{html.escape(catalog.t('explore_memory_heading'))}</h3>"
                + views.table_html(views.memory_view(slices.memory_table(self.data, selection), catalog), catalog,
                                   wrapping=(catalog.t("col_measured_by"),))
                + self.why_html(selection))

    def why_html(self, selection: slices.Selection) -> str:
        """The report's "why it got faster" for the slice: time by kind of work, kernels or operator calls and
        busy fraction, one sentence per model (``report.why``)."""
        rows = why.profiled(self.data)
        rows = rows[(rows["environment"] == selection.environment) & (rows["batch_size"] == selection.batch_size)
                    & (rows["mode"] == selection.mode) & (rows["dtype"] == selection.dtype)]
        catalog = self.catalog
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
        if controls:  # a view without them shows its slice only (papermill's): the picker does not redraw it
            display(self.slice_controls(chosen, lambda picked: handle.update(HTML(self.slice_html(picked))),
                                        lambda problem: handle.update(HTML(f"<p>{html.escape(problem)}</p>"))))

    def slice_controls(self, chosen: slices.Selection, redraw: Callable[[slices.Selection], None],
                       say: Callable[[str], None] | None = None) -> Any:
        """Dropdowns for the four fields; a change redraws once. Each offers only the values that, with the fields
        before it, draw something (``selection.options``): a change of environment, batch size or mode offers the
        values measured there, keeping those that still exist. When the studies change, the same."""
        import ipywidgets as widgets

        available = slices.options(self.data, chosen)
        dropdowns = {name: widgets.Dropdown(description=self.catalog.t(FIELD_HEADERS[name]),
                                            options=available[name], value=getattr(chosen, name),
                                            style={"description_width": "initial"})
                     for name in FIELD_HEADERS}
        def synced() -> slices.Selection:
            """The dropdowns' values, each field's options those the fields before it allow."""
            picked = slices.Selection()
            for name in FIELD_HEADERS:
                offered = slices.options(self.data, picked)[name]
                dropdown = dropdowns[name]
                value = dropdown.value
                if tuple(dropdown.options) != tuple(offered):
                    dropdown.options = offered
                dropdown.disabled = len(offered) < 2  # one value: shown, not offered as a choice
                value = value if value in offered else (offered[0] if offered else None)
                if dropdown.value != value:
                    dropdown.value = value
                picked = replace(picked, **{name: value})
            return picked

        @_once
        def changed() -> None:
            try:
                redraw(slices.resolve(self.data, synced()))
            except UserError as problem:  # studies without a compiled cell
                if say is not None:
                    say(str(problem))

        for dropdown in dropdowns.values():
            dropdown.disabled = len(dropdown.options) < 2
            dropdown.observe(changed, names="value")
        self._redraws["slice"] = changed
        return widgets.HBox(list(dropdowns.values()), layout=widgets.Layout(flex_flow="row wrap"))

    # --- two environments ---

    def comparison_html(self, baseline: str, candidate: str, tolerance: float) -> str:
        catalog = self.catalog
        table = regressions.compare_environments(self.data, baseline, candidate, tolerance, catalog)
        counts = table["verdict"].value_counts()
        said = catalog.plural("compare_summary", len(table), cells=len(table), same=counts.get("same", 0),
                              faster=counts.get("improvement", 0), slower=counts.get("regression", 0),
                              inconclusive=counts.get("inconclusive", 0))  # as the comparison page counts
        title = catalog.t("compare_title", candidate=isolated(candidate, catalog), baseline=isolated(baseline, catalog))
        return (f"<h2>{html.escape(title)}</h2><p>{html.escape(said)}</p>"
                f"<p>{html.escape(catalog.t('compare_method', tolerance=catalog.percent(tolerance)))}</p>"
                + views.comparison_html(table, catalog))

    def one_environment_html(self) -> str:
        environments = slices.options(self.data)["environment"]
        said = self.catalog.t("compare_one_environment",
                              environments=", ".join(isolated(name, self.catalog) for name in environments) or "–")
        return f"<p>{html.escape(said)}</p>"

    def compare(self, baseline: str | None = None, candidate: str | None = None, tolerance: float = 0.10,
                controls: bool = True) -> None:
        """Two environments side by side (default: the first two), regressions highlighted; with one environment,
        a line saying so (and its controls hidden until the studies picked hold two)."""
        environments = slices.options(self.data)["environment"]
        if len(environments) < 2 and (baseline is not None or candidate is not None):
            raise UserError(f"nothing to compare: the results hold one environment only "
                            f"({', '.join(environments) or 'none'})")
        if len(environments) >= 2:
            baseline = baseline or next(e for e in environments if e != candidate)
            candidate = candidate or next(e for e in environments if e != baseline)
            shown = self.comparison_html(baseline, candidate, tolerance)
        else:
            shown = self.one_environment_html()
        handle = display(HTML(shown), display_id=True)
        if not controls:
            return
        import ipywidgets as widgets

        pick = {"baseline": widgets.Dropdown(description="baseline", options=environments, value=baseline),
                "candidate": widgets.Dropdown(description="candidate", options=environments, value=candidate),
                "tolerance": widgets.FloatSlider(description="tolerance", value=tolerance, min=0.0,
                                                 max=0.99, step=0.01)}  # what compare_environments takes
        box = widgets.HBox(list(pick.values()), layout=widgets.Layout(flex_flow="row wrap"))

        @_once
        def changed() -> None:
            offered = slices.options(self.data)["environment"]
            box.layout.display = None if len(offered) >= 2 else "none"  # no control that leads nowhere
            if len(offered) < 2:
                handle.update(HTML(self.one_environment_html()))
                return
            for name in ("baseline", "candidate"):
                if tuple(pick[name].options) != tuple(offered):
                    keep = pick[name].value
                    pick[name].options = offered
                    pick[name].value = keep if keep in offered else None
            first = pick["baseline"].value or next(e for e in offered if e != pick["candidate"].value)
            pick["baseline"].value = first
            if pick["candidate"].value in (None, first):
                pick["candidate"].value = next(e for e in offered if e != first)
            handle.update(HTML(self.comparison_html(pick["baseline"].value, pick["candidate"].value,
                                                    pick["tolerance"].value)))

        box.layout.display = None if len(environments) >= 2 else "none"
        for control in pick.values():
            control.observe(changed, names="value")
        self._redraws["comparison"] = changed
        display(box)
