from collections import Counter
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import pytest

from bench_utils.records.results_file import read_records
from bench_utils.paths import PROJECT_ROOT
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner.progress_display import format_run_outcome
from bench_utils.study.runner.grid_runner import Runner
from fake_notebook import FakeNotebook
from bench_utils.environment.capture import capture_environment

GRID = {"study": "t", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4, 16], "compile_modes": ["eager", "default"]},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager"]}]}


def run(tmp_path, notebook, **kwargs):
    runner = Runner(parse_grid(GRID), tmp_path, executor=notebook, **kwargs)
    return runner.run(), runner


def statuses(tmp_path):
    return {(r.cell.model, r.cell.batch_size, r.cell.compile_mode): r.status
            for r in read_records(tmp_path / "results.jsonl")}


def test_every_cell_runs_once_with_the_notebooks_parameters(tmp_path):
    notebook = FakeNotebook()
    summary, runner = run(tmp_path, notebook)
    assert len(notebook.calls) == 7 and summary.counts() == {"ok": 7}
    assert set(statuses(tmp_path).values()) == {"ok"}
    # one kernel per model: batch sizes ascending, each with its compiled modes first, then eager
    assert [(kernel[0], kernel[2]) for kernel in notebook.kernels] == [
        ("image-classification__resnet__float32__cpu",
         [("default", 1), ("eager", 1), ("default", 4), ("eager", 4), ("default", 16), ("eager", 16)]),
        ("image-segmentation__segformer__float32__cpu", [("eager", 1)])]
    assert "7 run now: 7 ok" in format_run_outcome(summary, runner.results_path)


def test_an_error_is_recorded_and_the_grid_goes_on(tmp_path):
    notebook = FakeNotebook(error={("resnet", 4)}, crash={("segformer", 1)})
    summary, _ = run(tmp_path, notebook)
    found = statuses(tmp_path)
    assert found[("resnet", 4, "eager")] == "error" and found[("resnet", 16, "eager")] == "ok"
    assert found[("segformer", 1, "eager")] == "error"
    crash = [r for r in read_records(tmp_path / "results.jsonl") if r.cell.model == "segformer"][0]
    assert "while measuring this cell, 2 times" in crash.error and "Segmentation fault" in crash.error
    assert crash.log.endswith(".2.log")  # each kernel's own log; the first one's is kept
    # a cell that kills its kernel is tried once more in a new kernel, then recorded as an error
    assert summary.counts()["error"] == 3 and len(notebook.calls) == 8
    assert [kernel[1] for kernel in notebook.kernels] == [1, 1, 2]


def test_a_dead_kernel_is_replaced_for_the_unfinished_cells_only(tmp_path):
    notebook = FakeNotebook(crash_once={("resnet", 4)})
    summary, _ = run(tmp_path, notebook)
    assert summary.counts() == {"ok": 7}
    resnet = [kernel for kernel in notebook.kernels if "resnet" in kernel[0]]
    assert [attempt for _, attempt, _ in resnet] == [1, 2]
    assert resnet[1][2] == [("default", 4), ("eager", 4), ("default", 16), ("eager", 16)]
    records = read_records(tmp_path / "results.jsonl")
    assert len(records) == 7 and len({(r.cell.model, r.cell.batch_size, r.cell.compile_mode)
                                      for r in records}) == 7


def test_a_variant_cell_that_kills_its_kernel_is_recorded_as_that_variant_not_the_guides_cell(tmp_path):
    variant = {**GRID, "grids": [{"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager"],
                                  "memory_formats": ["channels_last"]}]}
    Runner(parse_grid(variant), tmp_path, executor=FakeNotebook(crash={("resnet", 4)})).run()
    crashed = [r for r in read_records(tmp_path / "results.jsonl") if r.status == "error"]
    assert [(r.cell.batch_size, r.cell.memory_format) for r in crashed] == [(4, "channels_last")]
    # the guide's contiguous cell at batch 4 is not taken for done: it is measured
    guide = {**GRID, "grids": [{"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager"]}]}
    again = FakeNotebook()
    Runner(parse_grid(guide), tmp_path, executor=again).run()
    assert sorted(call[1] for call in again.calls) == [1, 4]


