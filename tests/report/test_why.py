import pytest

from bench_utils.report import plots, sections, why
from bench_utils.report.frame import frame
from bench_utils.report.i18n import Catalog
from bench_utils.report.sections import ReportView
from bench_utils.vocabulary import WorkKind

from explore_data import example_records, write_study


def side(work_calls, busy, unit="kernels", regions=1.0, timed_ms=10.0, **kinds):
    """One side of a profile busy ``busy`` of a ``timed_ms`` call; profiled, as the profiler slows the host, the
    call took twice as long (its own busy fraction half ``busy``)."""
    return {"calls": 3, "wall_ms": 2 * timed_ms, "busy_ms": timed_ms * busy, "busy_fraction": busy / 2,
            "work_calls": work_calls, "work_unit": unit, "compiled_regions": regions,
            "kinds_ms": {kind.value: kinds.get(kind.value, 0.0) for kind in WorkKind}}


def timed_ms(record):
    """A compiled record's timed latencies (ms): its pairs' eager side, and its own."""
    return record["speedup"]["eager_mean_ms"], record["latency"]["mean"] * 1e3


def _side(values):
    """One side of a record's profile block (``records.schema.ProfileSide``)."""
    from bench_utils.records.schema import ProfileSide

    return ProfileSide.model_validate(values)


def profiled_records(**overrides):
    """The example's records, each compiled one with a profile: launch-bound eager whose element-wise work
    fusion took over (161 kernels -> 58, busy 31 % -> 88 %)."""
    records = example_records()
    for record in records:
        if record["cell"]["compile_mode"] != "eager":
            eager_ms, compiled_ms = timed_ms(record)
            record["profile"] = {"method": "torch.profiler", "activities": "cpu+cuda",
                                 "eager": side(161, 0.31, timed_ms=eager_ms, matmul_conv=1.5, elementwise=1.2,
                                               normalization=0.4),
                                 "compiled": side(58, 0.88, timed_ms=compiled_ms, matmul_conv=1.5, fused=0.6),
                                 **overrides}
    return records


def test_the_sentence_is_built_from_the_profiles_numbers_only():
    rows = why.profiled(frame(profiled_records()))
    assert len(rows) == 3 and set(rows["mode"]) == {"default"}
    text = why.sentence(rows.iloc[0], Catalog("en"))
    assert text == (f"{rows.iloc[0]['label']}, batch 1, {Catalog('en').mode_name('default')}: 161 → 58 kernels per "
                    "batch, device busy 31% → 88%; eager was bound by the host (the device waited between "
                    "launches); fusion turned 1.60 ms (element-wise and reductions and normalization) into 0.60 ms "
                    "of fused kernels.")


def test_busy_is_set_against_the_timed_latency_and_the_table_gives_the_profiled_walls_ratio():
    # the profiled calls took twice the timed latency (the fixture's): busy 31 % of the timed call, not 15.5 %
    rows = why.profiled(frame(profiled_records()))
    row = rows.iloc[0]
    assert row["eager_busy"] == pytest.approx(0.31) and row["compiled_busy"] == pytest.approx(0.88)
    table = why.why_table(rows, Catalog("en"))
    assert Catalog("en").t("col_profiled_over_timed") in table and "| 31% → 88% | 2.0× → 2.0× |" in table
    for locale in ("ar", "es"):
        assert Catalog(locale).t("col_profiled_over_timed") in why.why_table(rows, Catalog(locale))


def test_one_eager_cell_profiled_beside_two_modes_gets_one_verdict():
    # ConvNeXT batch 1 eager on the H200: 10.05 ms profiled beside default, 19.03 ms beside reduce-overhead, for
    # 7.48 and 7.42 ms timed and 5.73 ms busy: busy 57 % and 30 % of the profiled walls called it both
    import copy

    records = profiled_records()
    default = next(r for r in records if "profile" in r and r["cell"]["batch_size"] == 1)
    other = copy.deepcopy(default)
    other["record_id"] += "-ro"
    other["cell"]["compile_mode"] = "reduce-overhead"
    eager_ms, _ = timed_ms(default)
    for record, wall_ms, timed in ((default, 10.05, 7.48), (other, 19.03, 7.42)):
        scale = eager_ms / 7.48  # the example's own timed latency, in the H200's proportions
        record["speedup"]["eager_mean_ms"] = timed * scale
        record["profile"]["eager"].update(wall_ms=wall_ms * scale, busy_ms=5.73 * scale,
                                          busy_fraction=5.73 / wall_ms)
    rows = why.profiled(frame([default, other]))
    assert len(rows) == 2 and list(rows["eager_busy"].round(2)) == [0.77, 0.77]
    sentences = [why.sentence(row, Catalog("en")) for _, row in rows.iterrows()]
    assert all(Catalog("en").t("why_work_bound") in text for text in sentences)
    # near the threshold, one share each side of it: the cell's mean decides, for both
    for record, busy in ((default, 0.48), (other, 0.54)):
        record["profile"]["eager"]["busy_ms"] = busy * record["speedup"]["eager_mean_ms"]
    rows = why.profiled(frame([default, other]))
    verdicts = {Catalog("en").t("why_launch_bound") in why.sentence(row, Catalog("en")) for _, row in rows.iterrows()}
    assert verdicts == {False}


