import pytest

from bench_utils.report import explorer as explorer_module
from bench_utils.report.explorer import Explorer

from explore_data import EXAMPLE, remeasured, write_study


class Handle:
    def __init__(self, shown):
        self.shown = shown

    def update(self, obj):
        self.shown.append(("update", obj))


@pytest.fixture
def shown(monkeypatch):
    """What the explorer displays, in order; display ids give a handle whose updates are kept."""
    outputs = []

    def display(obj, display_id=None):
        outputs.append(("display", obj))
        return Handle(outputs) if display_id else None

    monkeypatch.setattr(explorer_module, "display", display)
    return outputs


def html_of(output):
    return output[1].data


@pytest.fixture
def two_studies(tmp_path):
    return [EXAMPLE, write_study(tmp_path / "later", remeasured({"segformer": 1.2}))]


def test_a_slice_shows_latency_speedup_plot_compile_cost_and_memory(shown):
    Explorer([str(EXAMPLE)]).show(controls=False)
    assert len(shown) == 1
    page = html_of(shown[0])
    for part in ("batch 1, default vs eager, float32", "Latency (ms) and speed-up", "Segformer",
                 "data:image/png;base64,", "Compile cost", "Peak memory"):
        assert part in page


def test_the_summary_counts_cells_and_names_their_sources(shown):
    Explorer("notebooks/examples/cpu-quick.jsonl").summary()  # a string, as papermill's -p gives it
    page = html_of(shown[0])
    assert "6 cells from examples/cpu-quick.jsonl" in page and "Geometric-mean speed-up" in page


def test_a_slice_the_results_do_not_hold_is_refused(shown):
    with pytest.raises(ValueError, match="batch_size 16 is not in the results"):
        Explorer([EXAMPLE]).show(batch_size=16)
    assert not shown


def test_the_controls_redraw_the_slice_in_place(shown, two_studies):
    explore = Explorer(two_studies)
    explore.show()
    first, controls = shown[0], shown[1][1]
    environment = controls.children[0]
    assert len(environment.options) == 2 and "torch" in environment.value
    environment.value = environment.options[1]  # what a reader's click does in JupyterLab
    updates = [html_of(output) for output in shown if output[0] == "update"]
    assert len(updates) == 1 and environment.options[1] in updates[0] and environment.options[1] not in html_of(first)


def test_two_environments_are_compared_and_the_tolerance_control_redraws(shown, two_studies):
    Explorer(two_studies).compare()
    page = html_of(shown[0])
    assert "1 slower (red)" in page and "#f8d7da" in page
    tolerance = shown[1][1].children[2]
    tolerance.value = 0.5  # a drop of a third is now within the tolerance
    assert "0 slower" in html_of(shown[-1]) and shown[-1][0] == "update"


def test_one_environment_says_there_is_nothing_to_compare(shown):
    Explorer([EXAMPLE]).compare()
    assert "One environment only" in html_of(shown[0])
    assert len(shown) == 2 and shown[1][1].layout.display == "none"  # its controls would lead nowhere: hidden


def test_an_environment_with_other_batch_sizes_offers_its_own(shown, tmp_path):
    later = remeasured({})
    for record in later:
        record["cell"]["batch_size"] = 4
    explore = Explorer([EXAMPLE, write_study(tmp_path / "later", later)])
    explore.show()
    environment, batch = shown[1][1].children[:2]
    assert batch.options == (1,)
    environment.value = environment.options[1]
    assert batch.options == (4,) and batch.value == 4
    updates = [html_of(output) for output in shown if output[0] == "update"]
    assert len(updates) == 1 and "batch 4, default vs eager" in updates[0]  # redrawn once, not per field


def test_comparing_with_one_environment_given_by_name_is_refused(shown):
    explore = Explorer([EXAMPLE])
    with pytest.raises(ValueError, match="one environment only"):
        explore.compare(baseline=explore.data["environment"].iloc[0])


