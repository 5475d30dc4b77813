from pathlib import Path
import subprocess
import sys
import textwrap

from bench_utils.report import frame as report_frame
from bench_utils.report import plots
from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import environment_label

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"


def test_the_guides_three_plots_in_each_locale():
    data = report_frame.frame(report_frame.latest_records([FIXTURE]))
    device = data["device_name"].iloc[0]
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        batch = plots.batch_comparison(data, device, "default", catalog)
        label = environment_label(device, catalog, isolate=False)
        assert batch.axes[0].get_title() == (catalog.t("plot_batch_title", device=label)
                                             + " — " + catalog.mode_name("default"))
        assert batch.axes[0].get_ylabel() == catalog.t("axis_improvement")
        duration = plots.duration(data, device, 1, "default", catalog)
        assert duration.axes[0].get_ylabel() == catalog.t("axis_duration")
        assert len(duration.axes[0].patches) >= 2  # eager and compiled bars
        percentage = plots.percentage(data, device, 1, "default", catalog)
        assert percentage.axes[0].get_xlabel() == catalog.t("axis_model")


def test_titles_name_the_device_and_the_mode_in_the_pages_language():
    from sample_records import cpu_and_gpu_records

    records = cpu_and_gpu_records("max-autotune")
    data = report_frame.frame(records)
    assert set(data["environment"]) == {"CPU (unknown)", "GPU"}  # the data stay locale-neutral
    expected = {"ar": ("وحدة المعالجة المركزية (غير معروف)", "وحدة معالجة الرسومات", "أقصى ضبط تلقائي (max-autotune)"),
                "es": ("CPU (desconocido)", "GPU", "ajuste automático máximo (max-autotune)"),
                "en": ("CPU (unknown)", "GPU", "max-autotune")}
    for locale, (cpu, gpu, mode) in expected.items():
        catalog = Catalog(locale)
        titles = [figure.axes[0].get_title() for environment in ("CPU (unknown)", "GPU") for figure in (
            plots.batch_comparison(data, environment, "max-autotune", catalog),
            plots.duration(data, environment, 1, "max-autotune", catalog),
            plots.percentage(data, environment, 1, "max-autotune", catalog))]
        assert all(title.endswith(" — " + mode) for title in titles), titles
        assert all(cpu in title for title in titles[:3]) and all(gpu in title for title in titles[3:]), titles
        if locale != "en":
            assert not any("unknown" in title for title in titles), titles
        if locale == "ar":
            assert not any("CPU" in title or "GPU" in title for title in titles), titles


def test_a_plot_without_data_says_so():
    data = report_frame.frame(report_frame.latest_records([FIXTURE]))
    figure = plots.percentage(data, "no such device", 1, "default", Catalog("ar"))
    assert figure.axes[0].texts[0].get_text() == Catalog("ar").t("no_results")


def test_plotting_leaves_the_users_matplotlib_backend_and_theme_alone():
    # A fresh interpreter: the user's state is set first, then the package is imported and used.
    script = textwrap.dedent("""
        import matplotlib
        matplotlib.use("svg")
        matplotlib.rcParams["font.family"] = ["serif"]
        matplotlib.rcParams["axes.facecolor"] = "#123456"
        before = (matplotlib.get_backend(), dict(matplotlib.rcParams))
        from bench_utils.report import frame, plots, sections  # noqa: F401
        from bench_utils.report.i18n import Catalog
        data = frame.frame(frame.latest_records([{fixture!r}]))
        figure = plots.batch_comparison(data, data["device_name"].iloc[0], "default", Catalog("ar"))
        assert plots.png_bytes(figure).startswith(b"\\x89PNG")
        after = (matplotlib.get_backend(), dict(matplotlib.rcParams))
        changed = sorted(k for k in before[1] if before[1][k] != after[1][k])
        assert before[0] == after[0] == "svg", (before[0], after[0])
        assert not changed, changed
        # the report's own look was applied to its figure, not to the user's defaults
        assert figure.axes[0].get_facecolor() != matplotlib.colors.to_rgba("#123456")
        print("unchanged")
    """).format(fixture=str(FIXTURE))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "unchanged"


