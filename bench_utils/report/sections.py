"""What the report notebook shows, section by section: the notebook only calls these methods, and the content
comes from ``tables``, ``context`` and the others (Markdown) and ``plots`` (figures), all reachable from tests.
"""

from __future__ import annotations

from collections import Counter
import os
from pathlib import Path
from typing import Iterable

from IPython.display import Image, Markdown, display

from . import context, diagnosis, geometric_means, guide_table, machine_coverage, plots, provenance, tables, why
from .guide_differences import guide_differences
from ..measurement import stats
from ..records.results_file import check_readable, read_records, skipped_lines_said
from ..records.schema import Record
from ..vocabulary import CompileMode
from .energy_readings import PACE_RATIO
from .frame import compiled_modes, frame, latest_records, project_paths, results_files, with_machines
from .i18n import Catalog
from .markdown import code, environment_label, isolated, ltr
from .render import skipped_lines_metadata


def show_figure(figure, description: str | None = None) -> None:
    """Display a figure as PNG bytes, whatever backend the kernel runs: the exporters embed
    or extract them, and the user's own matplotlib state is left alone. ``description``, what the plot
    shows in the page's language, is its alt text in HTML and Markdown: plain text, which each template
    escapes for its format."""
    display(Image(data=plots.png_bytes(figure), format="png", metadata={"alt": description} if description else None))


def show_records(records: list[dict], locale: str = "en") -> None:
    """A task notebook's records as the report shows them (its tables, one place for both): per device and batch size
    the guide's table, each failed cell's reason, then every compiled cell's speed-up in one picture."""
    catalog = Catalog(locale)
    read = [Record.of(record) for record in records]  # checked once, for the frame and the machine counts
    data = frame(read)
    if data.empty:
        display(Markdown(catalog.t("no_results")))
        return
    data = with_machines(data, read, read)
    parts = [f"#### {caption}\n\n{table}" for caption, table in guide_table.guide_tables(data, catalog)]
    failed = data[data["error"].notna() & (data["error"] != "")]
    parts += [f"- {ltr(row['label'], catalog)} · {ltr(str(row['batch_size']), catalog)} · "
              f"{catalog.mode_name(row['mode'])}: {ltr(row['error'], catalog)}" for _, row in failed.iterrows()]
    display(Markdown("\n\n".join(parts)))
    for device in sorted(set(data["environment"])):
        if (data[data["environment"] == device]["compile_mode"] != CompileMode.EAGER).any():
            show_figure(plots.at_a_glance(data, device, catalog),
                        catalog.t("alt_glance", device=environment_label(device, catalog, markdown=False)))


