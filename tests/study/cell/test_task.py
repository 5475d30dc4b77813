import os

import pytest

from bench_utils.records.results_file import StaleWriterError, read_records
from bench_utils.study.cell import task
from bench_utils.study.lease import RunnerLease


def run(tmp_path, **kwargs):
    options = dict(study="t", task="image-classification", models=["timm:test_resnet"],
                   batch_sizes=[1, 2, 4], compile_modes=["eager"], runs=2, warmup=1, blocks=1,
                   results_path=tmp_path / "results.jsonl")
    options.update(kwargs)
    return task.run(**options)


def test_cells_are_measured_and_recorded(tmp_path):
    import logging

    returned = run(tmp_path, batch_sizes=[1, 2])
    # torch's "No CUDA runtime is found" as Inductor builds C++ on this host: no red box in a notebook
    quiet = logging.getLogger("torch.utils.cpp_extension")
    note = logging.LogRecord("torch.utils.cpp_extension", logging.WARNING, "", 0, "No CUDA runtime is found, using "
                             "CUDA_HOME='/usr/local'", None, None)
    other = logging.LogRecord("torch.utils.cpp_extension", logging.WARNING, "", 0, "CUDA version mismatch", None, None)
    assert not quiet.filter(note) and quiet.filter(other)  # that note only
    assert quiet.filters.count(task.no_cuda_runtime_note) == 1  # once, whatever ran before in this process
    assert [r["status"] for r in returned] == ["ok", "ok"]
    assert all(r["latency"]["mean"] > 0 for r in returned)
    records = read_records(tmp_path / "results.jsonl")
    assert [r.cell.batch_size for r in records] == [1, 2]
    assert records[0].config.tf32 == "default" and records[0].model.weights == "random"
    assert records[0].config.gpu_memory_gib is None  # the whole card (none here)


def test_out_of_memory_records_oom_and_skips_larger_batches(tmp_path, monkeypatch):
    monkeypatch.setenv(task.FAULT_ENV, "oom:timm:test_resnet:2")
    assert [r["status"] for r in run(tmp_path)] == ["ok", "oom", "oom"]
    records = read_records(tmp_path / "results.jsonl")
    assert "OutOfMemoryError" in records[1].error and records[2].skipped_after_oom == 2


def test_a_gpu_memory_cap_on_a_cpu_kernel_is_refused_before_anything_is_measured(tmp_path):
    with pytest.raises(ValueError, match="gpu_memory_gib caps a GPU's memory"):
        run(tmp_path, gpu_memory_gib=16)
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.cuda
def test_on_a_gpu_a_cap_makes_a_batch_that_needs_more_oom_and_skips_the_larger_ones(tmp_path):
    # batch 2048's images alone are 1.2 GB in float32: beyond a 1 GiB card
    returned = run(tmp_path, device="cuda", batch_sizes=[1, 2048, 4096], gpu_memory_gib=1)
    assert [r["status"] for r in returned] == ["ok", "oom", "oom"]
    records = read_records(tmp_path / "results.jsonl")
    assert "OutOfMemoryError" in records[1].error and records[2].skipped_after_oom == 2048
    assert {r.config.gpu_memory_gib for r in records} == {1}
    assert 0 < records[0].config.gpu_memory_fraction < 0.1  # 1 GiB of a large card


def test_an_error_records_the_traceback_and_the_rest_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv(task.FAULT_ENV, "error:timm:test_resnet:1")
    assert [r["status"] for r in run(tmp_path, batch_sizes=[1, 2])] == ["error", "ok"]
    error = read_records(tmp_path / "results.jsonl")[0].error
    assert "Traceback" in error and "RuntimeError: injected fault" in error


def test_a_first_model_whose_early_build_fails_keeps_its_seconds_in_the_first_records_load(tmp_path, monkeypatch):
    import time

    def slow_failure(*args, **kwargs):
        time.sleep(0.3)
        raise RuntimeError("cannot build")

    monkeypatch.setattr(task, "load", slow_failure)
    records = run(tmp_path, batch_sizes=[1, 2], runner_pid=0)
    assert [r["status"] for r in records] == ["error", "error"]
    assert records[0]["phases"]["load_s"] >= 0.3 and records[1]["phases"]["load_s"] < 0.3


def test_a_model_that_cannot_load_gives_an_error_per_cell(tmp_path):
    returned = run(tmp_path, models=["resnet"], weights="pretrained", batch_sizes=[1, 2])
    assert [r["status"] for r in returned] == ["error", "error"]
    assert "weights='random'" in read_records(tmp_path / "results.jsonl")[1].error


