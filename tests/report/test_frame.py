import pandas as pd
import pytest

from bench_utils import make_record
from bench_utils.measurement.timing import Measurement
from sample_records import R


def records():
    ok = make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                          compile_mode="default", dtype="float32", device="cpu"), environment={},
                     measurement=Measurement(times_ms=[10.0, 12.0], first_call_ms=900.0),
                     compile={"cold_ms": 880.0},
                     extra={"speedup": {"mean": 1.5, "mean_ci95": [1.4, 1.6]}, "parity": {"parity": "pass"}})
    oom = make_record(dict(study="s", task="image-classification", model="resnet", batch_size=16,
                           compile_mode="default", dtype="float32", device="cpu"), environment={},
                      status="oom", error="Traceback...\ntorch.OutOfMemoryError: CUDA out of memory")
    return [ok, oom]


def test_a_task_notebook_shows_its_records_as_the_report_does(monkeypatch):
    from bench_utils.report import sections
    from bench_utils.report.i18n import Catalog

    shown = []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: shown.append(obj.data))
    sections.show_records(records(), locale="es")
    catalog = Catalog("es")
    text = shown[0]
    assert "#### " in text and catalog.t("col_speedup", mode=catalog.mode_name("default")) in text  # its headers
    assert "1,50×" in text and "1,40–1,60" in text  # rounded, with units and its interval, in the page's language
    assert "mean_ms" not in text and "speedup_ci95" not in text and "NaN" not in text  # nothing raw
    assert "torch.OutOfMemoryError: CUDA out of memory" in text  # a failed cell's reason, its last line
    assert isinstance(shown[1], bytes) and shown[1].startswith(b"\x89PNG")  # every compiled cell's speed-up
    shown.clear()
    sections.show_records([])
    assert shown == [Catalog("en").t("no_results")]


def test_results_paths_are_a_list_or_papermills_comma_separated_string_relative_to_the_project(tmp_path):
    from bench_utils.paths import PROJECT_ROOT
    from bench_utils.report.frame import project_paths

    expected = [PROJECT_ROOT / "reports" / "a", tmp_path / "b"]
    assert project_paths(f"reports/a,{tmp_path / 'b'}") == expected
    assert project_paths(["reports/a", tmp_path / "b"]) == expected
    assert project_paths("reports/a") == expected[:1]  # one folder, not its letters


def test_a_cpu_nodes_declared_kind_names_its_device():
    from bench_utils.report.frame import device_name

    record = records()[0]
    assert device_name(R({**record, "environment": {"cpu_model": "EPYC"}})) == "CPU (EPYC)"
    assert device_name(R({**record, "environment": {"cpu_model": "EPYC", "accelerator_type": "KA"}})) == "CPU (EPYC, KA)"


def test_a_capped_gpu_is_a_device_of_its_own():
    from bench_utils.report.frame import device_name

    record = {**records()[0], "cell": {**records()[0]["cell"], "device": "cuda"},
              "environment": {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}}
    assert device_name(R(record)) == "NVIDIA H100 80GB HBM3"
    capped = {**record, "config": {**record.get("config", {}), "gpu_memory_gib": 16}}
    assert device_name(R(capped)) == "NVIDIA H100 80GB HBM3 (16 GiB cap)"


def _cuda_graph_record(memory: dict, mode: str = "reduce-overhead", cuda_graphs=True) -> dict:
    MiB = 2**20
    # reserved memory: the allocator's segments, as the pool's are; allocated bytes are not set beside it
    eager = {"cuda_peak_reserved_increase_bytes": 400 * MiB, "cuda_peak_allocated_increase_bytes": 310 * MiB,
             "cuda_graph_pool_bytes": 0}
    return make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                            compile_mode=mode, dtype="float32", device="cuda:0"), environment={},
                       measurement=Measurement(times_ms=[5.0, 5.0], first_call_ms=900.0),
                       memory={**memory, "eager": eager},
                       compile={"cold_ms": 880.0, "cuda_graphs": cuda_graphs,
                                "cuda_graphs_requested": mode in ("reduce-overhead", "max-autotune")},
                       extra={"speedup": {"mean": 2.0, "mean_ci95": [1.9, 2.1]}})


