"""What the report notebook shows, section by section (Markdown and figures).

The notebook only calls these methods; the content comes from ``report`` (tables)
and ``plots`` (figures), so every piece is reachable from tests.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterable

import matplotlib.pyplot as plt
from IPython.display import Image, Markdown, display

from . import plots, report
from .env import PROJECT_ROOT
from .i18n import Catalog


class ReportView:
    def __init__(self, results_paths: Iterable[str | os.PathLike], locale: str,
                 reference_csv: str | os.PathLike | None = None) -> None:
        self.catalog = Catalog(locale)
        # Relative paths are the project's (the notebook runs from notebooks/ in JupyterLab).
        self.paths = [Path(p) if Path(p).is_absolute() else PROJECT_ROOT / p for p in results_paths]
        self.records = report.latest_records(self.paths)
        self.data = report.frame(self.records)
        self.reference_csv = reference_csv or report.REFERENCE_CSV

    def _markdown(self, text: str) -> None:
        display(Markdown(text))

    def _figure(self, figure) -> None:
        # PNG bytes, whatever backend the kernel runs: the exporters embed or extract them.
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(figure)
        display(Image(data=buffer.getvalue(), format="png"))

    def header(self) -> None:
        t, devices = self.catalog.t, sorted(set(self.data["device_name"])) if not self.data.empty else []
        listed = ", ".join(report.ltr(device, self.catalog) for device in devices) or "–"
        self._markdown(f"# {t('title')}\n\n{t('intro', devices=listed)}")

    def summary(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('summary_heading')}\n\n{t('summary_text')}\n\n"
                       f"{report.geomean_table(self.data, self.catalog)}")

    def guide_tables(self) -> None:
        t = self.catalog.t
        runs = ", ".join(str(int(r)) for r in sorted(set(self.data["runs"].dropna()))) if not self.data.empty else "–"
        parts = [f"## {t('guide_heading')}\n\n{t('guide_text', runs=report.ltr(runs, self.catalog))}\n\n"
                 + t("flags_text", cv=self.catalog.number(report.NOISY_CV, 2),
                     outliers=self.catalog.percent(report.NOISY_OUTLIER_FRACTION),
                     drift=self.catalog.percent(report.DRIFT))]
        for caption, table in report.guide_tables(self.data, self.catalog):
            parts.append(f"### {caption}\n\n{table}")
        self._markdown("\n\n".join(parts) if len(parts) > 1 else parts[0] + "\n\n" + t("no_results"))

    def plots(self) -> None:
        self._markdown(f"## {self.catalog.t('plots_heading')}")
        if self.data.empty:
            return
        for device in sorted(set(self.data["device_name"])):
            on_device = self.data[self.data["device_name"] == device]
            for mode in report.compiled_modes(on_device):
                self._figure(plots.batch_comparison(self.data, device, mode, self.catalog))
                for batch in sorted(on_device[on_device["mode"] == mode]["batch_size"].unique()):
                    self._figure(plots.duration(self.data, device, int(batch), mode, self.catalog))
                    self._figure(plots.percentage(self.data, device, int(batch), mode, self.catalog))

    def compile_cost(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('compile_heading')}\n\n{t('compile_text')}\n\n"
                       f"{report.compile_table(self.data, self.catalog)}")

    def memory(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('memory_heading')}\n\n{t('memory_text')}\n\n"
                       f"{report.memory_table(self.data, self.catalog)}")

    def reference(self) -> None:
        t = self.catalog.t
        self._markdown(f"## {t('reference_heading')}\n\n"
                       f"{t('reference_text', torch=report.ltr(report.reference_torch_versions(self.reference_csv), self.catalog))}\n\n"
                       f"{report.reference_table(self.data, self.catalog, self.reference_csv)}")

    def methodology(self) -> None:
        t = self.catalog.t
        parts = [f"## {t('methodology_heading')}\n\n{report.methodology_text(self.data, self.catalog)}"]
        timer_check = report.timer_check_text(self.paths, self.catalog)
        if timer_check:
            parts.append(f"### {t('timer_check_heading')}\n\n{timer_check}")
        parts.append(f"### {t('environment_heading')}")
        for device, table in report.environment_tables(self.records, self.catalog):
            parts.append(f"#### {device}\n\n{table}")
        self._markdown("\n\n".join(parts))
