import json
from pathlib import Path
import subprocess
import sys

import nbformat
import papermill
import pytest

NOTEBOOKS = ["classification", "segmentation", "detection"]
EXPECTED = ["study", "models", "batch_sizes", "compile_modes", "dtypes", "device", "runs", "warmup",
            "blocks", "weights", "seed", "tf32", "backend", "fullgraph", "dynamic", "results_path",
            "only_cells", "show", "progress_file", "runner_pid", "run_id"]


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
    assert all(documented[p]["help"] and documented[p]["inferred_type_name"] != "None"
               for p in EXPECTED if p != "dynamic")
    assert documented["runs"]["default"] in ("300", "100", "20")


def test_report_notebook_is_stripped_and_parameterized():
    nb = nbformat.read("notebooks/report.ipynb", as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert not [c for c in nb.cells if c.cell_type == "markdown"]  # the report shows outputs only
    assert list(papermill.inspect_notebook("notebooks/report.ipynb")) == ["results_paths", "locale",
                                                                          "reference_csv"]


def test_notebooks_match_their_generator(tmp_path):
    committed = {name: Path(f"notebooks/{name}.ipynb").read_text() for name in NOTEBOOKS + ["report"]}
    subprocess.run([sys.executable, str(Path("notebooks/build_notebooks.py").resolve())],
                   cwd=tmp_path, check=True, env={"PYTHONPATH": ""} | dict(__import__("os").environ))
    for name in NOTEBOOKS + ["report"]:
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