def test_a_cuda_graph_modes_memory_counts_the_pool_its_replays_run_in():
    from bench_utils.report.frame import frame
    from bench_utils.report.selection import Selection, memory_table

    MiB = 2**20
    # a graph replay allocates nothing: the increase is 0 and the activations are in the 500 MiB pool
    row = frame([_cuda_graph_record({"cuda_peak_reserved_increase_bytes": 0, "cuda_peak_allocated_increase_bytes": 0,
                                     "cuda_graph_pool_bytes": 500 * MiB})]).iloc[0]
    assert row["peak_bytes"] == 500 * MiB and row["eager_peak_bytes"] == 400 * MiB
    assert row["graph_pool_bytes"] == 500 * MiB  # still shown apart
    data = frame([_cuda_graph_record({"cuda_peak_reserved_increase_bytes": 0, "cuda_graph_pool_bytes": 500 * MiB})])
    table = memory_table(data, Selection(environment=data["environment"].iloc[0], batch_size=1,
                                         mode="reduce-overhead", dtype="float32"))
    assert table["memory_ratio"].iloc[0] == 500 / 400  # like for like, never ~0


def test_a_cuda_graph_modes_memory_is_not_measured_without_its_pool():
    from bench_utils.report.frame import frame

    MiB = 2**20
    unknown_pool = frame([_cuda_graph_record({"cuda_peak_reserved_increase_bytes": 0,
                                              "cuda_graph_pool_bytes": None})]).iloc[0]
    assert unknown_pool["peak_bytes"] is None or pd.isna(unknown_pool["peak_bytes"])  # not 0: not measured
    no_graphs = frame([_cuda_graph_record({"cuda_peak_reserved_increase_bytes": 300 * MiB,
                                           "cuda_graph_pool_bytes": None}, mode="default", cuda_graphs=False)]).iloc[0]
    assert no_graphs["peak_bytes"] == 300 * MiB  # no graphs: the increase is the whole of it
    # a mode that asked for CUDA graphs and got none: its (empty) pool still counts, unmeasured it leaves no figure
    skipped = _cuda_graph_record({"cuda_peak_reserved_increase_bytes": 300 * MiB, "cuda_graph_pool_bytes": None},
                                 cuda_graphs=False)
    skipped["compile"]["cuda_graphs_requested"] = True
    assert pd.isna(frame([skipped]).iloc[0]["peak_bytes"])


def _cpu_record(memory: dict, eager: dict) -> dict:
    return make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                            compile_mode="default", dtype="float32", device="cpu"), environment={},
                       measurement=Measurement(times_ms=[5.0, 5.0], first_call_ms=900.0),
                       memory={**memory, "eager": eager}, compile={"cold_ms": 880.0},
                       extra={"speedup": {"mean": 2.0, "mean_ci95": [1.9, 2.1]}})


def measured_by(memory_table):
    """Which figure a memory row's peaks are, as the explore notebook says it."""
    from bench_utils.report.explorer_tables import memory_view
    from bench_utils.report.i18n import Catalog

    return memory_view(memory_table, Catalog("en"))["Measured by"].iloc[0]


def test_a_cpu_cells_memory_is_the_profilers_figure_where_recorded():
    from bench_utils.report.frame import frame
    from bench_utils.report.region_memory import CPU_ALLOCATOR
    from bench_utils.report.selection import Selection, memory_table

    MiB = 2**20
    # resident memory did not move (the allocator reused warm-up's blocks): the profiler's figure is shown
    record = _cpu_record({"rss_peak_increase_bytes": 20480, "cpu_activation_peak_bytes": 19 * MiB},
                         {"rss_peak_increase_bytes": 0, "cpu_activation_peak_bytes": 12 * MiB})
    data = frame([record])
    row = data.iloc[0]
    assert (row["peak_bytes"], row["eager_peak_bytes"]) == (19 * MiB, 12 * MiB)
    assert row["peak_method"] == row["eager_peak_method"] == CPU_ALLOCATOR
    table = memory_table(data, Selection(environment=data["environment"].iloc[0], batch_size=1,
                                         mode="default", dtype="float32"))
    assert table["memory_ratio"].iloc[0] == 19 / 12
    assert measured_by(table) == "CPU allocator (torch.profiler)"


