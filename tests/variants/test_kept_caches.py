"""Compile caches kept between processes: a replicate's cold compile serves its next replicates warm
(``variants.kept_caches``, ``compilation.ColdThenWarm``)."""

import os
from pathlib import Path
import tempfile

import torch

from bench_utils.settings import Settings
from bench_utils.variants import kept_caches
from bench_utils.variants.compilation import ColdThenWarm
from bench_utils.variants.kept_caches import COLD_FILE, KeptCaches


def test_a_cell_keeps_one_folder_whichever_replicate_and_another_setting_gets_another(tmp_path):
    caches = KeptCaches(tmp_path)
    first = caches.cell("resnet-bs1-default", {"runs": 100, "tf32": "default"})
    assert caches.cell("resnet-bs1-default", {"tf32": "default", "runs": 100}) == first  # key order aside
    assert caches.cell("resnet-bs1-default", {"runs": 100, "tf32": "highest"}).folder != first.folder
    assert caches.cell("resnet-bs4-default", {"runs": 100, "tf32": "default"}).folder != first.folder
    assert first.folder.parent == tmp_path and first.folder.name.startswith("resnet-bs1-default-")


def test_every_replicate_of_a_cell_finds_one_folder_whatever_the_runner_told_its_kernel(tmp_path):
    caches, settings = KeptCaches(tmp_path), Settings(runs=20)
    first = kept_caches.kept_cell(caches, "image-classification", "resnet", 2, "default", settings, "float32", "cuda")
    later = kept_caches.kept_cell(caches, "image-classification", "resnet", 2, "default",
                                  Settings(runs=20, replicate="r3", remeasure_unsteady=True), "float32", "cuda:0")
    assert later.folder == first.folder  # how the runner schedules is no part of what is compiled
    process = first
    other = kept_caches.kept_cell(caches, "image-classification", "resnet", 2, "default",
                                  Settings(runs=20, tf32="strict"), "float32", "cuda")
    assert other.folder != process.folder


def test_a_folder_serves_warm_only_once_its_cold_compile_has_ended(tmp_path):
    cell = KeptCaches(tmp_path).cell("c", {})
    with cell.emptied() as folder:
        (folder / "fxgraph").mkdir()
        assert cell.cold() is None  # compiling: nothing to serve yet
        (folder / (COLD_FILE + ".partial")).write_text("{")  # a kernel killed while writing leaves no cold.json
        assert cell.cold() is None
        cell.keep([812.5, 3.25], {"graphs": 1, "odd": object()}, "replicate r1")
    kept = cell.cold()
    assert kept.calls_ms == [812.5, 3.25] and kept.measured_in == "replicate r1"
    assert kept.stats["graphs"] == 1 and isinstance(kept.stats["odd"], str)  # what JSON cannot hold, as text
    (cell.folder / "leftover").write_text("x")
    with cell.emptied() as folder:  # the next cold compile starts empty: nothing it could hit, no cold.json
        assert list(folder.iterdir()) == [] and cell.cold() is None
    (cell.folder / COLD_FILE).write_text("not json")
    assert cell.cold() is None


def test_a_study_keeps_its_caches_in_the_temporary_folder_one_folder_per_study(tmp_path, monkeypatch):
    monkeypatch.delenv(kept_caches.ROOT_ENV, raising=False)
    one, other = kept_caches.default_root(tmp_path / "a"), kept_caches.default_root(tmp_path / "b" / "a")
    assert one != other and one.name.startswith("a-") and other.name.startswith("a-")
    assert Path(tempfile.gettempdir()) in one.parents
    assert kept_caches.default_root(tmp_path / "a") == one
    # a carried root (a GPU lease's): one folder per study name, whatever path the study has on this host
    monkeypatch.setenv(kept_caches.ROOT_ENV, str(tmp_path / "carried"))
    assert kept_caches.default_root(tmp_path / "a") == tmp_path / "carried" / "a"
    assert kept_caches.default_root(tmp_path / "elsewhere" / "a") == tmp_path / "carried" / "a"


def test_the_next_replicate_compiles_warm_from_the_first_ones_kept_cold_compile(tmp_path):
    # inductor's real caches (a C++ build on this CPU): the first replicate compiles cold into the kept folder, the
    # second, after a dynamo reset and with the in-memory caches cleared (as a new process has them), warm from it
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    inputs = {"input": torch.randn(2, 16)}
    cell = KeptCaches(tmp_path).cell("tiny-bs2-default", {})
    with torch.no_grad():
        first = ColdThenWarm("default", 2, Settings(), torch.device("cpu"), kept=cell)
        cold = first.compile(model, inputs, warm=False)
        assert cold.cold_stats["fx_graph_cache_hits"] == 0 and cold.cold_measured_in is None
        assert cell.cold().calls_ms == cold.cold_calls_ms and os.listdir(cell.folder) != [COLD_FILE]
        second = ColdThenWarm("default", 2, Settings(replicate="r2"), torch.device("cpu"), kept=cell)
        warm = second.compile(model, inputs, warm=False)
        torch.testing.assert_close(warm.forward(), model(**inputs))
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != str(cell.folder)  # in force for the compile only
    assert warm.warm_stats["fx_graph_cache_hits"] >= 1  # read from the first replicate's caches, not compiled anew
    assert warm.cold_calls_ms == cold.cold_calls_ms and warm.cold_stats["graphs"] == cold.cold_stats["graphs"]
    costs = warm.costs(eager_ms=0.1)
    assert costs["cold_measured_in"] == "replicate r1" and "replicate r1's cold compile kept" in costs["cache"]
    assert costs["cold_ms"] > costs["warm_ms"]  # the first replicate's build against a cache read
    assert "cold_measured_in" not in cold.costs(eager_ms=0.1)