def _overlaps(figure, artist, others):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(figure).draw()
    box = artist.get_window_extent()
    return [other for other in others if box.overlaps(other.get_window_extent())]


def test_a_legend_never_covers_a_bar_nor_an_axis_label_and_no_bar_runs_into_the_edge():
    # one bar (reduce-overhead at one batch size) had the legend drawn over it; in "time by kind of work" the
    # axis label ran under the legend and the longest bar into the edge
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_frame import _paired_record
    from test_why import profiled_records

    data = report_frame.frame([_paired_record("reduce-overhead", 5.0, 1.0)])
    device = data["environment"].iloc[0]
    catalog = Catalog("en")
    for figure in (plots.batch_comparison(data, device, "reduce-overhead", catalog),
                   plots.duration(data, device, 1, "reduce-overhead", catalog)):
        axis = figure.axes[0]
        bars = [patch for patch in axis.patches if patch.get_height() > 0]
        assert bars and not _overlaps(figure, axis.get_legend(), bars)
    from bench_utils.report import why
    rows = why.extreme_batches(why.profiled(report_frame.frame(profiled_records())))
    figure = plots.work_kinds(rows, catalog)
    axis = figure.axes[0]
    assert not _overlaps(figure, axis.get_legend(), [axis.xaxis.label, *axis.patches])
    right = max(patch.get_x() + patch.get_width() for patch in axis.patches)
    assert right < axis.get_xlim()[1]


def test_a_long_name_is_shortened_in_a_plot_unless_two_would_then_read_alike():
    import warnings

    import pandas as pd

    data = report_frame.frame(report_frame.latest_records([FIXTURE]))
    data = pd.concat([data, data[data["mode"] == "default"].assign(label="Other")])  # two compiled models
    device = data["device_name"].iloc[0]
    catalog = Catalog("en")

    def ticks(frame_data):
        figure = plots.percentage(frame_data, device, 1, "default", catalog)
        figure.canvas.draw()
        return [tick.get_text() for tick in figure.axes[0].get_xticklabels()]

    shown = ticks(data.assign(label=data["label"].map(lambda label: "x" * 200 + label)))
    assert len(shown) == 2 and all(len(text) == plots.SHORT_NAME and "…" in text for text in shown)
    alike = data.assign(label=data["label"].map(lambda label: "x" * 200 + label + "y" * 20))
    with warnings.catch_warnings():  # too long for the figure's margins: drawn, and no warning on the page
        warnings.simplefilter("error")
        assert [len(text) > 200 for text in ticks(alike)] == [True, True]  # two would read alike: shown whole
    long_device = data.assign(environment="CPU (" + "z" * 250 + ")")
    title = plots.batch_comparison(long_device, long_device["environment"].iloc[0], "default", catalog)
    assert len(title.axes[0].get_title()) < 2 * plots.SHORT_NAME + 40


def test_the_first_picture_shows_every_compiled_cell_and_where_a_new_machine_would_land():
    import warnings

    from bench_utils.paths import PROJECT_ROOT
    from bench_utils.report.sections import ReportView

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the study's cells measured again on later machines
        view = ReportView([PROJECT_ROOT / "reports" / "hf-guide-h200"], "es")
    compiled = view.data[(view.data["compile_mode"] != "eager") & view.data["speedup"].notna()]
    figure = plots.at_a_glance(view.data, "NVIDIA H200", view.catalog)
    axis = figure.axes[0]
    assert len(axis.get_yticklabels()) == len(compiled) == 25
    assert axis.get_xscale() == "log" and "1×" in [tick.get_text() for tick in axis.get_xticklabels()]
    band = view.catalog.t("col_new_machine")
    bands = [collection for collection in axis.collections if collection.get_label() == band]
    assert len(bands) == 1 and len(bands[0].get_segments()) == len(compiled)
