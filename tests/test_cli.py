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
