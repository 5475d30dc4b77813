"""One user-error type: what the user asked is one line and exit 2; any other exception is a bug, said so."""

import os
import signal

import pytest

from bench_utils import cli
from bench_utils.errors import UserError


def run_main(capsys, *args):
    """``python -m bench_utils ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        status = cli.main(list(args))
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_user_facing_errors_are_user_errors_and_still_value_errors():
    from bench_utils.cluster.connect import ClusterUnreachable
    from bench_utils.records.results_file import NoRecordsError
    from bench_utils.reproduce.environment_build import EnvironmentBuildError
    from bench_utils.study.grid.checks import GridError
    from bench_utils.study.grid.yaml_reading import GridFileError
    from bench_utils.study.lease import LeaseHeldError
    from bench_utils.zoo.hub import WeightsUnavailableError

    for kind in (GridError, GridFileError, NoRecordsError, WeightsUnavailableError, ClusterUnreachable,
                 LeaseHeldError, EnvironmentBuildError):
        assert issubclass(kind, UserError) and issubclass(kind, ValueError), kind


def test_a_grid_file_with_a_bad_value_is_one_line_and_exit_2(capsys, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("study: bad\nruns: 0\ngrids:\n  - models: [resnet]\n    batch_sizes: [1]\n"
                    "    compile_modes: [eager]\n")
    status, out, err = run_main(capsys, "run", str(grid), "--out", str(tmp_path / "study"))
    assert status == 2 and not out
    assert err.splitlines() == [f"error: {grid}: runs: must be >= 1, got 0"], err


def test_a_user_error_raised_in_a_command_is_one_line_and_exit_2(capsys, monkeypatch):
    def refuse(args):
        raise UserError("--flag: not what it takes")

    monkeypatch.setattr(cli, "_cmd_env", refuse)
    assert run_main(capsys, "env") == (2, "", "error: --flag: not what it takes\n")


@pytest.mark.parametrize("error", [ValueError("bug"), KeyError("bug"), RuntimeError("bug")])
def test_any_other_error_is_a_bug_with_its_traceback_not_bad_input(capsys, monkeypatch, error):
    def broken(args):
        raise error  # a ValueError from numpy or torch, say: not the user's mistake

    monkeypatch.setattr(cli, "_cmd_env", broken)
    status, out, err = run_main(capsys, "env")
    assert status == os.EX_SOFTWARE == 70 and not out
    lines = err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):" and f"{type(error).__name__}: " in lines[-2]
    assert not err.startswith("error:")
    assert lines[-1] == (f"bug: env stopped on an unexpected {type(error).__name__}: not a mistake in what you asked "
                         "but a bug in bench_utils; please report it with the traceback above")


def test_what_unwinds_after_ctrl_c_is_the_interrupts_not_a_bug(capsys, monkeypatch):
    from bench_utils.study.runner import clean_stop

    monkeypatch.setattr(clean_stop, "end_children", lambda: None)  # this test process's children are not ours

    def interrupted(args):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise ValueError("the kernel died") from None  # what a kernel ended by Ctrl-C raises on the way out

    monkeypatch.setattr(cli, "_cmd_env", interrupted)
    status, _, err = run_main(capsys, "env")
    assert status == 130 and err.startswith("interrupted: env stopped;") and "bug:" not in err


def test_a_system_exit_in_a_command_passes_through(monkeypatch):
    def leave(args):
        raise SystemExit(5)

    monkeypatch.setattr(cli, "_cmd_env", leave)
    with pytest.raises(SystemExit) as left:
        cli.main(["env"])
    assert left.value.code == 5


@pytest.mark.parametrize("args, message", [
    (["validate-timer", "--runs", "many"], "argument --runs: invalid _positive_int value: 'many'"),
    (["validate-timer", "--runs", "0"], "argument --runs: must be >= 1, got 0"),
    (["validate-timer", "--min-run-time", "long"], "argument --min-run-time: invalid float value: 'long'"),
    (["cell", "resnet", "--runs", "1.5"], "argument --runs: invalid int value: '1.5'"),
])
def test_argparse_type_converters_still_make_a_usage_error_of_one_line(capsys, args, message):
    status, out, err = run_main(capsys, *args)
    assert status == 2 and not out
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err


def _user_inputs():
    from pathlib import Path

    from bench_utils.measurement.devices import resolve_device
    from bench_utils.paths import make_folder
    from bench_utils.settings import Settings
    from bench_utils.study.pricing.prior import device_key
    from bench_utils.study.runner.time_limit import parse_duration
    from bench_utils.vocabulary import check_mode, dtype_name
    from bench_utils.zoo.registry import resolve_key

    return [lambda: resolve_key("vitt"), lambda: dtype_name("fp8"), lambda: check_mode("fast"),
            lambda: Settings(runs=0).checked(), lambda: resolve_device("tpu"), lambda: parse_duration("-5m"),
            lambda: device_key("no such GPU"), lambda: make_folder(Path("/proc/nope/x"), "the study folder")]


def _invariants():
    from bench_utils.measurement.paired import paired_speedup
    from bench_utils.measurement.stats import as_sample
    from bench_utils.records.build import validate_record

    return [lambda: as_sample([]), lambda: paired_speedup([[1.0]], [[1.0], [2.0]]), lambda: validate_record({})]


def test_user_input_raises_user_errors_and_a_broken_invariant_a_plain_value_error():
    for call in _user_inputs():
        with pytest.raises(UserError):
            call()
    for call in _invariants():  # a record bench_utils built that fails its schema, a sample no code should pass
        with pytest.raises(ValueError) as raised:
            call()
        assert not isinstance(raised.value, UserError), raised.value