class ReportView:
    """The report of one or more study folders in one locale, shown section by section."""

    def __init__(self, results_paths: Iterable[str | os.PathLike] | str, locale: str,
                 reference_csv: str | os.PathLike | None = None, coverage: Iterable[dict] | None = None) -> None:
        self.catalog = Catalog(locale)
        self.coverage = list(coverage or [])  # per study folder and environment: its grid's cells measured
        self.paths = project_paths(results_paths)
        check_readable(results_files(self.paths))  # one line in the notebook too, not a KeyError's traceback
        # each listed on stderr (the notebook's, which render hands back), counted on the page
        with skipped_lines_said() as skipped:
            self.records = latest_records(self.paths)
            self.every_record = read_records(results_files(self.paths))  # every machine's (``machines``)
        self.skipped = skipped
        self.data = machine_coverage.with_new_machine(
            with_machines(frame(self.records), self.records, self.every_record), self.every_record)
        self.reference_csv = reference_csv or tables.REFERENCE_CSV

    def _markdown(self, text: str) -> None:
        display(Markdown(text))

    def header(self) -> None:
        t, devices = self.catalog.t, sorted(set(self.data["environment"])) if not self.data.empty else []
        listed = ", ".join(environment_label(device, self.catalog) for device in devices) or "–"
        # the lines skipped ride along for the command that renders this notebook (``render.say_skipped_lines``)
        display(Markdown(f"# {t('title')}\n\n{t('intro', devices=listed)}"),
                metadata=skipped_lines_metadata(self.skipped))
        for device in devices:  # the results first, then what changes what they mean
            if (self.data[self.data["environment"] == device]["compile_mode"] != CompileMode.EAGER).any():
                show_figure(plots.at_a_glance(self.data, device, self.catalog),
                            t("alt_glance", device=environment_label(device, self.catalog, markdown=False)))
        notes = [*self.provenance_text(), *self.skipped_text()]
        if notes:
            self._markdown("\n\n".join(f"> {text}" for text in notes))

    def provenance_text(self) -> list[str]:
        """What a reader must know before any figure: what sets these figures apart from the guide's
        (``guide_differences``), and the grids' cells measured, the models not yet measured named (``provenance``).
        The records' own bookkeeping comes after the results (``record_notes``)."""
        differences = guide_differences(self.records, self.catalog, self.reference_csv)
        return [*([differences] if differences else []), *provenance.coverage_lines(self.coverage, self.catalog)]

    def record_notes_text(self) -> list[str]:
        """The records' bookkeeping (``provenance``): the fields a study folder says are wrong, the cells measured
        with an earlier design; none where there is nothing to say."""
        before = provenance.measured_before_switch_calls(self.data, self.catalog)
        return [*provenance.correction_lines(provenance.read_corrections(self.paths), self.records, self.catalog),
                *([before] if before else [])]

    def record_notes(self) -> None:
        """A section of its own after the results, where there are notes: a reader meets results first, not a
        wrong commit or a dirty tree."""
        notes = self.record_notes_text()
        if notes:
            t = self.catalog.t
            self._markdown(f"## {t('record_notes_heading')}\n\n{t('record_notes_text')}\n\n"
                           + "\n\n".join(f"- {note}" for note in notes))

    def skipped_text(self) -> list[str]:
        """A sentence per results file that had lines the reader skipped: how many (none: no sentence)."""
        counts = Counter(Path(line.path) for line in self.skipped)
        return [self.catalog.t("skipped_lines", file=code(f"{path.parent.name}/{path.name}", self.catalog),
                               count=ltr(self.catalog.number(count, 0), self.catalog))
                for path, count in counts.items()]

    def summary(self) -> None:
        """What to use per device, model and batch size, then the geometric-mean speed-ups."""
        t = self.catalog.t
        parts = [f"## {t('summary_heading')}\n\n### {t('use_heading')}\n\n{t('use_text')}\n\n"
                 f"{diagnosis.what_to_use(self.data, self.catalog)}\n\n{t('summary_text')}\n\n"
                 f"{geometric_means.geomean_table(self.data, self.catalog)}"]
        comparison = tables.comparison_table(self.data, self.catalog)
        if comparison:  # several devices or torch versions: their speed-ups side by side
            parts.append(f"### {t('comparison_heading')}\n\n{t('comparison_text')}\n\n{comparison}")
        self._markdown("\n\n".join(parts))

    def guide_tables(self) -> None:
        t = self.catalog.t
        runs = self.catalog.alternatives([self.catalog.number(r, 0) for r in sorted(set(self.data["runs"].dropna()))]
                                         if not self.data.empty else [])
        flags = [t("flags_text", cv=self.catalog.number(stats.NOISY_CV, 2),
                   shift=self.catalog.percent(stats.NOISY_OUTLIER_SHIFT), drift=self.catalog.percent(stats.DRIFT)),
                 *map(t, ["flag_noisy_series_text", "flag_no_cuda_graphs_text", "flag_gate_and_shapes_text",
                          "flag_gate_blind_text", "flag_throttled_text", "flag_regime_text", "flag_replicates_text",
                          "rests_on_text"])]
        parts = [f"## {t('guide_heading')}\n\n{t('guide_text', runs=ltr(runs, self.catalog))}\n\n" + " ".join(flags)]
        for caption, table in guide_table.guide_tables(self.data, self.catalog):
            parts.append(f"### {caption}\n\n{table}")
        machines = machine_coverage.machines_table(self.every_record, self.catalog)
        if machines:  # the cells measured on several machines: each one's figure, not only the latest
            parts.append(f"### {t('machines_heading')}\n\n{machines}")
        switching = tables.switch_table(self.data, self.catalog)
        if switching:  # the interleaving's own cost, kept out of the figures above
            parts.append(f"### {t('switch_heading')}\n\n{t('switch_text')}\n\n{switching}")
        clocks = tables.clocks_table(self.data, self.catalog)
        if clocks:  # whether the GPU or the host moved while timing
            parts.append(f"### {t('clocks_heading')}\n\n{t('clocks_text')}\n\n{clocks}")
        self._markdown("\n\n".join(parts) if len(parts) > 1 else parts[0] + "\n\n" + t("no_results"))

    def plots(self) -> None:
        self._markdown(f"## {self.catalog.t('plots_heading')}")
        if self.data.empty:
            return
        for device in sorted(set(self.data["environment"])):
            on_device = self.data[self.data["environment"] == device]
            for mode in compiled_modes(on_device):
                # alt text: plain, the names as written (the templates escape it)
                where = dict(device=environment_label(device, self.catalog, markdown=False),
                             mode=self.catalog.mode_name(mode, lambda name: isolated(name, self.catalog)))
                show_figure(plots.batch_comparison(self.data, device, mode, self.catalog),
                            self.catalog.t("alt_batch_comparison", **where))
                for batch in sorted(on_device[on_device["mode"] == mode]["batch_size"].unique()):
                    batch_text = isolated(int(batch), self.catalog)
                    show_figure(plots.duration(self.data, device, int(batch), mode, self.catalog),
                                self.catalog.t("alt_duration", batch=batch_text, **where))
                    show_figure(plots.percentage(self.data, device, int(batch), mode, self.catalog),
                                self.catalog.t("alt_percentage", batch=batch_text, **where))

    def compile_cost(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('compile_heading')}\n\n{t('compile_text')}\n\n"
                       f"{tables.compile_table(self.data, self.catalog)}\n\n"
                       f"### {t('startup_heading')}\n\n{t('startup_text')}\n\n"
                       f"{tables.startup_table(self.data, self.catalog)}")
        if not self.data.empty and (self.data["shapes"] == "dynamic").any():  # only where a grid asked for it
            self._markdown(f"### {t('dynamic_batch_heading')}\n\n{t('dynamic_batch_text')}\n\n"
                           f"{tables.dynamic_batch_table(self.data, self.catalog)}")

    def memory(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('memory_heading')}\n\n{t('memory_text')}\n\n"
                       f"{tables.memory_table(self.data, self.catalog)}\n\n"
                       f"### {t('hardware_heading')}\n\n"
                       f"{t('hardware_text', ratio=ltr(self.catalog.number(PACE_RATIO, 2), self.catalog))}\n\n"
                       f"{tables.hardware_table(self.data, self.catalog)}")

    def why(self) -> None:
        """Why it got faster: per environment, time by kind of work (a model's smallest and largest batch), then
        kernels or operator calls and busy fraction per compiled cell, and one sentence each."""
        t = self.catalog.t
        rows = why.profiled(self.data)
        self._markdown(f"## {t('why_heading')}\n\n{t('why_text')}" + ("" if not rows.empty else f"\n\n{t('why_none')}"))
        if rows.empty:  # no record at all has no columns either
            return
        for environment in sorted(set(rows["environment"])):
            here = rows[rows["environment"] == environment]
            self._markdown(f"### {environment_label(environment, self.catalog)}")
            show_figure(plots.work_kinds(why.extreme_batches(here), self.catalog),
                        self.catalog.t("alt_work_kinds", device=environment_label(environment, self.catalog,
                                                                                  markdown=False)))
            self._markdown(why.why_table(here, self.catalog) + "\n\n"
                           + "\n".join(f"- {why.sentence(row, self.catalog)}" for _, row in here.iterrows()))

    def losses(self) -> None:
        """When compile loses: per slower cell, what got slower, its remedies and the verdict."""
        t = self.catalog.t
        self._markdown(f"## {t('loses_heading')}\n\n{t('loses_text')}\n\n"
                       f"{diagnosis.losses_markdown(self.data, self.catalog)}")

    def reference(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('reference_heading')}\n\n"
                       f"{t('reference_text', torch=ltr(tables.reference_torch_versions(self.reference_csv), self.catalog))}\n\n"
                       f"{tables.reference_table(self.data, self.catalog, self.reference_csv)}")

    def methodology(self) -> None:
        t = self.catalog.t
        parts = [f"## {t('methodology_heading')}\n\n{context.methodology_text(self.data, self.catalog)}"]
        timer_check = context.timer_check_text(self.paths, self.catalog)
        if timer_check:
            parts.append(f"### {t('timer_check_heading')}\n\n{timer_check}")
        parts.append(f"### {t('environment_heading')}")
        for device, table in context.environment_tables(self.records, self.catalog):
            parts.append(f"#### {device}\n\n{table}")
        self._markdown("\n\n".join(parts))
