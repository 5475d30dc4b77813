from pathlib import Path

from bench_utils import plots, report
from bench_utils.i18n import Catalog

FIXTURE = Path(__file__).parent / "fixtures" / "smoke-results.jsonl"


def test_the_guides_three_plots_in_each_locale():
    data = report.frame(report.latest_records([FIXTURE]))
    device = data["device_name"].iloc[0]
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        batch = plots.batch_comparison(data, device, "default", catalog)
        assert batch.axes[0].get_title().startswith(catalog.t("plot_batch_title", device=device))
        assert batch.axes[0].get_ylabel() == catalog.t("axis_improvement")
        duration = plots.duration(data, device, 1, "default", catalog)
        assert duration.axes[0].get_ylabel() == catalog.t("axis_duration")
        assert len(duration.axes[0].patches) >= 2  # eager and compiled bars
        percentage = plots.percentage(data, device, 1, "default", catalog)
        assert percentage.axes[0].get_xlabel() == catalog.t("axis_model")


def test_a_plot_without_data_says_so():
    data = report.frame(report.latest_records([FIXTURE]))
    figure = plots.percentage(data, "no such device", 1, "default", Catalog("ar"))
    assert figure.axes[0].texts[0].get_text() == Catalog("ar").t("no_results")