CLAIMER = """
import sys, time
from pathlib import Path
from bench_utils.variants.kept_caches import KeptCell
with KeptCell(Path(sys.argv[1])).claimed():
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_cell_being_compiled_elsewhere_is_passed_over_at_once_and_claimed_once_let_go(tmp_path):
    import subprocess
    import sys
    import time

    from bench_utils.variants.kept_caches import all_claimed

    cell = KeptCaches(tmp_path).cell("c", {})
    other = subprocess.Popen([sys.executable, "-c", CLAIMER, str(cell.folder), "2.0"], stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "held"
    started = time.monotonic()
    with all_claimed([cell]) as claimed:  # another kernel compiles it: this one compiles it too, keeping nothing
        assert claimed == [] and time.monotonic() - started < 1.0  # nobody waits
    other.wait(timeout=30)
    assert other.returncode == 0
    with all_claimed([cell]) as claimed:
        assert claimed == [cell]


def test_kept_caches_travel_to_another_host_as_their_cold_file_and_portable_artifacts(tmp_path):
    # a lease brings back cold.json and artifacts.bin only; on the next host the folder has nothing else, and the
    # later replicate still compiles warm: the artifacts are loaded into the folder before its warm compile
    import shutil

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    inputs = {"input": torch.randn(2, 8)}
    here = KeptCaches(tmp_path / "here").cell("tiny-bs2-default", {})
    with torch.no_grad():
        cold = ColdThenWarm("default", 2, Settings(), torch.device("cpu"), kept=here).compile(model, inputs, warm=False)
    assert (here.folder / kept_caches.ARTIFACTS_FILE).stat().st_size > 0 and here.artifacts()
    there = KeptCaches(tmp_path / "there").cell("tiny-bs2-default", {})
    there.folder.mkdir(parents=True)
    for name in (COLD_FILE, kept_caches.ARTIFACTS_FILE):
        shutil.copy(here.folder / name, there.folder / name)
    shutil.rmtree(here.folder)  # nothing of the first host's on-disk caches is left to hit
    with torch.no_grad():
        warm = ColdThenWarm("default", 2, Settings(replicate="r2"), torch.device("cpu"), kept=there).compile(
            model, inputs, warm=False)
        torch.testing.assert_close(warm.forward(), model(**inputs))
    assert warm.warm_stats["fx_graph_cache_hits"] >= 1  # from the carried artifacts, not compiled anew
    assert warm.cold_calls_ms == cold.cold_calls_ms and warm.cold_measured_in == "replicate r1"


def test_a_warm_compile_that_is_not_the_kept_compilation_keeps_its_own_graphs_and_says_so():
    from bench_utils.variants.compile_cost import compile_warm
    from bench_utils.variants.kept_caches import KeptCold

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    kept = KeptCold([900.0], {"graphs": 2, "graph_breaks": 11, "break_reasons": {"a lock": 6}}, "a compile process")
    with torch.no_grad():
        compiled = compile_warm(model, "default", lambda f: (lambda: f(x)), torch.device("cpu"), kept, backend="eager")
    # its own graphs and calls, as a cold compile's, and none of the kept compile's figures
    assert compiled.cold_stats["graphs"] == 1 and compiled.cold_stats["graph_breaks"] == 0
    assert compiled.cold_calls_ms != [900.0] and compiled.warm_calls_ms is None and compiled.cold_measured_in is None
    costs = compiled.costs(eager_ms=0.1)
    assert "compiled anew" in costs["cache"] and "1 graph(s) where that compile made 2" in costs["cache"]
    assert "cold_measured_in" not in costs
    same = KeptCold([900.0], {"graphs": 1, "graph_breaks": 0}, "replicate r1")
    with torch.no_grad():
        again = compile_warm(model, "default", lambda f: (lambda: f(x)), torch.device("cpu"), same, backend="eager")
    assert "compiled anew" not in again.costs(eager_ms=0.1)["cache"] and again.cold_stats == same.stats
    assert again.cold_calls_ms == [900.0] and again.cold_measured_in == "replicate r1"