def test_a_kernel_that_never_begins_a_cell_is_tried_twice_then_its_cells_are_errors(tmp_path):
    notebook = FakeNotebook(no_start=True)
    summary, _ = run(tmp_path, notebook)
    assert [(kernel[0].split("__")[1], kernel[1]) for kernel in notebook.kernels] == [
        ("resnet", 1), ("resnet", 2), ("segformer", 1), ("segformer", 2)]  # not two per cell
    records = read_records(tmp_path / "results.jsonl")
    assert len(records) == 7 and {r.status for r in records} == {"error"}
    assert all("before it began any cell, 2 times" in r.error for r in records)
    assert summary.counts() == {"error": 7}


FOUR_MODELS = {**GRID, "grids": [{"models": ["resnet", "segformer", "vit", "detr"], "batch_sizes": [1],
                                   "compile_modes": ["eager"]}]}


def test_when_three_groups_in_a_row_fail_to_start_the_run_stops_and_leaves_the_rest_unrecorded(tmp_path):
    # the first pipelined H200 lease: every kernel died on the same missing torch hook, for 8 of its 9 minutes
    notebook = FakeNotebook(no_start=True)
    runner = Runner(parse_grid(FOUR_MODELS), tmp_path, executor=notebook)
    summary = runner.run()
    assert len({kernel[0] for kernel in notebook.kernels}) == 3 and len(notebook.kernels) == 6  # each tried twice
    recorded = {record.cell.model for record in read_records(tmp_path / "results.jsonl")}
    started = {kernel[0].split("__")[1] for kernel in notebook.kernels}
    assert recorded == started  # the fourth group: no kernel, no record, left to a later run
    assert summary.exit_status() == 1 and "3 kernel groups in a row" in summary.worker_errors[0]
    assert "Segmentation fault" in summary.worker_errors[0]  # the last kernel's log
    assert "3 kernel groups in a row" in format_run_outcome(summary, tmp_path / "results.jsonl")


def test_a_kernel_that_begins_a_cell_starts_the_count_of_failed_starts_again(tmp_path):
    notebook = FakeNotebook(no_start={"resnet", "segformer", "detr"})  # vit, third of four, starts
    summary = Runner(parse_grid(FOUR_MODELS), tmp_path, executor=notebook).run()
    assert summary.counts() == {"error": 3, "ok": 1} and not summary.worker_errors


def test_a_cell_that_records_nothing_for_the_timeout_is_stopped_and_the_group_goes_on(tmp_path):
    notebook = FakeNotebook(hang={("resnet", 4)})
    summary, runner = run(tmp_path, notebook, timeout=1)
    found = statuses(tmp_path)
    assert found[("resnet", 4, "default")] == "error" and found[("resnet", 4, "eager")] == "error"
    assert found[("resnet", 16, "default")] == "ok" and found[("segformer", 1, "eager")] == "ok"
    hung = [r for r in read_records(tmp_path / "results.jsonl") if r.status == "error"][0]
    assert "recorded nothing for 1 s (--timeout)" in hung.error
    assert summary.counts() == {"ok": 5, "error": 2}


def test_out_of_memory_skips_the_larger_batches(tmp_path):
    notebook = FakeNotebook(oom={("resnet", 4)})
    summary, _ = run(tmp_path, notebook)
    found = statuses(tmp_path)
    assert found[("resnet", 4, "eager")] == "oom" and found[("resnet", 16, "eager")] == "oom"
    assert ("resnet", 16, "eager", "cpu") not in notebook.calls  # never run
    skipped = [r for r in read_records(tmp_path / "results.jsonl") if r.skipped_after_oom]
    assert len(skipped) == 2 and all(r.latency is None for r in skipped)
    assert summary.counts()["skipped"] == 2


def test_resume_measures_nothing_again_and_force_measures_all(tmp_path):
    run(tmp_path, FakeNotebook(error={("resnet", 1)}))  # batch 1 fails in both modes
    again = FakeNotebook()
    summary, runner = run(tmp_path, again)
    # only the cells that errored run again
    assert sorted(again.calls) == [("resnet", 1, "default", "cpu"), ("resnet", 1, "eager", "cpu")]
    assert summary.resumed == 5
    third = FakeNotebook()
    summary, runner = run(tmp_path, third)
    assert third.calls == [] and "nothing to do" in format_run_outcome(summary, runner.results_path)
    forced = FakeNotebook()
    run(tmp_path, forced, force=True)
    assert len(forced.calls) == 7


@pytest.mark.parametrize("change", [{"runs": 4}, {"warmup": 2}, {"blocks": 3}, {"tf32": "strict"},
                                    {"weights": "pretrained"}, {"seed": 1}])
