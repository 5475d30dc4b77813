import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench_utils.cli import main
from bench_utils.paths import PROJECT_ROOT

FAST = ["--size", "64", "--runs", "20", "--rounds", "2", "--min-run-time", "0.2"]


def run_main(capsys, *args):
    """``python -m bench_utils ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        status = main(list(args))
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_module_entry_point_runs():
    # The one subprocess: `python -m bench_utils` itself (every other test calls main()).
    result = subprocess.run([sys.executable, "-m", "bench_utils", "env", "--json"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["torch_version"] == torch.__version__


def test_env_prints_a_table_and_json(capsys):
    status, table, _ = run_main(capsys, "env")
    assert status == 0 and "torch_version" in table and torch.__version__ in table
    status, text, _ = run_main(capsys, "env", "--json")
    assert status == 0 and json.loads(text)["torch_version"] == torch.__version__


def test_validate_timer_prints_both_medians_ratio_and_overhead(capsys, tmp_path):
    out = tmp_path / "check" / "timer.json"
    status, text, _ = run_main(capsys, "validate-timer", "--device", "cpu", *FAST, "--out", str(out))
    assert status == 0
    assert "measure median" in text and "torch Timer median" in text
    assert "ratio measure/Timer" in text and "no-op overhead" in text
    saved = json.loads(out.read_text())
    assert saved["device"] == "cpu" and saved["runs"] == 20


def test_bad_device_is_one_clear_line_and_exit_2(capsys):
    status, _, err = run_main(capsys, "validate-timer", "--device", "tpu", *FAST)
    assert status == 2
    assert err.strip().startswith("error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_arguments_exit_2(capsys):
    status, _, err = run_main(capsys, "validate-timer", "--runs", "0")
    assert status == 2 and "must be >= 1" in err
    assert run_main(capsys, "no-such-command")[0] == 2


def test_models_lists_all_twelve_with_parameter_counts(capsys):
    status, text, _ = run_main(capsys, "models")
    assert status == 0
    for key, millions in (("vit", "86.57M"), ("convnext", "197.77M"), ("detr", "41.52M"),
                          ("owlvit", "153.23M"), ("conditional-detr", "43.42M")):
        line = next(line for line in text.splitlines() if line.startswith(key + " "))
        assert millions in line
    status, text, _ = run_main(capsys, "models", "--json")
    assert status == 0 and len(json.loads(text)) == 12


def test_cell_runs_and_appends_a_record(capsys, tmp_path):
    results = tmp_path / "results.jsonl"
    status, text, err = run_main(capsys, "cell", "mobilenet", "--mode", "eager", "--runs", "3",
                                 "--warmup", "1", "--results", str(results))
    assert status == 0, err
    assert "latency   mean" in text
    record = json.loads(results.read_text())
    assert record["cell"]["model"] == "mobilenet" and record["latency"]["count"] == 3
    assert record["config"]["weights"] == "random" and record["config"]["tf32"] == "default"
    assert record["config"]["sync"] == "per-call" and record["latency"]["sync"] == "per-call"
    assert record["cell"]["memory_format"] == "contiguous"


def test_cell_takes_the_channels_last_layout(capsys, tmp_path):
    results = tmp_path / "results.jsonl"
    status, text, err = run_main(capsys, "cell", "timm:test_resnet", "--mode", "eager", "--runs", "2",
                                 "--warmup", "1", "--memory-format", "channels_last", "--results", str(results))
    assert status == 0, err
    assert "channels_last" in text.splitlines()[0]
    record = json.loads(results.read_text())
    assert record["cell"]["memory_format"] == "channels_last" == record["model"]["memory_format"]


@pytest.mark.parametrize("args, message", [
    (["cell", "vitt"], "Did you mean 'vit'"),
    (["cell", "vit", "--mode", "fast"], "unknown compile mode"),
    (["cell", "vit", "--dtype", "fp8"], "unknown dtype"),
])
def test_cell_bad_input_is_one_line(capsys, args, message):
    status, _, err = run_main(capsys, *args)
    assert status == 2 and message in err
    assert len(err.strip().splitlines()) == 1, err


FIXTURE = Path(__file__).parent / "fixtures" / "smoke-results.jsonl"


@pytest.mark.parametrize("args, message", [
    (["report", str(FIXTURE), "--locales", ","], "error: no locale given"),
    (["report", str(FIXTURE), "--locales", "en,fr"], "error: unknown locale 'fr'"),
    (["report", str(FIXTURE), "--formats", ","], "error: no format given"),
    (["report", str(FIXTURE), "--out", str(FIXTURE)], "is a file, not a folder"),
    (["report", "no/such/study"], "error: no results at no/such/study"),
    (["run", "params/smoke.yaml", "--out", str(FIXTURE)], "is a file, not a study folder"),
    (["run", "params/smoke.yaml", "--devices", "cuda:0"], "error: --devices cuda:0: the grid has no cuda cells"),
    (["run", "GPU_GRID", "--devices", "cuda:7"], "error: the grid needs cuda:7, but this machine shows"),
    (["run", "params/smoke.yaml", "--out", "/proc/nope/x"], "error: cannot create the study folder /proc/nope/x: "),
    (["run", "params/smoke.yaml", "--out", ""], "argument --out: is empty: name a file or folder"),
    (["run", "params/smoke.yaml", "--out", "/tmp/" + "x" * 300], "not a usable folder (File name too long)"),
    (["run", "params/smoke.yaml", "--time-limit", "-5m"], "argument --time-limit: expected one argument (a value "
                                                         "that begins with '-' goes after '='"),
    (["run", "params/smoke.yaml", "--time-limit=-5m"], "error: --time-limit '-5m': give a positive duration"),
    (["run", "LONG_NAME"], "study: must be a file-name-safe name of at most 100 characters"),
    (["run", "BOMB"], "its aliases expand to more than 100,000 values"),
    (["report", "reports/example-tiny", "--out", "/proc/nope/x"], "error: cannot create the report's folder"),
])
def test_bad_run_and_report_input_is_one_line_and_exit_2(capsys, tmp_path, args, message):
    if "cuda:7" in args and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    grid = tmp_path / "gpu.yaml"
    grid.write_text("study: gpu\ndevices: [cuda]\ngrids:\n  - models: [resnet]\n    batch_sizes: [1]\n"
                    "    compile_modes: [eager]\n")
    grids = {"GPU_GRID": grid, "LONG_NAME": tmp_path / "long.yaml", "BOMB": tmp_path / "bomb.yaml"}
    smoke = (PROJECT_ROOT / "params" / "smoke.yaml").read_text(encoding="utf-8")
    grids["LONG_NAME"].write_text(smoke.replace("study: smoke", "study: " + "s" * 300))
    laughs = "".join(f"  - &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n" for n in range(1, 9))
    grids["BOMB"].write_text(f"study: bomb\nx:\n  - &l0 [lol]\n{laughs}grids: *l8\n")
    args = [str(grids.get(arg, arg)) for arg in args]
    if args[0] == "run" and not any(arg.startswith("--out") for arg in args):
        args += ["--out", str(tmp_path / "study")]  # never the repository's reports/
    status, _, err = run_main(capsys, *args)
    assert status == 2, err
    lines = err.strip().splitlines()  # no banner before the refusal, no usage block
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err and len(lines[0]) < 400


def damaged_study(folder: Path) -> tuple[Path, int]:
    """A study folder whose results begin with a byte-order mark and end in a torn line: (its results, that line)."""
    folder.mkdir(parents=True)
    text = FIXTURE.read_text(encoding="utf-8")
    results = folder / "results.jsonl"
    results.write_text(text + text.splitlines()[0][:50], encoding="utf-8-sig")
    return results, len(text.splitlines()) + 1


def test_run_dry_run_says_each_line_it_skipped_once(capsys, tmp_path):
    results, torn = damaged_study(tmp_path / "study")
    status, plan, err = run_main(capsys, "run", "params/smoke.yaml", "--dry-run", "--out", str(tmp_path / "study"))
    assert status == 0, err
    said = [line for line in err.splitlines() if line.startswith(f"{results}:")]
    # read by the resume and the estimate alike, said once; the first record, behind the mark, read
    assert len(said) == 1 and said[0].startswith(f"{results}:{torn}: skipped: not valid JSON ("), err
    assert "Traceback" not in err and "CorruptRecordWarning" not in err


def test_report_says_each_line_it_skipped_and_the_page_counts_them(capsys, tmp_path):
    results, torn = damaged_study(tmp_path / "study")
    status, written, err = run_main(capsys, "report", str(tmp_path / "study"), "--locales", "en", "--formats", "md")
    assert status == 0, err
    said = [line for line in err.splitlines() if ": skipped: " in line]
    assert len(said) == 1 and said[0].startswith(f"{results}:{torn}: skipped: not valid JSON ("), err
    page = (tmp_path / "study" / "en" / "README.md").read_text(encoding="utf-8")
    assert "Lines of `study/results.jsonl` skipped because they could not be read" in page
    assert "(torn, corrupt or of another schema version): 1." in page
    # the study folder carries the versions its records were measured with, one file per environment
    (environment,) = (tmp_path / "study" / "environments").glob("*.txt")
    assert str(environment) in written.splitlines() and "torch==" in environment.read_text()


def test_the_cell_commands_setting_flags_keep_each_settings_default():
    from bench_utils.cli import build_parser
    from bench_utils.settings import Settings, setting_fields, setting_names

    parsed = build_parser().parse_args(["cell", "resnet"])
    flags = [item.name for item in setting_fields() if item.metadata["flag"]]
    assert {name: getattr(parsed, name) for name in flags} == {
        name: value for name, value in Settings().to_parameters().items() if name in flags}
    # a grid's business, not one cell's: no --replicates, no --replicate, no --remeasure-unsteady
    assert set(setting_names()) - set(flags) == {"replicates", "replicate", "remeasure_unsteady"}
    assert not hasattr(parsed, "replicates") and not hasattr(parsed, "remeasure_unsteady")
    assert parsed.profile is True and parsed.keep_traces is False  # on by default: --no-profile turns it off
    off = build_parser().parse_args(["cell", "resnet", "--no-profile", "--keep-traces"])
    assert off.profile is False and off.keep_traces is True


@pytest.mark.parametrize("device, words", [("cuda", "device 'cuda': this machine has no CUDA GPU"),
                                           ("gpu", "unknown device 'gpu'"), ("cuda:7", "cuda:7")])
def test_a_cell_on_a_device_this_machine_lacks_is_one_line_naming_it_and_what_the_machine_has(device, words):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, "-m", "bench_utils", "cell", "resnet", "--device", device, "--runs", "2"],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)
    assert done.returncode == 2 and words in done.stderr and "this machine has: cpu" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "dtype" not in done.stderr


def test_records_with_impossible_values_are_skipped_by_report_and_diagnose_and_counted(capsys, tmp_path):
    from hostile_records import read_jsonl, write_jsonl

    records = read_jsonl(PROJECT_ROOT / "reports" / "example-tiny" / "results.jsonl")
    compiled = next(record for record in records if record["cell"]["compile_mode"] != "eager")
    strings = json.loads(json.dumps(compiled))
    strings["latency"]["mean"] = str(compiled["latency"]["mean"])  # as a spreadsheet may have written it
    negative = json.loads(json.dumps(compiled))
    negative["speedup"]["mean"] = -0.5
    study = tmp_path / "study"
    write_jsonl(study / "results.jsonl", [*records, strings, negative])
    status, _, err = run_main(capsys, "report", str(study), "--locales", "en", "--formats", "md")
    assert status == 0 and "Traceback" not in err, err
    said = [line for line in err.splitlines() if ": skipped: " in line]
    assert said == [f"{study / 'results.jsonl'}:3: skipped: not a valid record (latency.mean: must be a valid "
                    f"number, got '{compiled['latency']['mean']}')",
                    f"{study / 'results.jsonl'}:4: skipped: not a valid record (speedup.mean: must be greater than "
                    "or equal to 0.000001, got -0.5)"], err
    page = (study / "en" / "README.md").read_text(encoding="utf-8")
    assert "(torn, corrupt or of another schema version): 2." in page and "-0.50" not in page
    status, out, err = run_main(capsys, "diagnose", str(study), "--dry-run")
    assert status == 0 and "Traceback" not in err and "speed-up -0.50x" not in out, err


def test_diagnose_on_the_committed_example_leaves_out_what_its_backend_cannot_measure(capsys, tmp_path):
    import shutil

    study = tmp_path / "example-tiny"
    shutil.copytree(PROJECT_ROOT / "reports" / "example-tiny", study)
    for args in ([], ["--dry-run"]):
        status, _, out = run_main(capsys, "diagnose", str(study), *args)  # said on stderr
        assert status == 0 and "Traceback" not in out, out
        assert ("left out, needing the inductor backend (this study's is aot_eager): default+freezing, "
                "max-autotune-no-cudagraphs") in out
        assert out.strip().splitlines()[-1] == ("[diagnose] no remedy of these cells can be measured with their "
                                                "backend: nothing to run")
    assert not (study / "diagnosis.yaml").exists()


def test_a_second_runner_on_a_study_folder_says_only_why_it_is_refused(capsys, tmp_path):
    from bench_utils.study.lease import RunnerLease

    study = tmp_path / "study"
    with RunnerLease(study, study / "results.jsonl"):
        status, out, err = run_main(capsys, "run", "params/smoke.yaml", "--out", str(study))
    assert status == 2 and not out
    assert err.startswith("error: another runner (pid ") and len(err.strip().splitlines()) == 1, err
