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
    assert "1 regressions (red)" in page and "#f8d7da" in page
    tolerance = shown[1][1].children[2]
    tolerance.value = 0.5  # a drop of a third is now within the tolerance
    assert "0 regressions" in html_of(shown[-1]) and shown[-1][0] == "update"


def test_one_environment_says_there_is_nothing_to_compare(shown):
    Explorer([EXAMPLE]).compare()
    assert "One environment only" in html_of(shown[0]) and len(shown) == 1


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