def test_a_changed_measurement_setting_is_measured_again(tmp_path, change):
    Runner(parse_grid(GRID), tmp_path, executor=FakeNotebook()).run()
    again = FakeNotebook()
    Runner(parse_grid({**GRID, **change}), tmp_path, executor=again).run()
    assert len(again.calls) == 7, change


def test_records_of_another_study_name_and_random_weights_count_for_a_grid_asking_auto_offline(tmp_path):
    # the first H200 run: 19 cells measured as study "hf-guide-h200-first" with weights "random", then
    # params/hf-guide.yaml ("hf-guide", weights "auto", which comes to random with no hub) run into its folder
    Runner(parse_grid({**GRID, "study": "first-slice"}), tmp_path, executor=FakeNotebook()).run()
    again = FakeNotebook()
    summary = Runner(parse_grid({**GRID, "study": "the-guide", "weights": "auto"}), tmp_path, executor=again).run()
    assert again.calls == [] and summary.resumed == 7
    records = read_records(tmp_path / "results.jsonl")
    assert {record.cell.study for record in records} == {"first-slice"}  # no record edited or added


def test_an_eager_cell_whose_compiled_cells_pairs_measured_it_is_not_timed_again(tmp_path):
    # a time limit stopped DETR's kernel after its compiled cells on the H200: its eager cells were left,
    # though the compiled cells' records hold eager's figures (the eager side of their pairs)
    import json
    from bench_utils.study.cell.cell_record import speedup_block
    from bench_utils import compare

    Runner(parse_grid({**GRID, "grids": GRID["grids"][:1]}), tmp_path, executor=FakeNotebook()).run()
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    kept = []
    for line in lines:
        record = json.loads(line)
        if record["cell"]["compile_mode"] == "eager" and record["cell"]["batch_size"] in (1, 4):
            continue  # as if the kernel had stopped before them
        if record["cell"]["compile_mode"] == "default" and record["cell"]["batch_size"] != 4:
            # the compiled cells' eager side, as a kernel records it (batch 4's left without: no pairs)
            record["speedup"] = speedup_block(compare(lambda: None, lambda: None, warmup=1, runs=3, blocks=1,
                                                      device="cpu"))
            record["latency"]["warmup"] = record["config"]["warmup"]  # eager warmed up as the eager cell asks
        kept.append(json.dumps(record))
    (tmp_path / "results.jsonl").write_text("\n".join(kept) + "\n")
    again = FakeNotebook()
    Runner(parse_grid({**GRID, "grids": GRID["grids"][:1]}), tmp_path, executor=again).run()
    assert again.calls == [("resnet", 4, "eager", "cpu")]  # batch 1's eager was measured by its pairs


def test_compile_settings_re_measure_compiled_cells_only(tmp_path):
    Runner(parse_grid({**GRID, "backend": "aot_eager"}), tmp_path, executor=FakeNotebook()).run()
    again = FakeNotebook()
    Runner(parse_grid({**GRID, "backend": "aot_eager", "fullgraph": True}), tmp_path, executor=again).run()
    assert sorted(again.calls) == [("resnet", batch, "default", "cpu") for batch in (1, 4, 16)]


def test_a_grid_cells_key_is_the_key_of_the_record_the_real_kernel_writes_for_it(tmp_path, monkeypatch):
    # the kernel (task.run, as the notebook calls it) in this process, for measured, compiled, variant and
    # failed cells: resume must find each cell it recorded
    from bench_utils.records.key import record_key
    from bench_utils.study.cell import task

    monkeypatch.setenv(task.FAULT_ENV, "error:timm:test_resnet:2")  # the kernel's own failure records too
    grid = parse_grid({"study": "t", "runs": 2, "warmup": 1, "blocks": 1, "backend": "aot_eager", "grids": [
        {"models": ["timm:test_resnet"], "batch_sizes": [1, 2], "compile_modes": ["eager", "default"],
         "memory_formats": ["contiguous", "channels_last"]}]})

    def kernel(group, device, parameters, out_dir, poll, attempt):
        (out_dir / "logs").mkdir(exist_ok=True)  # for its progress file, as papermill's executor makes it
        task.run(task=group.first.task, **{key: value for key, value in parameters.items()
                                          if key not in ("show", "runner_pid", "run_id")})
        return 0, out_dir / "kernel.log"

    runner = Runner(grid, tmp_path, executor=kernel)
    assert not runner.run().worker_errors
    records = read_records(tmp_path / "results.jsonl")
    assert sorted(record.status for record in records) == ["error"] * 4 + ["ok"] * 4
    assert {runner.key(cell) for cell in grid.cells} == {record_key(record) for record in records}
    pending = runner.pending()  # errors run again
    assert pending.cells == tuple(cell for cell in grid.cells if cell.batch_size == 2) and pending.resumed == 4


