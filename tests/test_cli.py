import json
import os
import subprocess
import sys

import torch

from bench_utils.cli import main

FAST = ["--size", "64", "--runs", "20", "--rounds", "2", "--min-run-time", "0.2"]


def run_module(*args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "bench_utils", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_env_prints_a_table_and_json():
    table = run_module("env")
    assert table.returncode == 0
    assert "torch_version" in table.stdout and torch.__version__ in table.stdout
    data = json.loads(run_module("env", "--json").stdout)
    assert data["torch_version"] == torch.__version__


def test_validate_timer_prints_both_medians_ratio_and_overhead(capsys, tmp_path):
    out = tmp_path / "check" / "timer.json"
    assert main(["validate-timer", "--device", "cpu", *FAST, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "measure median" in text and "torch Timer median" in text
    assert "ratio measure/Timer" in text and "no-op overhead" in text
    saved = json.loads(out.read_text())
    assert saved["device"] == "cpu" and saved["runs"] == 20


def test_bad_device_is_one_clear_line_and_exit_2():
    result = run_module("validate-timer", "--device", "tpu", *FAST)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error:") and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_arguments_exit_2():
    result = run_module("validate-timer", "--runs", "0")
    assert result.returncode == 2 and "must be >= 1" in result.stderr
    assert run_module("no-such-command").returncode == 2


def test_models_lists_all_twelve_with_parameter_counts():
    result = run_module("models")
    assert result.returncode == 0
    for key, millions in (("vit", "86.57M"), ("convnext", "197.77M"), ("detr", "41.52M"),
                          ("owlvit", "153.23M"), ("conditional-detr", "43.42M")):
        line = next(line for line in result.stdout.splitlines() if line.startswith(key + " "))
        assert millions in line
    rows = json.loads(run_module("models", "--json").stdout)
    assert len(rows) == 12


def test_cell_runs_and_appends_a_record(tmp_path):
    results = tmp_path / "results.jsonl"
    result = run_module("cell", "mobilenet", "--mode", "eager", "--runs", "3", "--warmup", "1",
                        "--results", str(results))
    assert result.returncode == 0, result.stderr
    assert "latency   mean" in result.stdout
    record = json.loads(results.read_text())
    assert record["cell"]["model"] == "mobilenet" and record["latency"]["count"] == 3
    assert record["config"]["weights"] == "random" and record["config"]["tf32"] is False


def test_cell_bad_input_is_one_line():
    for args, message in ((["cell", "vitt"], "Did you mean 'vit'"),
                          (["cell", "vit", "--mode", "fast"], "unknown compile mode"),
                          (["cell", "vit", "--dtype", "fp8"], "unknown dtype")):
        result = run_module(*args)
        assert result.returncode == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
