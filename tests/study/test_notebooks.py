import ast
import json
from pathlib import Path
import subprocess
import sys

import nbformat
import papermill
import pytest

from bench_utils.settings import Settings

NOTEBOOKS = ["classification", "segmentation", "detection"]
EXPECTED = ["study", "models", "batch_sizes", "compile_modes", "dtypes", "device", "settings", "results_path",
            "only_cells", "show", "progress_file", "runner_pid", "run_id", "keep_compiles"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stripped_and_parameterized(name):
    nb = nbformat.read(f"notebooks/{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code)
    tagged = [cell for cell in nb.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert nb.metadata.kernelspec.name == "bench-utils"
    documented = papermill.inspect_notebook(f"notebooks/{name}.ipynb")
    assert list(documented) == EXPECTED
    assert all(documented[p]["help"] and documented[p]["inferred_type_name"] != "None" for p in EXPECTED)
    settings = Settings.from_parameters(ast.literal_eval(documented["settings"]["default"]))  # valid settings
    assert settings.runs in (300, 100, 20)


def test_report_notebook_is_stripped_and_parameterized():
    nb = nbformat.read("notebooks/report.ipynb", as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert not [c for c in nb.cells if c.cell_type == "markdown"]  # the report shows outputs only
    assert list(papermill.inspect_notebook("notebooks/report.ipynb")) == ["results_paths", "locale",
                                                                          "reference_csv", "coverage"]


def test_notebooks_match_their_generator(tmp_path):
    committed = {name: Path(f"notebooks/{name}.ipynb").read_text() for name in NOTEBOOKS + ["report", "explore"]}
    subprocess.run([sys.executable, str(Path("notebooks/build_notebooks.py").resolve())],
                   cwd=tmp_path, check=True, env={"PYTHONPATH": ""} | dict(__import__("os").environ))
    for name in NOTEBOOKS + ["report", "explore"]:
        assert json.loads((tmp_path / "notebooks" / f"{name}.ipynb").read_text()) == \
            json.loads(committed[name]), f"notebooks/{name}.ipynb differs from build_notebooks.py"


def test_the_report_notebooks_run_all_works_on_a_fresh_clone(tmp_path):
    # its default is the checked-in example, read from notebooks/ as JupyterLab runs it
    example = Path("notebooks/examples/cpu-quick.jsonl")
    assert example.is_file() and subprocess.run(["git", "ls-files", "--error-unmatch", str(example)],
                                                capture_output=True).returncode == 0
    out = tmp_path / "report.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", "notebooks/report.ipynb", str(out), "-k", "bench-utils",
                           "--cwd", "notebooks"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    executed = nbformat.read(out, as_version=4)
    shown = json.dumps([cell.outputs for cell in executed.cells if cell.cell_type == "code"])
    assert "torch.compile" in shown and "Traceback" not in shown and "image/png" in shown


def test_the_explore_notebook_is_stripped_and_documented():
    nb = nbformat.read("notebooks/explore.ipynb", as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert nb.cells[0].source.startswith("# Explore torch.compile study results")
    documented = papermill.inspect_notebook("notebooks/explore.ipynb")
    assert list(documented) == ["results_paths", "environment", "batch_size", "compile_mode", "dtype",
                                "baseline", "candidate", "tolerance", "language", "controls"]
    assert all(parameter["help"] for parameter in documented.values())


def executed_outputs(out: Path) -> str:
    executed = nbformat.read(out, as_version=4)
    return json.dumps([cell.outputs for cell in executed.cells if cell.cell_type == "code"])


def test_the_explore_notebooks_run_all_works_on_the_example(tmp_path):
    out = tmp_path / "explore.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", "notebooks/explore.ipynb", str(out), "-k", "bench-utils",
                           "--cwd", "notebooks"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = executed_outputs(out)
    assert "Latency (ms) and speed-up" in shown and "data:image/png;base64," in shown
    assert "One environment only" in shown and "Traceback" not in shown


def test_the_explore_notebook_compares_two_study_folders_from_papermills_command_line(tmp_path):
    sys.path.insert(0, str(Path("tests").resolve()))
    from explore_data import example_records, remeasured, write_study

    first = write_study(tmp_path / "first", example_records())
    second = write_study(tmp_path / "second", remeasured({"segformer": 1.2}))
    out = tmp_path / "explore.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", "notebooks/explore.ipynb", str(out), "-k", "bench-utils",
                           "-p", "results_paths", f"{first},{second}", "-p", "batch_size", "1",
                           "-p", "compile_mode", "default", "-p", "controls", "False"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = executed_outputs(out)
    assert "12 cells from first, second" in shown and "torch 2.99.0" in shown
    assert "1 slower (red)" in shown and "slower: speed-up 34% lower" in shown
    assert "application/vnd.jupyter.widget-view+json" not in shown and "Traceback" not in shown


@pytest.mark.parametrize("name", NOTEBOOKS + ["report", "explore"])
def test_papermills_help_notebook_explains_every_parameter(name):
    done = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", f"notebooks/{name}.ipynb"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for parameter, described in papermill.inspect_notebook(f"notebooks/{name}.ipynb").items():
        assert f"{parameter}: " in done.stdout and described["help"] in " ".join(done.stdout.split())