@pytest.mark.parametrize("host", [{"cpu_count_logical": 128}, {"torch_version": "9.9.9"}])
def test_records_of_another_host_do_not_count(tmp_path, monkeypatch, host):
    run(tmp_path, FakeNotebook())
    import bench_utils.study.runner.grid_runner as runner_module

    real = runner_module.capture_environment
    monkeypatch.setattr(runner_module, "capture_environment", lambda: {**real(), **host})
    notebook = FakeNotebook()
    run(tmp_path, notebook)
    assert len(notebook.calls) == 7


def test_records_of_another_environment_do_not_count(tmp_path, monkeypatch):
    run(tmp_path, FakeNotebook())
    import bench_utils.study.runner.grid_runner as runner_module

    real = runner_module.capture_environment
    monkeypatch.setattr(runner_module, "capture_environment",
                        lambda: {**real(), "torch_version": "9.9.9"})
    notebook = FakeNotebook()
    run(tmp_path, notebook)
    assert len(notebook.calls) == 7


def test_two_devices_never_overlap_and_both_work(tmp_path):
    grid = dict(GRID, devices=["cuda:0", "cuda:1"], replicates=1)
    notebook = FakeNotebook(delay=0.05)
    two_gpus = {**capture_environment(), "gpu_count": 2,
                "gpus": [{"index": 0, "name": "Fake GPU"}, {"index": 1, "name": "Fake GPU"}]}
    runner = Runner(parse_grid(grid), tmp_path, executor=notebook, environment=two_gpus)
    runner.run()
    assert notebook.overlaps == []
    assert {device for *_, device in notebook.calls} == {"cuda:0", "cuda:1"}
    assert len(notebook.calls) == 7
    assert all(r.cell.device == "cuda" for r in read_records(tmp_path / "results.jsonl"))


def test_two_devices_take_every_first_replicate_before_any_second(tmp_path, monkeypatch):
    # staggered (one worker), resnet's r2 is two kernels behind its r1: side by side it could start beside it
    import bench_utils.study.runner.grid_runner as runner_module

    queued = []  # what the workers' queue gets, in order (which worker starts first among two is the threads')
    real = runner_module.for_workers

    def spied(groups, workers):
        ordered = real(groups, workers)
        queued.append((workers, [f"{group.first.settings.replicate} {group.first.model}" for group in ordered]))
        return ordered

    monkeypatch.setattr(runner_module, "for_workers", spied)
    grid = dict(GRID, devices=["cuda:0", "cuda:1"], replicates=2, runs=4, blocks=2, grids=[
        {"models": ["resnet", "segformer", "vit"], "batch_sizes": [1], "compile_modes": ["eager"]}])
    notebook = FakeNotebook(delay=0.05)
    two_gpus = {**capture_environment(), "gpu_count": 2,
                "gpus": [{"index": 0, "name": "Fake GPU"}, {"index": 1, "name": "Fake GPU"}]}
    Runner(parse_grid(grid), tmp_path, executor=notebook, environment=two_gpus).run()
    assert queued == [(2, ["r1 resnet", "r1 segformer", "r1 vit", "r2 resnet", "r2 segformer", "r2 vit"])]
    assert len(notebook.kernels) == 6  # and every one ran


