import pandas as pd
import pytest

from bench_utils.report import selection
from bench_utils.report.frame import frame, latest_records
from bench_utils.report.selection import Selection

from explore_data import EXAMPLE, remeasured, write_study


@pytest.fixture(scope="module")
def data():
    return frame(latest_records([EXAMPLE]))


def test_an_empty_selection_takes_the_first_value_of_each_field(data):
    chosen = selection.resolve(data, Selection())
    assert chosen == Selection(data["environment"].iloc[0], 1, "default", "float32")


def test_a_value_the_results_do_not_hold_is_an_error_naming_those_they_do(data):
    with pytest.raises(ValueError, match=r"batch_size 16 is not in the results; they hold: 1"):
        selection.resolve(data, Selection(batch_size=16))
    with pytest.raises(ValueError, match="mode 'max-autotune'.*default"):
        selection.resolve(data, Selection(mode="max-autotune"))
    with pytest.raises(ValueError, match="no records"):
        selection.resolve(data.iloc[0:0], Selection())


def test_a_batch_size_given_as_text_is_taken(data):  # papermill -p batch_size "1" from a YAML file
    assert selection.resolve(data, Selection(batch_size="1")).batch_size == 1


def test_the_latency_table_shows_the_eager_and_compiled_means_the_speedup_was_measured_from(data):
    table = selection.latency_table(data, selection.resolve(data, Selection()))
    assert list(table["model"]) == ["ResNet", "Segformer", "DETR"]  # classification, segmentation, detection
    for row in table.itertuples():
        cells = data[data["label"] == row.model].set_index("mode")
        assert row.eager_ms == cells.loc["default", "eager_interleaved_ms"]  # the same pairs as the speed-up
        assert row.compiled_ms == cells.loc["default", "mean_ms"]
        assert row.eager_cell_ms == cells.loc["eager", "mean_ms"]
        assert row.ci_low < row.speedup < row.ci_high


def test_eager_of_another_run_of_pairs_is_kept_apart_and_flagged_when_it_drifts(data):
    # a second compiled mode, whose pairs timed eager 30 % slower than the eager cell's record says
    other = data[data["mode"] == "default"].assign(mode="max-autotune")
    other["eager_interleaved_ms"] = other["eager_interleaved_ms"] * 1.3
    both = pd.concat([data, other], ignore_index=True)
    table = selection.latency_table(both, selection.resolve(both, Selection(mode="max-autotune")))
    assert (table["eager_ms"] > 1.25 * table["eager_cell_ms"]).all() and table["eager_drift"].all()
    same = selection.latency_table(both, selection.resolve(both, Selection(mode="default")))
    assert not same["eager_drift"].any()


def test_a_model_with_no_compiled_cell_keeps_its_row_with_nothing_made_up(data):
    without = data[~((data["label"] == "DETR") & (data["mode"] == "default"))]
    table = selection.latency_table(without, selection.resolve(without, Selection())).set_index("model")
    assert table.loc["DETR", "eager_cell_status"] == "ok" and table["speedup"].isna()["DETR"]
    assert pd.isna(table.loc["DETR", "eager_ms"]) and pd.isna(table.loc["DETR", "eager_drift"])


def test_compile_and_memory_tables(data):
    chosen = selection.resolve(data, Selection())
    cost = selection.compile_table(data, chosen).set_index("model")
    assert (cost["cold_compile_s"] > cost["warm_compile_s"]).all()
    memory = selection.memory_table(data, chosen).set_index("model")
    segformer = data[(data["label"] == "Segformer") & (data["mode"] == "default")].iloc[0]
    assert memory.loc["Segformer", "memory_ratio"] == pytest.approx(segformer["peak_bytes"] / segformer["eager_peak_bytes"])


def test_options_and_summary_follow_each_environment(tmp_path, data):
    second = write_study(tmp_path / "b", remeasured({"resnet": 1.0}))
    merged = frame(latest_records([EXAMPLE, second]))
    environments = selection.options(merged)["environment"]
    assert len(environments) == 2 and any("torch 2.99.0" in e for e in environments)
    summary = selection.summary_table(merged).set_index("environment")
    assert list(summary["cells"]) == [6, 6] and list(summary["ok"]) == [6, 6]
    assert set(summary["modes"]) == {"eager, default"} and set(summary["weights"]) == {"random"}


def test_each_control_offers_only_what_draws_something_given_the_fields_before_it(data):
    # as on the H200: reduce-overhead measured at batch 1 only, bfloat16 at batch 4 only, eager alone at batch 8
    compiled = data[data["mode"] == "default"]
    rows = [data, compiled.assign(mode="reduce-overhead"), compiled.assign(batch_size=4, dtype="bfloat16"),
            data[data["mode"] == "eager"].assign(batch_size=8)]
    grid = pd.concat(rows, ignore_index=True)
    assert selection.options(grid)["batch_size"] == [1, 4]  # batch 8 has no compiled cell: nothing to compare
    assert selection.options(grid, Selection(batch_size=1))["mode"] == ["default", "reduce-overhead"]
    at_4 = selection.options(grid, Selection(batch_size=4))
    assert at_4["mode"] == ["default"] and at_4["dtype"] == ["bfloat16"]
    assert selection.options(grid, Selection(batch_size="4", mode="default"))["dtype"] == ["bfloat16"]
    with pytest.raises(ValueError, match="mode 'reduce-overhead' is not in the results; they hold: default"):
        selection.resolve(grid, Selection(batch_size=4, mode="reduce-overhead"))
    for batch in (1, 4):  # every combination offered draws a compiled row
        for mode in selection.options(grid, Selection(batch_size=batch))["mode"]:
            for dtype in selection.options(grid, Selection(batch_size=batch, mode=mode))["dtype"]:
                compiled_rows, _ = selection.cells(grid, selection.resolve(grid, Selection(None, batch, mode, dtype)))
                assert not compiled_rows.empty