def test_a_cpu_cell_whose_resident_memory_did_not_move_is_not_measurable_not_zero():
    from bench_utils.report.frame import frame
    from bench_utils.report.region_memory import NOT_MEASURABLE, RESIDENT
    from bench_utils.report.selection import Selection, memory_table

    MiB = 2**20
    # a record from before the profiler's figure: resident increases of 0 and of a few pages say nothing
    data = frame([_cpu_record({"rss_peak_increase_bytes": 0}, {"rss_peak_increase_bytes": 20480})])
    row = data.iloc[0]
    assert pd.isna(row["peak_bytes"]) and pd.isna(row["eager_peak_bytes"])
    assert row["peak_method"] == row["eager_peak_method"] == NOT_MEASURABLE
    table = memory_table(data, Selection(environment=data["environment"].iloc[0], batch_size=1,
                                         mode="default", dtype="float32"))
    assert pd.isna(table["memory_ratio"].iloc[0]) and measured_by(table) == "not measurable here"
    # a resident increase the call did make is still shown; beside a profiler figure, no ratio is taken
    mixed = frame([_cpu_record({"rss_peak_increase_bytes": 150 * MiB},
                               {"rss_peak_increase_bytes": 0, "cpu_activation_peak_bytes": 100 * MiB})])
    assert (mixed.iloc[0]["peak_bytes"], mixed.iloc[0]["peak_method"]) == (150 * MiB, RESIDENT)
    table = memory_table(mixed, Selection(environment=mixed["environment"].iloc[0], batch_size=1,
                                          mode="default", dtype="float32"))
    assert pd.isna(table["memory_ratio"].iloc[0])
    assert measured_by(table) == "eager: CPU allocator (torch.profiler), compiled: resident memory"
    # a probe that did not run (it failed: the cell's notes say why) is not measured, not unmeasurable
    failed = frame([_cpu_record({}, {"rss_peak_increase_bytes": 0})]).iloc[0]
    assert pd.isna(failed["peak_bytes"]) and failed["peak_method"] is None


def _paired_record(mode, eager_ms, compiled_ms, *, penalty_ms=0.0, batch_size=1, switch=True, cell_warmup=1,
                   timed_with=()):
    """A compiled cell's record as a kernel writes it, from a comparison on a simulated machine (``timed_with``: the
    row's modes, where it was timed in one; none: the earlier design, each mode beside an eager series of its own)."""
    from switching_machine import SwitchingMachine
    from bench_utils import compare
    from bench_utils.study.cell.cell_record import speedup_block

    machine = SwitchingMachine({"eager": eager_ms, "compiled": compiled_ms},
                               {"eager": penalty_ms, "compiled": penalty_ms})
    comparison = compare(machine.side("eager"), machine.side("compiled"), warmup=1, runs=60, blocks=6,
                         device="cpu", timer=machine, switch_calls=1 if switch else 0)
    speedup = speedup_block(comparison, tuple(timed_with))
    if not switch:  # a record of the first GPU run: none of the fields the switch calls brought
        for key in ("eager_values", "block_runs", "switch_calls", "switch_ms"):
            speedup.pop(key)
    return make_record(dict(study="s", task="image-classification", model="resnet", batch_size=batch_size,
                            compile_mode=mode, dtype="float32", device="cpu"), environment={},
                       config={"warmup": cell_warmup},  # the pairs warmed up once
                       measurement=comparison.candidate, compile={"cold_ms": 900.0},
                       memory={"eager": {"cpu_activation_peak_bytes": 2**20}},
                       extra={"speedup": speedup, "parity": {"parity": "pass"},
                              "compute": {"flops": 10**9, "eager_tflops": 0.5}})


def test_an_eager_cell_no_record_holds_is_its_first_compiled_modes_paired_eager():
    # a time limit left DETR's eager cells unrun on the H200, though both compiled cells had measured eager
    from bench_utils.report.frame import frame
    data = frame([_paired_record("reduce-overhead", 5.0, 1.0), _paired_record("default", 4.0, 2.0)])
    eager = data[data["mode"] == "eager"]
    assert len(eager) == 1
    row = eager.iloc[0]
    assert row["status"] == "ok" and row["eager_source"] == "default"  # the first mode, not the file's first
    assert row["mean_ms"] == 4.0 and row["p50_ms"] == 4.0 and row["tflops"] == 0.5
    assert row["peak_bytes"] == 2**20 and row["throughput"] == 250.0
    assert pd.isna(row["speedup"]) and row["cv"] == 0.0
    # an eager record of the cell is what the eager row is, then
    eager_record = make_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                                    compile_mode="eager", dtype="float32", device="cpu"), environment={},
                               measurement=Measurement(times_ms=[4.1, 4.1], first_call_ms=9.0))
    data = frame([_paired_record("default", 4.0, 2.0), eager_record])
    assert list(data.loc[data["mode"] == "eager", "mean_ms"]) == [4.1]
    assert data.loc[data["mode"] == "eager", "eager_source"].isna().all()


