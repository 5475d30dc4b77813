"""A compile process: cells compiled cold ahead of their kernel, which compiles them warm (``cell.compile_process``)."""

import json
import subprocess
import sys

import pytest

from bench_utils.measurement import gpu_token
from bench_utils.measurement.gpu_token import TOKEN_FILE, holdings, overlaps
from bench_utils.paths import PROJECT_ROOT
from bench_utils.settings import Settings
from bench_utils.study.cell import task
from bench_utils.study.compile_job import CompileJob

MEASURED_IN = "a compile process beside the measuring kernel (test)"


def hand_over(tmp_path, device, mode):
    """A compile process compiles ``mode`` of a tiny ResNet cold on ``device``, then a kernel measures it: the kernel's
    compiled record, the compile process's line, and the token's log."""
    kept, settings = tmp_path / "kept", Settings(runs=4, warmup=1, blocks=2, profile=False)
    job = CompileJob(task="image-classification", model="timm:test_resnet", dtype="float32", device=device,
                     settings=settings.to_parameters(), cells=[[mode, 1]], caches=str(kept),
                     measured_in=MEASURED_IN, token=str(kept / TOKEN_FILE), log=str(tmp_path / "compile.log"))
    kept.mkdir()
    job.write(tmp_path / "job.json")
    (line,) = compile_ahead(tmp_path)
    assert line["status"] == "kept" and line["mode"] == mode and line["cold_calls_ms"][0] > 0
    try:
        records = task.run(study="t", task="image-classification", models=["timm:test_resnet"], batch_sizes=[1],
                           compile_modes=["eager", mode], device=device, results_path=tmp_path / "results.jsonl",
                           settings=settings, keep_compiles=True, compile_ahead=True, compile_caches=kept)
    finally:
        gpu_token.use(None, gpu_token.MEASURING)  # the next test's cells in this process hold no token
    (compiled,) = [record for record in records if record["cell"]["compile_mode"] == mode]
    assert compiled["status"] == "ok", compiled.get("error")
    assert compiled["config"]["beside_compiles"] == "compiling"  # not told to pause them: it timed beside them
    block = compiled["compile"]
    assert block["cold_measured_in"] == MEASURED_IN and block["cold_calls_ms"] == line["cold_calls_ms"]
    assert block["warm_fx_graph_cache_hits"] >= 1 and block["graphs"] >= 1  # read back, not compiled anew
    assert "another compilation" not in block["cache"] and block["cold_ms"] > block["warm_ms"]
    entries = holdings(kept / (TOKEN_FILE + ".log"))
    assert overlaps(entries) == []  # no compile phase inside a measuring window
    return compiled, line, entries


def compile_ahead(tmp_path):
    subprocess.run([sys.executable, "-m", "bench_utils.study.cell.compile_process", str(tmp_path / "job.json")],
                   cwd=PROJECT_ROOT, check=True, timeout=600)
    return [json.loads(line) for line in (tmp_path / "compile.log").read_text().splitlines()]


def test_the_kernel_compiles_warm_what_a_compile_process_compiled_cold_and_says_who_measured_the_cold(tmp_path):
    # inductor's real caches, on this CPU: the compile process's C++ build is the kernel's cache hit
    _, _, entries = hand_over(tmp_path, "cpu", "default")
    phases = {entry["what"] for entry in entries if entry["role"] == "compiling"}
    windows = {entry["what"] for entry in entries if entry["role"] == "measuring"}
    assert {"compiler warm-up", "model placement", "compiling calls"} <= phases
    assert {"timed runs", "memory probe", "compiling call"} <= windows
    # the compile process let the token go while dynamo compiled: its compiling calls' holding is cut in two
    assert sum(entry["what"] == "compiling calls" for entry in entries if entry["role"] == "compiling") >= 2
    # and while dynamo compiled its warm-up's tiny model (the first pipelined H200 lease: held through all of it)
    assert sum(entry["what"] == "compiler warm-up" for entry in entries if entry["role"] == "compiling") >= 2
    # a second pass finds it kept, and compiles nothing
    assert [entry["status"] for entry in compile_ahead(tmp_path)] == ["kept", "skipped"]


@pytest.mark.cuda
def test_on_a_gpu_a_cuda_graph_mode_compiled_ahead_is_warm_in_the_kernel_and_records_no_graph_again(tmp_path):
    # the compile process records its CUDA graph (inside the token, in its compiled code's run); the kernel's warm
    # compile records its own, before its timed runs, which forbid recording
    compiled, _, entries = hand_over(tmp_path, "cuda", "reduce-overhead")
    assert compiled["compile"]["cuda_graphs"] is True and compiled["compile"]["recompiles"] == 0
    assert any(entry["what"] == "compiling calls" for entry in entries if entry["role"] == "compiling")
