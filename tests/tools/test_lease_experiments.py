"""tools/lease_experiments.py: the cores it gives each process, and what it reads from the timed blocks."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lease_experiments", ROOT / "tools" / "lease_experiments.py")
lease_experiments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lease_experiments)


def test_cores_are_parsed_and_split_between_the_timing_process_and_three_compilers():
    assert lease_experiments.parse_cores("0-3,8") == [0, 1, 2, 3, 8]
    groups = lease_experiments.core_groups(list(range(16)))
    assert groups["probe"] == [0, 1, 2, 3]
    assert [groups[f"compiler{i}"] for i in range(3)] == [[4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    # two cores (this machine): the timing process keeps one to itself
    small = lease_experiments.core_groups([0, 1])
    assert small["probe"] == [0] and all(small[f"compiler{i}"] == [1] for i in range(3))


def test_block_means_and_the_summary_of_a_probe_line(tmp_path, capsys):
    assert lease_experiments.block_means([1.0] * 10 + [2.0] * 10, 2) == [1.0, 2.0]
    # the compiled side changes level at its 6th block of 10 (eager steady): as the report flags it
    times = [1.0] * 10 + [1.0 + 0.01 * (i % 3) for i in range(40)] + [1.6] * 50
    segment = {"state": "alone", "order": "bcbcbcbcbc", "eager_ms": [2.0] * 100, "compiled_ms": times,
               "eager_mean_ms": 2.0, "compiled_mean_ms": 1.5, "speedup": 1.4, "speedup_ci95": [1.0, 2.0],
               "median_speedup": 1.5, "probes": {"baseline": [
                   {"stat": {"total": 100, "idle": 90, "steal": 0}, "sm_clock_mhz": 1980},
                   {"stat": {"total": 200, "idle": 140, "steal": 10}, "sm_clock_mhz": 1980}]}}
    line = {"condition": "warm", "model": "resnet", "segments": [segment], "compile": {"wall_s": 2.0}}
    path = tmp_path / "regime.jsonl"
    path.write_text(json.dumps(line) + "\n")
    lease_experiments.main(["summarize", str(path)])
    out = capsys.readouterr().out
    assert "warm" in out and "x1.400 (1.000-2.000)" in out
    assert "host busy 0.5 steal 0.1 sm [1980]" in out  # 50 of 100 jiffies busy, 10 stolen
    assert "eager steady; compiled two levels x1.59 apart, 5 of 10 blocks slow, the first change at block 6" in out


def test_a_regime_plan_names_known_conditions_only(tmp_path):
    with pytest.raises(SystemExit, match="unknown regime condition"):
        lease_experiments.main(["run", "--device", "cpu", "--out", str(tmp_path / "out"), "--deadline-s", "1",
                                "--regime-plan", "warm,sleepy"])