def test_a_compiled_cells_eager_side_warmed_up_otherwise_than_its_eager_cell_stands_for_no_eager_row():
    # a CUDA-graph mode warms up twice where the cell says once: resume does not count its eager cell as measured
    # (records.key.eager_side_stands_for_its_cell), and the page shows none either
    from bench_utils.records.key import eager_side_key
    from bench_utils.report.frame import frame

    other = _paired_record("reduce-overhead", 5.0, 1.0, cell_warmup=0)
    assert eager_side_key(R(other)) is None
    data = frame([other])
    assert list(data["mode"]) == ["reduce-overhead"] and not data["eager_side_stands"].any()
    same = _paired_record("reduce-overhead", 5.0, 1.0)
    assert eager_side_key(R(same)) is not None and sorted(frame([same])["mode"]) == ["eager", "reduce-overhead"]


def test_the_switch_cost_is_read_from_the_blocks_and_missing_from_records_measured_before():
    from bench_utils.report.frame import frame
    data = frame([_paired_record("default", 4.0, 2.0, penalty_ms=0.5),
                  _paired_record("default", 4.0, 2.0, penalty_ms=0.5, batch_size=4, switch=False)])
    now, before = data[data["batch_size"] == 1].iloc[0], data[data["batch_size"] == 4].iloc[0]
    assert now["switch_calls"] == 1
    assert now["switch_cost_ms"] == pytest.approx(0.5) and now["eager_switch_cost_ms"] == pytest.approx(0.5)
    assert now["outlier_shift"] == 0.0 and now["eager_interleaved_cv"] == 0.0
    assert pd.isna(before["switch_calls"]) and pd.isna(before["switch_cost_ms"])
    assert before["outlier_shift"] > 0  # its switch calls are among its runs


def test_the_switch_cost_counts_only_the_blocks_that_followed_the_other_sides():
    # pairs in the order b c | b c ...: half of each side's blocks open a pair after a block of their own side,
    # and their first call switched nothing. On the H200 counting them made ResNet's 43.2 % read 41.1 %.
    from bench_utils.report.frame import frame
    record = _paired_record("default", 4.0, 2.0, penalty_ms=0.5)
    speedup = record["speedup"]
    speedup["order"] = "bc" * (len(speedup["block_runs"]) // 2)
    switched = R(record).speedup.after_a_switch()
    steady = {"eager": 4.0, "compiled": 2.0}
    speedup["switch_ms"] = {side: [[steady[side] + (0.5 if real else 0.0)] for real in switched[side]]
                            for side in ("eager", "compiled")}
    row = frame([record]).iloc[0]
    assert row["switch_cost_ms"] == pytest.approx(0.5) and row["eager_switch_cost_ms"] == pytest.approx(0.5)
    assert row["switch_cost_share"] == pytest.approx(0.25) and row["eager_switch_cost_share"] == pytest.approx(0.125)
    del speedup["order"]  # which blocks switched cannot be told
    assert pd.isna(frame([record]).iloc[0]["switch_cost_ms"])


def test_block_clocks_give_their_ranges_and_eagers_block_means_their_trend():
    # the second H200 lease: ResNet's eager block means rose by a fifth over a cell at a steady 1980 MHz
    from bench_utils.report.frame import frame
    record = _paired_record("default", 4.0, 2.0)
    speedup = record["speedup"]
    sizes = speedup["block_runs"]
    assert len(sizes) == 6
    per_block_ms = [4.0, 4.0, 5.0, 5.0, 6.0, 6.0]  # first third 4 ms, last third 6 ms: +50 %
    speedup["eager_values"] = [ms / 1e3 for ms, size in zip(per_block_ms, sizes) for _ in range(size)]
    speedup["block_clocks"] = {
        "eager": [{"sm_clock_mhz": 1980, "temperature_c": 40}, {"sm_clock_mhz": 1755, "temperature_c": None}],
        "compiled": [{"sm_clock_mhz": 1980, "temperature_c": 55}, {"sm_clock_mhz": None, "temperature_c": 47}]}
    before = _paired_record("default", 4.0, 2.0, batch_size=4, switch=False)  # no clocks, no eager values
    data = frame([record, before])
    now, old = data[data["batch_size"] == 1].iloc[0], data[data["batch_size"] == 4].iloc[0]
    assert (now["sm_clock_min_mhz"], now["sm_clock_max_mhz"]) == (1755, 1980)
    assert (now["temperature_min_c"], now["temperature_max_c"]) == (40, 55)
    assert now["eager_trend"] == pytest.approx(0.5)
    assert all(pd.isna(old[column]) for column in ("sm_clock_min_mhz", "temperature_max_c", "eager_trend"))
