import json
import subprocess
import sys

import nbformat
import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.results_file import read_records
from bench_utils.parameters import positive_int_list, text_list


@pytest.mark.parametrize("given, wanted", [
    ("vit", ["vit"]), ("vit, resnet", ["vit", "resnet"]), (["vit"], ["vit"]), (("a", "b"), ["a", "b"]),
    ("timm:resnet18", ["timm:resnet18"]), (None, [])])
def test_a_list_parameter_takes_a_list_or_a_plain_string(given, wanted):
    assert text_list("models", given) == wanted


@pytest.mark.parametrize("given, wanted", [(4, [4]), ("1,4,16", [1, 4, 16]), ([1, "4"], [1, 4]), ("16", [16])])
def test_batch_sizes_take_numbers_however_given(given, wanted):
    assert positive_int_list("batch_sizes", given) == wanted


@pytest.mark.parametrize("given", ["1,,4", "0", "1,x", [True], "-1", 2.5])
def test_bad_lists_are_refused_naming_the_parameter(given):
    with pytest.raises(ValueError, match="batch_sizes"):
        positive_int_list("batch_sizes", given)


def test_papermills_command_line_strings_are_one_item_or_comma_separated(tmp_path):
    results = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "papermill", "notebooks/classification.ipynb", str(tmp_path / "out.ipynb"),
               "-k", "bench-utils", "-p", "models", "timm:test_resnet", "-p", "batch_sizes", "1,2",
               "-p", "compile_modes", "eager", "-p", "runs", "2", "-p", "warmup", "1",
               "-p", "show", "False", "-p", "results_path", str(results)]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = read_records(results)
    assert [(r.cell.model, r.cell.batch_size, r.status) for r in records] == [
        ("timm:test_resnet", 1, "ok"), ("timm:test_resnet", 2, "ok")]
    # run by a person (no grid runner): tqdm's notebook bar over the two cells, a widget
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    outputs = json.dumps([cell.outputs for cell in executed.cells if cell.cell_type == "code"])
    assert "application/vnd.jupyter.widget-view+json" in outputs
    widgets = executed.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    bars = [w["state"] for w in widgets if w["model_name"] == "FloatProgressModel"]
    assert [(bar["value"], bar["max"], bar["bar_style"]) for bar in bars] == [(2, 2, "success")]


def test_one_of_takes_a_valid_name_and_offers_the_closest_for_a_wrong_one():
    from bench_utils.parameters import one_of

    assert one_of("colour", "red", ("red", "green")) == "red"
    with pytest.raises(ValueError, match=r"unknown colour 'gren'\. Did you mean 'green'\? Valid: red, green"):
        one_of("colour", "gren", ("red", "green"))
    with pytest.raises(ValueError, match=r"unknown colour 'blue'\. Valid: red, green"):
        one_of("colour", "blue", ("red", "green"))
