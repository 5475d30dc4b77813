"""A compile process: cells compiled cold ahead of their kernel, which compiles them warm (``cell.compile_process``)."""

import json
import subprocess
import sys

from bench_utils.measurement import gpu_token
from bench_utils.measurement.gpu_token import TOKEN_FILE, holdings, overlaps
from bench_utils.paths import PROJECT_ROOT
from bench_utils.settings import Settings
from bench_utils.study.cell import task
from bench_utils.study.compile_job import CompileJob

MEASURED_IN = "a compile process beside the measuring kernel (test)"


def test_the_kernel_compiles_warm_what_a_compile_process_compiled_cold_and_says_who_measured_the_cold(tmp_path):
    # inductor's real caches, on this CPU: the compile process's C++ build is the kernel's cache hit
    kept, settings = tmp_path / "kept", Settings(runs=4, warmup=1, blocks=2, profile=False)
    job = CompileJob(task="image-classification", model="timm:test_resnet", dtype="float32", device="cpu",
                     settings=settings.to_parameters(), cells=[["default", 1]], caches=str(kept),
                     measured_in=MEASURED_IN, token=str(kept / TOKEN_FILE), log=str(tmp_path / "compile.log"))
    kept.mkdir()
    job.write(tmp_path / "job.json")

    def compile_ahead():
        subprocess.run([sys.executable, "-m", "bench_utils.study.cell.compile_process", str(tmp_path / "job.json")],
                       cwd=PROJECT_ROOT, check=True, timeout=600)
        return [json.loads(line) for line in (tmp_path / "compile.log").read_text().splitlines()]

    (line,) = compile_ahead()
    assert line["status"] == "kept" and line["mode"] == "default" and line["cold_calls_ms"][0] > 0
    try:
        records = task.run(study="t", task="image-classification", models=["timm:test_resnet"], batch_sizes=[1],
                           compile_modes=["eager", "default"], results_path=tmp_path / "results.jsonl",
                           settings=settings, keep_compiles=True, compile_ahead=True, compile_caches=kept)
    finally:
        gpu_token.use(None, gpu_token.MEASURING)  # the next test's cells in this process hold no token
    (compiled,) = [record for record in records if record["cell"]["compile_mode"] == "default"]
    assert compiled["status"] == "ok"
    block = compiled["compile"]
    assert block["cold_measured_in"] == MEASURED_IN and block["cold_calls_ms"] == line["cold_calls_ms"]
    assert block["warm_fx_graph_cache_hits"] >= 1 and block["graphs"] >= 1  # read back, not compiled anew
    assert block["cold_ms"] > block["warm_ms"]
    # the token: the compile process's GPU phases and the kernel's measuring windows, none inside another
    entries = holdings(kept / (TOKEN_FILE + ".log"))
    phases = {entry["what"] for entry in entries if entry["role"] == "compiling"}
    windows = {entry["what"] for entry in entries if entry["role"] == "measuring"}
    assert {"model load", "compiled code run"} <= phases and {"timed runs", "memory probe"} <= windows
    assert overlaps(entries) == []
    # a second pass finds it kept, and compiles nothing
    assert [entry["status"] for entry in compile_ahead()] == ["kept", "skipped"]