def test_the_summary_counts_the_lines_it_skipped_and_they_are_listed(shown, tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    text = EXAMPLE.read_text(encoding="utf-8")
    (study / "results.jsonl").write_text(text + "not json\n", encoding="utf-8-sig")
    explorer = Explorer([study])
    explorer.summary()
    assert f"{study / 'results.jsonl'}:{len(text.splitlines()) + 1}: skipped: not valid JSON" in capsys.readouterr().err
    assert "6 cells from" in html_of(shown[0])  # the first record, behind the mark, too
    assert "Lines of study/results.jsonl skipped as unreadable: 1" in html_of(shown[0])
    assert "skipped" not in Explorer([EXAMPLE]).summary_html()


def test_a_records_markup_is_text_in_every_view(shown, tmp_path):
    from hostile_records import all_poisoned, assert_no_element_of_a_record, dom, payload
    from explore_data import example_records

    study = write_study(tmp_path / "hostile", [all_poisoned(record) for record in example_records()])
    explorer = Explorer([str(study)])
    explorer.summary()
    explorer.show(controls=False)
    for output in shown:
        elements, text = dom(html_of(output))
        assert_no_element_of_a_record(elements, "explorer")
    assert any(payload("environment.cpu_model") in dom(html_of(output))[1] for output in shown)


RAW_NAMES = ("eager_ms", "ci_low", "ci_high", "compiled_status", "eager_cell_ms", "eager_drift", "cold_compile_s",
             "measured_by", "batch_sizes", "compiled_p99_ms", "memory_ratio", "break_even_calls")


def test_every_table_has_the_reports_readable_headers_in_the_notebooks_language(shown, two_studies):
    import re

    for language, words in (("en", ("Latency (ms) and speed-up", "Eager beside default (ms)", "95 % CI",
                                    "Accuracy gate", "Compile, cold (s)", "Measured by", "Batch sizes",
                                    "Speed-up, candidate (95 % CI)", "slower: speed-up 34% lower", "Cells ok")),
                            ("es", ("Latencia (ms) y aceleración", "Tamaños de lote", "Medido con", "Veredicto",
                                    "más lenta: aceleración un 34% menor", "frente a"))):
        shown.clear()
        explorer = Explorer(two_studies, language=language)
        explorer.summary()
        explorer.show(controls=False)
        explorer.compare(controls=False)
        page = "".join(html_of(output) for output in shown)
        assert all(word in page for word in words), [word for word in words if word not in page]
        assert not [name for name in RAW_NAMES if f">{name}<" in page]  # no field name as a header
        headers = re.findall(r"<th[^>]*>(.*?)</th>", page, flags=re.S)
        assert headers and not [h for h in headers if re.fullmatch(r"\s*[a-z0-9]+(_[a-z0-9]+)+\s*", h)]


def test_two_records_of_one_row_are_said_once_in_the_summary_and_warn_nothing(shown, tmp_path):
    import warnings

    from bench_utils.report.frame import DuplicateCellWarning
    from explore_data import example_records

    first, again = example_records(), example_records()
    for record in first + again:  # one row a channels-last variant: named as its row is, not as the plain one
        if (record["cell"]["model"], record["cell"]["batch_size"]) == ("segformer", 1):
            record["cell"]["memory_format"] = "channels_last"
    for record in again:  # the same cells, same torch, measured with other settings: they claim the same rows
        record["config"]["runs"] = record["config"]["runs"] + 1
        record["environment"]["timestamp_utc"] = "2026-12-01T00:00:00+00:00"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateCellWarning)  # none reaches the notebook's stderr
        explorer = Explorer([write_study(tmp_path / "first", first), write_study(tmp_path / "again", again)])
    explorer.summary()
    page = html_of(shown[0])
    assert page.count("are claimed by two records") == 1 and "ResNet, batch 1, default, float32 (CPU" in page
    assert "Segformer (channels_last), batch 1, default, float32 (CPU" in page
    assert len(explorer.duplicates) == len(again)


def test_the_study_picker_offers_every_study_and_a_pick_redraws_every_view(shown, tmp_path, monkeypatch):
    from bench_utils.report import study_choices

    root = tmp_path / "project"
    first = write_study(root / "reports" / "first", [*__import__("explore_data").example_records()])
    write_study(root / "reports" / "second", remeasured({"segformer": 1.2}))
    write_study(root / "reports" / "_scratch", remeasured({}))  # a scratch folder: not a study to offer
    monkeypatch.setattr(study_choices, "PROJECT_ROOT", root)  # the project the picker looks in
    monkeypatch.setattr("bench_utils.report.frame.PROJECT_ROOT", root)  # where the notebook's paths start
    explorer = Explorer([first])
    explorer.summary(controls=True)
    explorer.show()
    explorer.compare()
    picker = shown[0][1].children[0]
    assert shown[3][1].children[0].disabled  # one environment: shown, not offered as a choice
    assert [value for _, value in picker.options] == ["reports/first", "reports/second"]
    assert picker.value == ("reports/first",)
    compare_controls = shown[-1][1]
    assert compare_controls.layout.display == "none"  # one environment: nothing to compare yet
    picker.value = ("reports/first", "reports/second")  # a reader's pick of both
    updates = [html_of(output) for output in shown if output[0] == "update"]
    assert len(updates) == 3  # the summary, the slice and the comparison, once each
    assert "12 cells from first, second" in updates[0]
    assert "1 slower (red)" in updates[2] and compare_controls.layout.display is None
    environment = shown[3][1].children[0]  # the slice's controls offer the new environment
    assert len(environment.options) == 2 and not environment.disabled
    picker.value = ()
    assert "No study picked" in shown[0][1].children[1].value and len(
        [output for output in shown if output[0] == "update"]) == 3


def test_the_notebooks_example_lets_every_slice_control_be_tried():
    from bench_utils.paths import PROJECT_ROOT
    from bench_utils.report import selection

    example = Explorer([PROJECT_ROOT / "notebooks" / "examples" / "explore-example.jsonl"])
    offered = selection.options(example.data)
    assert all(len(offered[field]) >= 2 for field in ("batch_size", "mode", "dtype")), offered
    for batch in offered["batch_size"]:  # and every value of each stays a choice whatever the others are
        at_batch = selection.options(example.data, selection.Selection(batch_size=batch))
        assert len(at_batch["mode"]) >= 2 and len(at_batch["dtype"]) >= 2
    assert offered["dtype"][0] == "float32"  # the guide's dtype first