def test_out_of_memory_is_recognized():
    import torch

    assert task.is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert task.is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert task.is_out_of_memory(RuntimeError(
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
    assert not task.is_out_of_memory(RuntimeError("shape mismatch"))


def test_a_notebook_of_a_replaced_runner_writes_nothing(tmp_path, monkeypatch):
    import os

    # The watchdog would end this very process (it is tested in test_lease.py).
    monkeypatch.setattr(task, "start_watchdog", lambda *args, **kwargs: None)
    results = tmp_path / "results.jsonl"
    with RunnerLease(tmp_path, results) as old:
        stale = old.run_id
    with RunnerLease(tmp_path, results):
        with pytest.raises(StaleWriterError):
            run(tmp_path, batch_sizes=[1], runner_pid=os.getpid(), run_id=stale)
    assert not results.exists() or read_records(results) == []


def test_auto_weights_record_the_weights_measured_not_the_request(tmp_path):
    # Offline (the tests force it), "auto" falls back to random: records must say "random".
    with pytest.warns(UserWarning, match="falling back to random weights"):
        returned = run(tmp_path, models=["resnet"], weights="auto", batch_sizes=[1], runs=1)
    assert [r["status"] for r in returned] == ["ok"]
    config = read_records(tmp_path / "results.jsonl")[0].config
    assert config.weights == "random" and config.weights_requested == "auto"


def test_only_cells_are_measured_in_execution_order_with_their_phases(tmp_path):
    returned = run(tmp_path, only_cells=[["eager", 4], ["eager", 1]])
    assert [(r["cell"]["compile_mode"], r["cell"]["batch_size"]) for r in returned] == [("eager", 1), ("eager", 4)]
    first, second = (r["phases"] for r in returned)
    assert first["load_s"] > 0 and second["load_s"] == 0  # the model is built once per kernel
    assert first["startup_s"] == 0  # reported under the grid runner only
    for phases in (first, second):
        assert phases["timed_s"] > 0 and phases["cell_s"] >= phases["timed_s"] + phases["warmup_s"]
    with pytest.raises(ValueError, match="only_cells"):
        run(tmp_path, only_cells=["eager"])


def test_an_eager_cell_takes_the_eager_side_of_the_compiled_cells_pairs(tmp_path):
    returned = run(tmp_path, compile_modes=["eager", "default"], batch_sizes=[1, 2], runs=4, blocks=2,
                   backend="aot_eager")
    order = [(r["cell"]["compile_mode"], r["cell"]["batch_size"]) for r in returned]
    assert order == [("default", 1), ("eager", 1), ("default", 2), ("eager", 2)]  # compiled first, batch by batch
    by_cell = dict(zip(order, returned))
    for batch in (1, 2):
        compiled, eager = by_cell[("default", batch)], by_cell[("eager", batch)]
        assert eager["status"] == "ok" and eager["shared_measurement"]["with_compile_mode"] == "default"
        assert eager["latency"]["mean"] * 1e3 == pytest.approx(compiled["speedup"]["eager_mean_ms"])
        assert eager["latency"]["count"] == 4 and eager["phases"]["timed_s"] == 0
        assert eager["memory"] is not None and eager["compute"]["flops"] == compiled["compute"]["flops"]
    # the warm compile is measured once per model and mode
    assert by_cell[("default", 1)]["compile"]["warm_ms"] is not None
    assert by_cell[("default", 2)]["compile"]["warm_ms"] is None


def test_a_batch_sizes_compile_modes_are_timed_in_one_row_beside_one_eager_series(tmp_path, modes_as_backends):
    row = ["default", "reduce-overhead"]
    # warmed up twice, as a CUDA-graph mode's side is at least: the row's eager series stands for the eager cell
    returned = run(tmp_path, compile_modes=["eager", *row], batch_sizes=[1, 2], runs=4, blocks=2, warmup=2,
                   backend="aot_eager")
    order = [(r["cell"]["compile_mode"], r["cell"]["batch_size"]) for r in returned]
    assert order == [("default", 1), ("reduce-overhead", 1), ("eager", 1),
                     ("default", 2), ("reduce-overhead", 2), ("eager", 2)]
    by_cell = dict(zip(order, returned))
    for batch in (1, 2):
        default, graphs, eager = (by_cell[(mode, batch)] for mode in (*row, "eager"))
        assert default["status"] == graphs["status"] == eager["status"] == "ok"
        # one eager figure per row: both speed-ups against it, and the eager cell is that series
        assert default["speedup"]["eager_values"] == graphs["speedup"]["eager_values"]
        assert default["speedup"]["timed_with"] == graphs["speedup"]["timed_with"] == row
        assert eager["shared_measurement"]["timed_with"] == row
        assert eager["latency"]["mean"] * 1e3 == pytest.approx(default["speedup"]["eager_mean_ms"])
        # the row's time once: the second mode's cell is its own parts alone
        parts = sum(value for key, value in graphs["phases"].items() if key not in ("cell_s", "startup_s", "load_s"))
        assert graphs["phases"]["cell_s"] == pytest.approx(parts, abs=1e-3)
    for mode in row:  # each mode's warm compile measured once, at its first batch size
        assert by_cell[(mode, 1)]["compile"]["warm_ms"] is not None and by_cell[(mode, 2)]["compile"]["warm_ms"] is None


@pytest.mark.cuda
def test_on_a_gpu_a_cuda_graph_mode_and_default_are_timed_in_one_row_without_recording_again(tmp_path):
    # the next lease's first check of the row: reduce-overhead's graphs replayed between default's and eager's
    # calls, default compiled again beside it, no fallback to timing each mode on its own
    row = ["default", "reduce-overhead"]
    returned = run(tmp_path, device="cuda", compile_modes=["eager", *row], batch_sizes=[1], runs=20, blocks=4,
                   warmup=2)
    default, graphs, eager = returned
    assert [r["status"] for r in returned] == ["ok", "ok", "ok"], [r.get("error") for r in returned]
    for record in (default, graphs):
        assert record["speedup"]["timed_with"] == row and record["compile"]["recompiles"] == 0
        assert not any("joint timing failed" in note for note in record.get("notes", []))
    assert graphs["compile"]["cuda_graphs"] is True and default["compile"]["timed_compilation_calls_ms"]
    assert eager["shared_measurement"]["timed_with"] == row


def test_a_row_whose_joint_timing_fails_times_each_mode_on_its_own_and_says_why(tmp_path, modes_as_backends,
                                                                              monkeypatch):
    from bench_utils.study.cell import measured_row

    def broken(*args, **kwargs):
        raise RuntimeError("rounds broke")

    monkeypatch.setattr(measured_row, "compare_many", broken)
    returned = run(tmp_path, compile_modes=["eager", "default", "reduce-overhead"], batch_sizes=[1], runs=4,
                   blocks=2, warmup=2, backend="aot_eager")
    default, graphs, eager = returned
    assert [r["status"] for r in returned] == ["ok", "ok", "ok"]
    for record in (default, graphs):
        assert record["speedup"]["timed_with"] == [record["cell"]["compile_mode"]]
        assert any("row's joint timing failed (RuntimeError: rounds broke)" in note for note in record["notes"])
    assert eager["shared_measurement"]["with_compile_mode"] == "default"


def test_an_eager_cell_without_a_compiled_one_is_timed_itself(tmp_path):
    returned = run(tmp_path, only_cells=[["default", 1], ["eager", 1], ["eager", 2]], runs=2, blocks=1,
                   backend="aot_eager")
    eager_two = returned[-1]
    assert "shared_measurement" not in eager_two and eager_two["phases"]["timed_s"] > 0


def test_a_person_sees_a_bar_that_moves_through_each_cells_parts_with_what_it_is_doing(tmp_path, monkeypatch):
    from bench_utils.study.cell import progress_bar, time_by_phase

    shown = []  # (position, description, postfix) at each refresh of the real tqdm bar
    made = []
    real_show = progress_bar.CellsBar._show

    def show(self, position, doing):
        real_show(self, position, doing)
        made.append(self)
        shown.append((self.bar.n, self.bar.desc, self.doing_now, self.bar.disable))

    monkeypatch.setattr(progress_bar.CellsBar, "_show", show)
    from bench_utils.study.cell import measured_cell, measured_row

    windows, opened = [], []  # a timed window open (the bar must not be told anything then), and those opened
    for module, name in ((measured_cell, "compare"), (measured_cell, "measure"), (measured_row, "compare_many")):
        def windowed(*args, _real=getattr(module, name), _name=name, **kwargs):
            windows.append(True)
            opened.append(_name)
            try:
                return _real(*args, **kwargs)
            finally:
                windows.pop()
        monkeypatch.setattr(module, name, windowed)
    told_inside = []  # parts the bar was told while a window was open
    monkeypatch.setattr(progress_bar.CellsBar, "doing", lambda self, part, _real=progress_bar.CellsBar.doing: (
        _real(self, part), windows and told_inside.append(part)))
    records = run(tmp_path, models=["timm:test_resnet", "no-such-model"], batch_sizes=[1],
                  compile_modes=["eager", "default"], backend="aot_eager")
    assert [r["status"] for r in records] == ["ok", "ok", "error", "error"]  # failed cells count too
    bar = made[-1].bar
    assert bar.total == 4 and bar.n == 4 and not any(disabled for *_, disabled in shown)
    positions = [position for position, *_ in shown]
    assert positions == sorted(positions) and positions[-1] == 4  # never backwards, to its end
    assert [p for p in positions if 0 < p < 1]  # within the first cell, before its record
    doing = " ".join(said for _, _, said, _ in shown)
    for said in ("building the model", "compiling", "warming up and timing", "accuracy gate"):
        assert said in doing, (said, doing)
    assert "timm:test_resnet float32 default batch 1: compiling" in doing
    assert shown[-1][1] == "cell 4 of 4" and "no-such-model float32" in shown[-1][2]
    assert opened and windows == [] and told_inside == []
    assert not time_by_phase._LISTENERS  # told no more once the run is over
    assert progress_bar.tqdm.monitor_interval == 0  # no monitor thread beside the timed windows


def test_under_the_grid_runner_no_bar_is_shown_and_no_part_is_said(tmp_path, monkeypatch, capsys):
    from bench_utils.study.cell import progress_bar

    monkeypatch.setattr(task, "start_watchdog", lambda *args, **kwargs: None)  # it would end this very process
    told = []
    monkeypatch.setattr(progress_bar.CellsBar, "doing", lambda self, part: told.append(part))
    results = tmp_path / "results.jsonl"
    with RunnerLease(tmp_path, results) as lease:
        records = run(tmp_path, batch_sizes=[1], runner_pid=os.getpid(), run_id=lease.run_id)
    assert [r["status"] for r in records] == ["ok"] and told == []
    assert "cell 1 of 1" not in capsys.readouterr().err  # the runner's own lines say it


def test_a_display_that_fails_is_dropped_and_the_cell_is_measured(tmp_path, monkeypatch, caplog):
    from bench_utils.study.cell import progress_bar

    def gone(self, *args, **kwargs):
        raise RuntimeError("the widget went away")

    monkeypatch.setattr(progress_bar.tqdm, "set_description_str", gone)  # each update: a part, a cell, one done
    records = run(tmp_path, batch_sizes=[1, 2])
    assert len(records) >= 2 and {r["status"] for r in records} == {"ok"}
    assert [r.message for r in caplog.records].count("progress display stopped: the widget went away") == 1


def test_dynamic_shapes_compile_once_and_count_what_later_batch_sizes_recompile(tmp_path):
    returned = run(tmp_path, compile_modes=["default"], batch_sizes=[2, 3, 4], runs=4, blocks=2,
                   backend="aot_eager", shapes="dynamic")
    assert [r["status"] for r in returned] == ["ok"] * 3
    assert {r["cell"]["shapes"] for r in returned} == {"dynamic"}
    first, *later = returned
    assert first["compile"]["graphs"] >= 1 and first["compile"]["warm_ms"] is not None
    for record in later:  # the batch-2 compilation serves batch 3 and 4: no graph compiled there
        assert record["compile"]["batch_shapes"] == {"shapes": "dynamic", "compiled_at_batch_size": 2,
                                                     "recompiles_at_this_batch_size": 0,
                                                     "method": "mark_dynamic(batch) + backed_size_oblivious"}
        # the model's graphs are the one compilation's; its first call here compiled none
        assert record["compile"]["graphs"] == first["compile"]["graphs"] and "batch size 2" in record["compile"]["cache"]
        assert record["parity"]["parity"] == "pass"
    static = run(tmp_path / "static", compile_modes=["default"], batch_sizes=[2, 3], runs=4, blocks=2,
                 backend="aot_eager")
    assert [r["compile"]["graphs"] for r in static] == [1, 1]  # the guide's way: one per batch size
    assert all("batch_shapes" not in r["compile"] and r["cell"]["shapes"] == "static" for r in static)


def test_a_compilation_at_batch_size_one_serves_the_next_batch_size(tmp_path):
    from bench_utils.zoo.loading import load
    from torch_recompiles import frames_recompiled

    loaded = load("timm:test_resnet", weights="random")
    # dynamo would specialize a batch of 1 (and recompile at 2) but for backed_size_oblivious; torch 2.11's
    # conv2d still guards on it: the record says what torch does
    recompiles = frames_recompiled(loaded.model, loaded.inputs, (1, 2))
    returned = run(tmp_path, compile_modes=["default"], batch_sizes=[1, 2], runs=4, blocks=2,
                   backend="aot_eager", shapes="dynamic")
    assert returned[1]["compile"]["batch_shapes"]["recompiles_at_this_batch_size"] == recompiles


def test_channels_last_converts_model_and_images_for_eager_and_compiled_alike(tmp_path):
    returned = run(tmp_path, compile_modes=["eager", "default"], batch_sizes=[1], runs=4, blocks=2,
                   backend="aot_eager", memory_format="channels_last")
    assert [r["status"] for r in returned] == ["ok", "ok"]
    assert {r["cell"]["memory_format"] for r in returned} == {"channels_last"}
    assert {r["model"]["memory_format"] for r in returned} == {"channels_last"}
    compiled = returned[0]
    assert compiled["parity"]["parity"] == "pass"  # against eager in the same layout


def test_the_loaded_model_and_its_images_are_in_the_asked_layout():
    import torch

    from bench_utils.variants.memory_format import CHANNELS_LAST
    from bench_utils.zoo.loading import load

    def nhwc(inputs):
        return all(value.is_contiguous(memory_format=torch.channels_last) and not value.is_contiguous()
                   for value in inputs.values() if value.dim() == 4)

    loaded = load("timm:resnet18", memory_format=CHANNELS_LAST)
    assert nhwc(loaded.inputs(2)) and loaded.info()["memory_format"] == CHANNELS_LAST
    conv = next(m for m in loaded.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) and not conv.weight.is_contiguous()
    assert not nhwc(load("timm:resnet18").inputs(2))
    with pytest.raises(ValueError, match="unknown memory format 'nchw'"):
        load("timm:resnet18", memory_format="nchw")


def test_a_kernel_starts_the_compile_worker_pool_before_its_first_compiled_cell(tmp_path, monkeypatch):
    from bench_utils.variants import compile_workers

    events = []
    monkeypatch.setattr(compile_workers, "start", lambda backend="inductor": events.append(("launch", backend)))
    monkeypatch.setattr(compile_workers, "ready", lambda backend="inductor", **_: events.append(("pool", backend)))
    monkeypatch.setattr(task._ModelCells, "build", lambda self: events.append(("build", self.model)) or 0.0)
    run_cell = task.run_cell
    monkeypatch.setattr(task, "run_cell", lambda loaded, **kw: events.append(("cell", kw["mode"])) or
                        run_cell(loaded, **kw))
    run(tmp_path, batch_sizes=[1])  # eager only: nothing compiles, no pool
    assert events == [("build", "timm:test_resnet"), ("cell", "eager")]
    events.clear()
    run(tmp_path, compile_modes=["default"], batch_sizes=[1], backend="aot_eager")
    # launched, the model built while it boots, waited for, then the cell (which checks it again)
    assert events[:4] == [("launch", "aot_eager"), ("build", "timm:test_resnet"), ("pool", "aot_eager"),
                          ("cell", "default")]


def test_a_kernels_cells_run_with_its_imports_and_model_frozen_and_the_heap_is_thawed_after(tmp_path, monkeypatch):
    import gc

    seen = []
    run_cell = task.run_cell

    def cell(loaded, **kw):  # the model among the collector's objects (not frozen), and the heap's frozen count
        seen.append((any(item is loaded.model for item in gc.get_objects()), gc.get_freeze_count()))
        return run_cell(loaded, **kw)

    monkeypatch.setattr(task, "run_cell", cell)
    gc.unfreeze()  # this session's own freeze (conftest.py), made again below
    try:
        run(tmp_path, batch_sizes=[1, 2])
        assert [tracked for tracked, _ in seen] == [False, False] and all(count > 10_000 for _, count in seen)
        assert gc.get_freeze_count() == 0  # thawed as it was found: a model a notebook drops later is collected
        assert {record.config.heap_frozen for record in read_records(tmp_path / "results.jsonl")} == {True}
        kept = [[]]  # a user's object, frozen before the kernel's run (as a test session's are)
        gc.freeze()
        run(tmp_path, batch_sizes=[1])
        assert not any(item is kept for item in gc.get_objects())  # left frozen
    finally:
        gc.collect()
        gc.freeze()


def test_each_model_of_a_kernel_is_frozen_and_one_left_in_a_cycle_is_collected_before_the_next(tmp_path, monkeypatch):
    import gc
    import weakref

    first, seen = [], []
    run_cell = task.run_cell

    def cell(loaded, **kw):  # the first model made cyclic; at the second's cell: is it gone, is this one frozen?
        if not first:
            loaded.model.__dict__["cycle"] = [loaded.model]
            first.append(weakref.ref(loaded.model))
        seen.append((first[0]() is None, any(item is loaded.model for item in gc.get_objects())))
        return run_cell(loaded, **kw)

    monkeypatch.setattr(task, "run_cell", cell)
    gc.unfreeze()
    try:  # eager cells: one a model
        run(tmp_path, models=["timm:test_resnet", "timm:test_vit"], compile_modes=["eager"], batch_sizes=[1])
        assert seen == [(False, False), (True, False)]  # frozen with its cells, thawed and collected after them
    finally:
        gc.collect()
        gc.freeze()


def test_a_later_replicates_kernel_writes_records_of_that_replicate(tmp_path):
    returned = run(tmp_path, batch_sizes=[1], compile_modes=["eager"], replicate="r2", replicates=2)
    assert [r["status"] for r in returned] == ["ok"]
    (record,) = read_records(tmp_path / "results.jsonl")
    assert record.cell.replicate == "r2" and record.config.replicates == 2


def test_a_later_replicates_kernel_compiles_warm_from_the_caches_the_first_kept(tmp_path, modes_as_backends,
                                                                                monkeypatch):
    from bench_utils.variants.compile_workers import THREADS_ENV

    monkeypatch.setenv(THREADS_ENV, "")
    monkeypatch.delenv(THREADS_ENV)  # restored as it was after the test
    readied = []
    ready = task.ready_the_compiler
    monkeypatch.setattr(task, "ready_the_compiler", lambda *args: readied.append(args) or ready(*args))
    # one batch size: its two compiled modes one row, each compiled warm from its own kept caches
    options = dict(compile_modes=["eager", "default", "reduce-overhead"], batch_sizes=[1], runs=4, blocks=2,
                   warmup=2, backend="aot_eager", replicates=2, keep_compiles=True,
                   compile_caches=tmp_path / "kept")
    first = run(tmp_path, replicate="r1", **options)
    assert THREADS_ENV not in os.environ  # the first replicate compiles cold: Inductor's pool as torch decides
    assert readied == [("aot_eager", "cpu", False)]  # and its compiler warmed up first, in fresh caches
    later = run(tmp_path, replicate="r2", **options)
    assert os.environ[THREADS_ENV] == "1"  # every compiled cell warm from kept caches: no pool to start
    assert readied[1:] == [("aot_eager", "cpu", True)]  # its warm-up warm too: from the host's caches
    compiled = [(a, b) for a, b in zip(first, later) if a["cell"]["compile_mode"] != "eager"]
    folders = {path for path in (tmp_path / "kept").iterdir() if path.is_dir()}
    assert len(compiled) == 2 and len(folders) == 2  # a folder a compiled cell (beside its claim's file)
    for r1, r2 in compiled:
        assert r1["cell"]["batch_size"] == r2["cell"]["batch_size"] and r2["cell"]["replicate"] == "r2"
        assert "cold_measured_in" not in r1["compile"] and r2["compile"]["cold_measured_in"] == "replicate r1"
        assert r2["compile"]["cold_calls_ms"] == r1["compile"]["cold_calls_ms"]
        assert r2["compile"]["warm_ms"] is not None  # its one compile is the warm one
        # its runs and its gate; the memory (and on a GPU the energy) the page takes from the first replicate
        assert r1["memory"]["rss_peak_increase_bytes"] is not None and r2.get("memory") is None
        assert r1["compute"]["flops"] > 0 and r2["compute"]["flops"] is None  # the FLOPs: counted once a cell
        assert r2["parity"]["parity"] == "pass" and any("taken in the cell's first replicate only" in note
                                                        for note in r2["notes"])
    # eager compiles nothing and keeps nothing; a kernel told no folder keeps none
    run(tmp_path, replicate="r3", **{**options, "keep_compiles": False})
    assert {path for path in (tmp_path / "kept").iterdir() if path.is_dir()} == folders
    third = [r for r in read_records(tmp_path / "results.jsonl") if r.cell.replicate == "r3" and r.compile.cold_ms]
    assert len(third) == 2 and all(r.compile.cold_measured_in is None for r in third)  # each compiled cold