def test_a_graph_break_and_a_work_bound_model_are_said(tmp_path):
    records = profiled_records()
    for record in records:
        if "profile" in record:
            eager_ms, compiled_ms = timed_ms(record)
            record["profile"]["eager"] = side(20, 0.95, "operator calls", timed_ms=eager_ms, matmul_conv=8.0)
            record["profile"]["compiled"] = side(3, 0.97, "operator calls", regions=2.0, timed_ms=compiled_ms,
                                                 matmul_conv=6.0)
    text = why.sentence(why.profiled(frame(records)).iloc[0], Catalog("en"))
    assert "20 → 3 operator calls" in text and "eager kept the device busy with work" in text
    assert "matrix products and convolutions: 8.00 ms → 6.00 ms" in text
    assert text.endswith("2 compiled graphs per batch (graph breaks).")


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_the_section_renders_its_plot_table_and_sentences_in_every_locale(locale, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj: shown.append(obj.data))
    view = ReportView([write_study(tmp_path / "study", profiled_records())], locale)
    view.why()
    catalog = Catalog(locale)
    texts = [item for item in shown if isinstance(item, str)]
    images = [item for item in shown if isinstance(item, bytes)]
    assert texts[0].startswith(f"## {catalog.t('why_heading')}") and catalog.t("why_none") not in texts[0]
    assert len(images) == 1 and images[0].startswith(b"\x89PNG")
    assert sum(line.startswith("- ") for line in texts[-1].splitlines()) == 3
    assert catalog.t("why_launch_bound") in texts[-1] and catalog.t("col_busy") in texts[-1]


def test_records_without_a_profile_still_render_and_say_so(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj: shown.append(obj.data))
    ReportView([write_study(tmp_path / "old", example_records())], "en").why()
    assert shown == [f"## {Catalog('en').t('why_heading')}\n\n{Catalog('en').t('why_text')}\n\n"
                     f"{Catalog('en').t('why_none')}"]
    assert why.profiled(frame([])).empty


def test_the_plot_stacks_each_kind_for_eager_and_compiled():
    rows = why.extreme_batches(why.profiled(frame(profiled_records())))
    figure = plots.work_kinds(rows, Catalog("en"))
    (axis,) = figure.axes
    assert len(axis.patches) == len(WorkKind) * 2 * len(rows)
    widths = [patch.get_width() for patch in axis.patches]
    assert sum(widths) == pytest.approx(len(rows) * (3.1 + 2.1))  # eager 3.1 ms, compiled 2.1 ms per cell
    assert [text.get_text() for text in axis.get_legend().get_texts()][4] == "fused (Inductor)"


def test_the_explorer_shows_the_same_for_the_chosen_slice(tmp_path):
    from bench_utils.report import selection as slices
    from bench_utils.report.explorer import Explorer

    explorer = Explorer([write_study(tmp_path / "study", profiled_records())])
    chosen = slices.resolve(explorer.data, slices.Selection(mode="default"))
    page = explorer.slice_html(chosen)
    assert page.count("data:image/png;base64,") == 2  # the speed-up plot, then the kinds of work
    assert page.count("<li>") == 3 and "161 → 58 kernels" in page and "<table>" in page.split("Why it got faster")[1]
    assert "No cell of these results was profiled" in Explorer([write_study(tmp_path / "old", example_records())]) \
        .slice_html(chosen)


def test_a_study_without_any_record_renders_the_section_too(tmp_path, monkeypatch):
    # an empty results file is refused before any section (one line); a view whose frame is empty still renders
    import pandas as pd
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj: shown.append(obj.data))
    view = ReportView([write_study(tmp_path / "one", example_records()[:1])], "es")
    view.data = pd.DataFrame()
    view.why()
    assert len(shown) == 1 and shown[0].endswith(Catalog("es").t("why_none"))


def test_the_work_fusion_took_over_is_named_most_first_with_the_largest_other_change():
    # Segformer on a CPU: copies and layout changes fused away, and the convolutions changed too
    eager = side(330, 0.94, "operator calls", matmul_conv=132.3, attention=16.0, normalization=6.8,
                 elementwise=5.9, copy_layout=126.5)
    compiled = side(81, 0.99, "operator calls", matmul_conv=86.3, attention=15.9, elementwise=0.1,
                    copy_layout=9.0, fused=37.7)
    assert why.change_text(_side(eager), _side(compiled), Catalog("en")) == (
        "fusion turned 130.10 ms (copies and layout, normalization, and element-wise and reductions) into "
        "37.70 ms of fused kernels; matrix products and convolutions: 132.30 ms → 86.30 ms")
    small = side(20, 0.9, matmul_conv=100.0, elementwise=5.0)
    assert why.change_text(_side(small), _side(side(5, 0.9, matmul_conv=99.0, fused=2.0)), Catalog("en")) == (
        "fusion turned 5.00 ms (element-wise and reductions) into 2.00 ms of fused kernels")  # 1 ms: not said
