"""The exploration notebook's tables in words (``report.explorer_tables``)."""

import pandas as pd

from bench_utils.report import explorer_tables as views, selection
from bench_utils.report.frame import frame, latest_records
from bench_utils.report.i18n import Catalog
from bench_utils.report.selection import Selection

from explore_data import EXAMPLE


def latency():
    data = frame(latest_records([EXAMPLE]))
    return selection.latency_table(data, selection.resolve(data, Selection()))


def test_the_latency_view_formats_the_speedup_its_interval_and_says_the_flags():
    table = latency()
    table.loc[0, ["eager_drift", "eager_cell_ms"]] = [True, 12.346]
    table.loc[1, "compiled_status"] = "error"
    table.loc[2, ["parity", "parity_blind"]] = ["pass", True]  # a gate that could not have failed
    view = views.latency_view(table, Catalog("en"), "default")
    assert list(view.columns) == ["Model", "Eager beside default (ms)", "Compiled, default (ms)", "p99, default (ms)",
                                  "Speed-up, default", "95 % CI", "Accuracy gate", "Flags"]
    first = view.iloc[0]
    assert first["Speed-up, default"] == f"{table.loc[0, 'speedup']:.2f}×"
    assert first["95 % CI"] == f"{table.loc[0, 'ci_low']:.2f}–{table.loc[0, 'ci_high']:.2f}"
    assert first["Flags"] == "drift: eager cell 12.35 ms" and view.iloc[1]["Flags"] == "error"
    assert view.iloc[2]["Flags"] == "" and view.iloc[2]["Accuracy gate"] == Catalog("en").t("parity_blind")
    assert table.loc[0, "parity"] == "pass" and first["Accuracy gate"] == "pass"


def test_numbers_and_headers_follow_the_locale_and_arabic_reads_right_to_left():
    table = latency()
    spanish = views.latency_view(table, Catalog("es"), "default")
    assert spanish.columns[0] == "Modelo" and spanish.columns[4].startswith("Aceleración, ")
    assert "," in spanish.iloc[0, 1]  # decimal comma
    arabic = views.latency_view(table, Catalog("ar"), "default")
    page = views.table_html(arabic, Catalog("ar"))
    assert page.startswith('<div dir="rtl">')
    # figures kept left-to-right inside the right-to-left table (an interval read "1.36–1.10" without the marks)
    interval = arabic.iloc[0, 5]
    assert interval.startswith("\u2066") and interval.endswith("\u2069") and interval in page


def test_memory_figures_of_two_kinds_are_named_each_and_empty_tables_say_so():
    table = pd.DataFrame({"model": ["A", "B"], "eager_peak_mib": [10.0, 2.0], "compiled_peak_mib": [12.0, None],
                          "memory_ratio": [1.2, None], "eager_method": ["cuda_reserved", "resident"],
                          "compiled_method": ["cuda_reserved", None]})
    view = views.memory_view(table, Catalog("en"))
    assert list(view["Measured by"]) == ["CUDA allocator (reserved)", "eager: resident memory, compiled: not measured"]
    assert views.table_html(view.iloc[0:0], Catalog("en")) == "<p>nothing measured here</p>"
    html = views.table_html(view, Catalog("en"), wrapping=("Measured by",))
    assert "white-space: normal" in html and "–" in html  # headers wrap; a figure not measured is a dash


def test_the_comparison_view_names_each_cell_and_keeps_a_figure_with_its_interval(tmp_path):
    from bench_utils.report import regressions
    from explore_data import remeasured, write_study

    data = frame(latest_records([EXAMPLE, write_study(tmp_path / "later", remeasured({"segformer": 1.2}))]))
    base, cand = sorted(set(data["environment"]), key=lambda name: "2.99.0" in name)
    for locale in ("en", "ar"):
        catalog = Catalog(locale)
        table = regressions.compare_environments(data, base, cand, catalog=catalog)
        view = views.comparison_view(table, catalog)
        assert list(view.columns) == [catalog.t(key) for key in (
            "col_cell", "col_speedup_baseline", "col_speedup_candidate", "col_speedup_ratio",
            "col_compiled_latency_ratio", "col_verdict")]
        ratio = view[catalog.t("col_speedup_ratio")].iloc[0]
        assert "\u2060–\u2060" in ratio and "<U+" not in ratio  # no break inside the interval, nothing shown raw
        assert ratio.startswith("\u2066") == (locale == "ar")  # one left-to-right run in Arabic
        html = views.comparison_html(table, catalog)
        assert html.count(views.VERDICT_COLOURS["regression"]) >= 1
    segformer = view[view[catalog.t("col_cell")].str.contains("Segformer")].iloc[0]
    assert segformer[catalog.t("col_verdict")].startswith(catalog.t("reproduce_slower"))