def test_a_gpu_memory_cap_reaches_the_kernel_and_is_a_setting_of_its_own(tmp_path, monkeypatch):
    import bench_utils.records.build as records_module
    import bench_utils.study.runner.grid_runner as runner_module

    gpu_host = {**runner_module.capture_environment(), "gpu_count": 1, "driver_version": "580.1",
                "gpus": [{"index": 0, "name": "Fake GPU"}]}
    for module in (records_module, runner_module):  # the runner's host, and the records' (the kernel's)
        monkeypatch.setattr(module, "capture_environment", lambda: gpu_host)

    def run_cuda(grid, notebook):
        return Runner(parse_grid({**grid, "devices": ["cuda"], "replicates": 1}), tmp_path, executor=notebook).run()

    seen = []

    class Capped(FakeNotebook):
        def __call__(self, group, device, parameters, out_dir, poll, attempt):
            seen.append(parameters["settings"]["gpu_memory_gib"])
            return super().__call__(group, device, parameters, out_dir, poll, attempt)

    capped = {**GRID, "gpu_memory_gib": 16}
    run_cuda(capped, Capped())
    assert set(seen) == {16}
    assert {r.config.gpu_memory_gib for r in read_records(tmp_path / "results.jsonl")} == {16}
    again = FakeNotebook()
    run_cuda(capped, again)  # the same cap: every cell is measured already
    assert again.calls == []
    whole_card = FakeNotebook()
    run_cuda(GRID, whole_card)  # the whole card is another measurement
    assert len(whole_card.calls) == 7


def test_a_relative_out_is_resolved_where_the_runner_was_started(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the project root, where the kernels run
    notebook, seen = FakeNotebook(), []

    def executor(group, device, parameters, out_dir, poll, attempt):
        seen.append((parameters["results_path"], out_dir))
        return notebook(group, device, parameters, out_dir, poll, attempt)

    runner = Runner(parse_grid(GRID), "studies/mine", executor=executor)
    runner.run()
    wanted = tmp_path / "studies" / "mine"
    # A kernel resolves a relative path against the project root, not against this folder.
    assert {((PROJECT_ROOT / path).resolve(), Path(out)) for path, out in seen} == {
        (wanted / "results.jsonl", wanted)}
    assert len(read_records(wanted / "results.jsonl")) == 7


@pytest.mark.parametrize("devices, workers, gpus, message", [
    (["cuda"], None, 0, "the grid needs cuda:0, but this machine shows 0 CUDA device(s): run a CPU grid"),
    (["cuda:5"], None, 1, "the grid needs cuda:5, but this machine shows 1 CUDA device(s)"),
    (["cpu"], ["cpu", "cpu"], 0, "device cpu is listed twice"),  # --devices cpu,cpu
])
def test_devices_are_checked_against_the_machine_before_any_cell(tmp_path, devices, workers, gpus, message):
    notebook = FakeNotebook()
    runner = Runner(parse_grid(dict(GRID, devices=devices, replicates=1)), tmp_path, executor=notebook, devices=workers,
                    environment={**capture_environment(), "gpu_count": gpus})
    with pytest.raises(ValueError) as raised:
        runner.run()
    assert str(raised.value).startswith(message)
    assert notebook.calls == [] and not (tmp_path / "results.jsonl").exists()


def test_a_kernel_ended_by_the_oom_killer_is_oom_and_larger_batches_are_skipped(tmp_path, monkeypatch):
    import bench_utils.study.runner.kernel_watch as watch_module

    kills = iter(range(100))  # the system's OOM-kill count rises during every cell
    monkeypatch.setattr(watch_module, "oom_kill_count", lambda: next(kills))
    summary, _ = run(tmp_path, FakeNotebook(crash={("resnet", 4)}))
    found = statuses(tmp_path)
    assert found[("resnet", 4, "eager")] == "oom" and found[("resnet", 16, "eager")] == "oom"
    assert found[("resnet", 4, "default")] == "oom" and found[("resnet", 16, "default")] == "oom"
    killed = [r for r in read_records(tmp_path / "results.jsonl") if r.status == "oom"
              and not r.skipped_after_oom]
    assert len(killed) == 2 and all("out-of-memory killer" in r.error for r in killed)
    assert summary.counts()["skipped"] == 2 and found[("resnet", 1, "eager")] == "ok"


def test_a_crash_without_oom_kills_stays_an_error(tmp_path, monkeypatch):
    import bench_utils.study.runner.kernel_watch as watch_module

    monkeypatch.setattr(watch_module, "oom_kill_count", lambda: 7)
    run(tmp_path, FakeNotebook(crash={("resnet", 4)}))
    assert statuses(tmp_path)[("resnet", 4, "eager")] == "error"
    assert statuses(tmp_path)[("resnet", 16, "eager")] == "ok"


def test_an_oom_kill_during_an_earlier_cell_of_the_kernel_is_not_this_cells(tmp_path, monkeypatch):
    import bench_utils.study.runner.kernel_watch as watch_module

    counts = iter([0] + [5] * 100)  # the OOM killer struck while batch 1 ran, then never again
    monkeypatch.setattr(watch_module, "oom_kill_count", lambda: next(counts))
    run(tmp_path, FakeNotebook(crash={("resnet", 4)}))
    found = statuses(tmp_path)
    assert found[("resnet", 1, "default")] == "ok" and found[("resnet", 4, "default")] == "error"


def test_a_resumed_run_still_skips_batches_larger_than_an_earlier_oom(tmp_path):
    grid = parse_grid(GRID)
    first = Runner(grid, tmp_path, executor=FakeNotebook(oom={("resnet", 4)}))
    first.run()
    # A run cut short after the OOM at batch 4, before batch 16 was recorded as skipped:
    path = tmp_path / "results.jsonl"
    kept = [line for line in path.read_text().splitlines()
            if '"batch_size":16' not in line]
    path.write_text("\n".join(kept) + "\n")
    again = FakeNotebook()
    summary, _ = run(tmp_path, again)
    assert ("resnet", 16, "eager") not in {call[:3] for call in again.calls}
    assert statuses(tmp_path)[("resnet", 16, "eager")] == "oom" and summary.counts()["skipped"] == 2


def test_sigterm_stops_the_run_no_new_cell_and_exit_143(tmp_path):
    runner = Runner(parse_grid(GRID), tmp_path, executor=None)
    notebook = FakeNotebook()

    def executor(group, device, parameters, out_dir, poll, attempt):
        result = notebook(group, device, parameters, out_dir, poll, attempt)
        os.kill(os.getpid(), signal.SIGTERM)  # handled in the main thread, which joins the workers
        assert runner.stop.requested.wait(timeout=60)  # synchronise on the stop, not on a sleep
        return result

    runner.executor = executor
    outcome = runner.run()
    assert len(notebook.kernels) == 1 and outcome.signal == signal.SIGTERM and outcome.exit_status() == 143
    assert outcome.not_run == 1  # no new kernel once a stop was asked for
    assert "stopped by SIGTERM: 1 cell(s) not run" in format_run_outcome(outcome, runner.results_path)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


def test_a_worker_that_fails_stops_the_run_and_is_reported(tmp_path, monkeypatch):
    import bench_utils.study.runner.grid_runner as runner_module

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner_module, "failure_record", disk_full)
    outcome, runner = run(tmp_path, FakeNotebook(crash={("resnet", 1)}))
    assert outcome.worker_errors == ["worker cpu: OSError: [Errno 28] No space left on device"]
    assert outcome.exit_status() == 1 and outcome.not_run == 7
    assert "error: worker cpu: OSError" in format_run_outcome(outcome, runner.results_path)


# --- the real thing: papermill, kernels, SIGKILL ----------------------------------------------

SMOKE_SUBSET = """study: kill
runs: 2
warmup: 1
blocks: 1
grids:
  - models: [timm:resnet18]
    batch_sizes: [1, 2, 3]
    compile_modes: [eager]
"""


def run_cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "bench_utils", "run", *args], capture_output=True,
                          text=True, timeout=900, **kwargs)


def test_papermill_executes_each_task_notebook_with_smoke_parameters(tmp_path):
    result = run_cli("params/smoke.yaml", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    records = read_records(tmp_path / "results.jsonl")
    assert len(records) == 5 and {r.status for r in records} == {"ok"}
    assert {r.cell.task for r in records} == {"image-classification", "image-segmentation",
                                                    "object-detection"}
    assert all(r.latency.count == 4 for r in records)  # params/smoke.yaml: runs 4, 2 pairs
    compiled = [r for r in records if r.cell.compile_mode == "default"]
    assert compiled and compiled[0].parity.parity == "pass" and compiled[0].speedup is not None
    eager = next(r for r in records if r.cell.batch_size == 1 and r.cell.model == "timm:resnet18"
                 and r.cell.compile_mode == "eager")
    assert eager.shared_measurement.with_compile_mode == "default"  # eager timed once, in the pairs
    executed = sorted(p.name for p in (tmp_path / "notebooks").glob("*.ipynb"))
    assert len(executed) == 3  # one kernel per model
    first = [r.phases for r in records if r.phases.startup_s > 0]
    assert len(first) == 3 and all(p.load_s > 0 for p in first)  # each kernel's first record
    assert result.stderr.count("measuring ") == 5
    for audit in [*(tmp_path / "notebooks").glob("*.ipynb"), *(tmp_path / "logs").glob("*.log")]:
        text = audit.read_text(encoding="utf-8")  # published with the study folder
        assert str(tmp_path) not in text and str(PROJECT_ROOT) not in text, audit.name
    # The grid asks for weights "auto": records say what was measured (offline: random) ...
    assert {(r.config.weights, r.config.weights_requested) for r in records} == {("random", "auto")}
    again = run_cli("params/smoke.yaml", "--out", str(tmp_path))
    assert again.returncode == 0 and "nothing to do" in again.stdout
    # ... and the report renders from them.
    from bench_utils.report.render import render

    written = render([tmp_path], tmp_path / "report", locales=["en"], formats=["html"], progress=lambda _: None)
    page = (tmp_path / "report" / "en" / "index.html").read_text(encoding="utf-8")
    assert (tmp_path / "report" / "en" / "index.html") in written
    assert "random, with each checkpoint" in page and "KeyError" not in page


def test_a_runner_killed_mid_grid_then_run_again_records_every_cell_once(tmp_path):
    grid = tmp_path / "kill.yaml"
    grid.write_text(SMOKE_SUBSET)
    out = tmp_path / "study"
    runner = subprocess.Popen([sys.executable, "-m", "bench_utils", "run", str(grid), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 300
    while not (results.exists() and results.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2.0)  # well into the next cell
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    time.sleep(1.5)  # give an orphan kernel the time it would need to misbehave
    again = run_cli(str(grid), "--out", str(out))
    assert again.returncode == 0, again.stderr[-2000:]
    counts = Counter((r.cell.batch_size) for r in read_records(results))
    assert counts == {1: 1, 2: 1, 3: 1}


def test_ctrl_c_mid_cell_ends_the_kernel_writes_no_false_record_and_exits_130(tmp_path):
    import psutil

    grid = tmp_path / "hang.yaml"
    grid.write_text(SMOKE_SUBSET.replace("timm:resnet18", "timm:test_resnet"))  # the hang, not the model, times it
    out, marker, temp = tmp_path / "study", tmp_path / "hanging", tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "BENCH_UTILS_INJECT_FAULT": "hang:timm:test_resnet:2",
           "BENCH_UTILS_HANG_MARKER": str(marker), "TMPDIR": str(temp)}
    runner = subprocess.Popen([sys.executable, "-m", "bench_utils", "run", str(grid), "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 300
    while not marker.exists():  # the kernel of batch 2 is now stuck inside its cell
        assert runner.poll() is None and time.monotonic() < deadline, runner.communicate()
        time.sleep(0.1)
    family = psutil.Process(runner.pid).children(recursive=True)
    assert any("ipykernel" in " ".join(p.cmdline()) for p in family)
    runner.send_signal(signal.SIGINT)
    stdout, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 130, stderr[-2000:]
    assert "stopped by SIGINT: 2 cell(s) not run" in stdout
    records = read_records(out / "results.jsonl")
    assert [(r.cell.batch_size, r.status) for r in records] == [(1, "ok")]  # no false error
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [p.cmdline() for p in alive]
    # the killed kernels' connection files and sockets went with the command's kernel folder
    left = [path.name for path in temp.rglob("*") if path.name.startswith(("kernel-", "kernels-"))]
    assert not left, left


def test_a_cell_has_a_bounded_default_timeout_from_its_size(tmp_path):
    from bench_utils.study.runner.grid_runner import default_cell_timeout

    small, guide = parse_grid(GRID), parse_grid({**GRID, "runs": 300, "warmup": 10})
    assert default_cell_timeout(small) == 1800 + 20 * (1 + 3)
    assert default_cell_timeout(guide) == 1800 + 20 * 310
    assert Runner(small, tmp_path, executor=FakeNotebook()).timeout == default_cell_timeout(small)
    assert Runner(small, tmp_path, executor=FakeNotebook(), timeout=5).timeout == 5


def test_bad_grid_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: t\ngrids:\n  - models: [resnet]\n    batch_sizes: [0]\n    compile_modes: [eager]\n")
    result = run_cli(str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == \
        f"error: {bad}: grids[0].batch_sizes: must be positive integers, got 0"


def test_a_refused_or_failed_run_leaves_the_study_folders_grid_as_it_was(tmp_path):
    # a second runner refused by the lease, and a run whose devices this machine lacks, both exit 2: neither
    # may leave grid.yaml describing a grid that was never run (reproduce re-runs that file)
    from bench_utils.study.lease import LeaseHeldError, RunnerLease

    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("study: t\ngrids: [{models: [resnet], batch_sizes: [1], compile_modes: [eager]}]\n")
    second.write_text("study: t\ngrids: [{models: [resnet], batch_sizes: [1, 2], compile_modes: [eager]}]\n")
    study = tmp_path / "study"
    Runner(parse_grid({"study": "t", "grids": [{"models": ["resnet"], "batch_sizes": [1],
                                                  "compile_modes": ["eager"]}]}),
           study, executor=FakeNotebook(), grid_file=first).run()
    assert (study / "grid.yaml").read_text() == first.read_text()
    other = Runner(parse_grid({"study": "t", "grids": [{"models": ["resnet"], "batch_sizes": [1, 2],
                                                          "compile_modes": ["eager"]}]}),
                   study, executor=FakeNotebook(), grid_file=second)
    with RunnerLease(study, study / "results.jsonl"):
        with pytest.raises(LeaseHeldError):
            other.run()
    assert (study / "grid.yaml").read_text() == first.read_text()
    no_gpu = Runner(parse_grid({"study": "t", "devices": ["cuda:3"], "grids": [
        {"models": ["resnet"], "batch_sizes": [1, 2], "compile_modes": ["eager"]}]}),
        study, executor=FakeNotebook(), grid_file=second)
    with pytest.raises(ValueError):
        no_gpu.run()
    assert sorted(path.name for path in study.glob("grid*.yaml")) == ["grid.yaml"]
    other.run()  # it really runs now: its grid is the folder's, the first kept beside it
    assert (study / "grid.yaml").read_text() == second.read_text()
    assert [path.read_text() for path in study.glob("grid.*.yaml")] == [first.read_text()]


def test_progress_files_a_killed_runner_left_are_gone_after_the_next_run(tmp_path):
    (tmp_path / "logs").mkdir()
    for name in ("image-classification__resnet__float32__cpu.1.progress", "x.2.progress.partial"):
        (tmp_path / "logs" / name).write_text('{"compile_mode": "eager", "batch_size": 1}')
    run(tmp_path, FakeNotebook())
    assert not list((tmp_path / "logs").glob("*.progress*"))


def test_kernels_keep_cold_compiles_for_later_replicates_outside_the_study_folder(tmp_path):
    from bench_utils.variants.kept_caches import default_root

    seen, notebook = [], FakeNotebook()

    def executor(group, device, parameters, out_dir, poll, attempt):
        seen.append((parameters["keep_compiles"], PROJECT_ROOT / parameters["results_path"]))
        return notebook(group, device, parameters, out_dir, poll, attempt)

    Runner(parse_grid({**GRID, "replicates": 2, "runs": 4, "blocks": 2}), tmp_path, executor=executor).run()
    # every kernel keeps them, where its results file says: the study's folder of the temporary folder, no path of
    # this machine in the notebook's parameters
    assert {keep for keep, _ in seen} == {True} and {path.parent.resolve() for _, path in seen} == {tmp_path}
    assert tmp_path not in default_root(tmp_path).parents
    # a CPU grid measured once, no cell measured again: nothing would compile warm from them, so none are kept
    seen.clear()
    run(tmp_path / "once", executor)
    assert {keep for keep, _ in seen} == {False}


def test_a_run_that_leaves_no_cell_to_measure_forgets_its_kept_caches(tmp_path, monkeypatch, capsys):
    from bench_utils.study.grid.pending import Pending
    from bench_utils.study.runner import run_command
    from bench_utils.study.runner.progress_display import RunOutcome
    from bench_utils.variants.kept_caches import default_root

    left: list = []

    class Finished(Runner):
        def run(self, announce=None):
            return RunOutcome()

        def pending(self):
            return Pending(tuple(left), 0)

    monkeypatch.setattr(run_command, "Runner", Finished)
    grid = parse_grid(GRID)
    kept = default_root(tmp_path)
    (kept / "cell").mkdir(parents=True)
    left.append(grid.cells[0])  # a cell still to measure: a next run's replicate may compile warm from them
    run_command.run_locally(grid, "grid.yaml", out=tmp_path)
    assert (kept / "cell").is_dir()
    left.clear()
    run_command.run_locally(grid, "grid.yaml", out=tmp_path)
    assert not kept.exists()
