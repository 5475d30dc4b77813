from dataclasses import replace
import statistics

import pytest

from bench_utils.settings import Settings
from bench_utils.measurement.timing import Measurement
from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.build import make_record, measurement_settings
from bench_utils.study.pricing import prior as prior_module
from bench_utils.study.pricing.device_prices import records_on_device
from bench_utils.study.pricing.prior import (ENDS, OPTIMISTIC, PESSIMISTIC, SYNC_S, TYPICAL, Assumptions, CellShape,
                                              Prior, Span, device_key, load_model_costs)
from sample_records import R, Rs, ok_record

# A model of round figures: 134 GFLOPs of matmuls per image, 1,675 MB of eager traffic per image, 100 kernels.
ROW = {"conv_gflops_per_image": 0.0, "conv_gflops_fixed": 0.0, "other_gflops_per_image": 134.0,
       "other_gflops_fixed": 0.0, "eager_mb_per_image": 1675.0, "eager_mb_fixed": 0.0, "eager_ops": 100,
       "build_s_cpu": 2.0, "cold_compile_s_cpu": 30.0}
HALF = Assumptions(flop_efficiency=0.5, bandwidth_efficiency=0.5, host_s_per_kernel=10e-6, fused_kernel_share=0.5,
                   graph_kernel_share=0.05, device_s_per_kernel=1e-6, compiled_traffic=0.5, compile_factor=1.0,
                   warm_compile_share=0.5, start_s=10.0, build_factor=1.0, energy_steps=8)
H100_ENV = {"torch_version": "2.11.0", "driver_version": "580.1",
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}


def shape(batch=1, mode="default", tf32="strict", dtype="float32", runs=300, warmup=10):
    return CellShape("m", batch, mode, dtype, tf32, runs, warmup)


def test_a_call_is_the_roofline_or_the_hosts_launches_whichever_is_slower():
    prior = Prior("H100 SXM", costs={"m": ROW})
    # H100 SXM float32 without TF32: 67 TFLOP/s; at half of it 134 GFLOPs take 4 ms. The traffic,
    # 1,675 MB at half of 3,350 GB/s, takes 1 ms: compute bound. 100 kernels add 0.1 ms on the device;
    # the host's 100 launches at 10 us (1 ms) hide behind it.
    assert prior.call_seconds(shape(), "eager", HALF) == pytest.approx(4.1e-3 + SYNC_S)
    # TF32 on (policy "on"): 494.5 TFLOP/s, so 0.54 ms of compute; the 1 ms of traffic now bounds it
    assert prior.call_seconds(shape(tf32="on"), "eager", HALF) == pytest.approx(1.1e-3 + SYNC_S)
    # compiled: half the traffic (0.5 ms) and half the kernels (0.05 ms): 134 / 247.25 TFLOP/s = 0.542 ms
    assert prior.call_seconds(shape(tf32="on"), "default", HALF) == pytest.approx(
        134e9 / 247.25e12 + 50e-6 + SYNC_S)
    # a tiny batch is launch bound: the host's 1 ms, not the 0.04 ms of compute
    tiny = Prior("H100 SXM", costs={"m": {**ROW, "other_gflops_per_image": 1.34, "eager_mb_per_image": 16.75}})
    assert tiny.call_seconds(shape(), "eager", HALF) == pytest.approx(1e-3 + SYNC_S)
    # a CUDA-graph replay: its host cost a twentieth of eager's (0.05 ms), the device's 0.04 + 0.05 ms bound it
    assert tiny.call_seconds(shape(mode="reduce-overhead"), "reduce-overhead", HALF) == pytest.approx(
        1.34e9 / 33.5e12 + 50e-6 + SYNC_S)


def test_work_grows_with_the_batch_and_halves_its_bytes_in_16_bit():
    prior = Prior("A100 SXM", costs={"m": ROW})
    one, four = (prior.call_seconds(shape(batch=b), "eager", HALF) for b in (1, 4))
    assert (four - SYNC_S) > 3.9 * (one - SYNC_S)
    assert Prior("T4", costs={"m": ROW}).call_seconds(shape(dtype="bfloat16"), "eager", HALF) is None  # no BF16
    memory_bound = Prior("L4", costs={"m": {**ROW, "other_gflops_per_image": 0.0}})
    full, half = (memory_bound.call_seconds(shape(dtype=d), "eager", HALF) for d in ("float32", "float16"))
    assert half - SYNC_S - 1e-4 == pytest.approx((full - SYNC_S - 1e-4) / 2)


def test_the_range_holds_the_point_estimate_for_every_model_of_the_table():
    prior = Prior("H100 SXM")
    assert set(load_model_costs()) >= {"vit", "resnet", "detr", "maskformer", "conditional-detr"}
    for model in load_model_costs():
        for mode in ("eager", "default", "reduce-overhead", "max-autotune"):
            for batch in (1, 16):
                span = prior.cell(CellShape(model, batch, mode, "float32", "default", 300, 10))
                assert 0 < span.low < span.point < span.high, (model, mode, batch)
        start = prior.start(model)
        assert 0 < start.low < start.point < start.high
    assert [ends.flop_efficiency for ends in ENDS] == sorted([ends.flop_efficiency for ends in ENDS], reverse=True)
    assert OPTIMISTIC.host_s_per_kernel < TYPICAL.host_s_per_kernel < PESSIMISTIC.host_s_per_kernel


def test_a_cell_counts_what_the_cell_does_around_its_timed_runs():
    prior = Prior("H100 SXM", costs={"m": ROW})
    compiled, eager = shape(), shape(mode="eager")
    shared = prior.raw_cell(eager, shares_pairs=True)
    alone = prior.raw_cell(eager)
    assert shared.point < 1 < alone.point  # an eager cell taking a compiled cell's pairs times nothing
    # the first batch size of a mode also compiles warm; a compiled cell times both sides
    assert prior.raw_cell(compiled, warm=True).point > prior.raw_cell(compiled, warm=False).point
    cold = Prior.compile_seconds(ROW, "default", TYPICAL)  # its operators' cold compile on a GPU host
    assert prior.raw_cell(compiled, warm=False).point > alone.point + cold
    assert prior.raw_cell(compiled, warm=True).point - prior.raw_cell(compiled, warm=False).point == pytest.approx(
        cold * TYPICAL.warm_compile_share)
    more_runs = prior.raw_cell(shape(runs=3000), warm=False).point - prior.raw_cell(compiled, warm=False).point
    assert more_runs == pytest.approx(2700 * (prior.call_seconds(compiled, "eager", TYPICAL)
                                              + prior.call_seconds(compiled, "default", TYPICAL)))
    assert prior.raw_cell(CellShape("not-in-table", 1, "default", "float32", "default", 300, 10)) is None


def test_a_compiled_cells_energy_windows_cost_under_3_seconds_on_a_100_ms_counter(monkeypatch):
    side = Prior.energy_side_seconds
    assert side(0.005, 8) == pytest.approx(0.8 + 0.25)  # 40 chunks of 20 ms, and 2.5 steps of polling
    assert side(0.064, 8) == pytest.approx(13 * 0.064 + 0.25)  # whole calls: 0.832 s
    assert side(1.0, 8) == pytest.approx(1.0 + 0.25)  # a call longer than the window is the window
    for call_s in (0.001, 0.02, 0.05):  # both sides, as long as they run (11 steps)
        assert 2 * side(call_s, PESSIMISTIC.energy_steps) <= 3.0
    # the cell counts both sides' windows: 2.3 s at the point for calls of a few milliseconds (was 10 s)
    prior = Prior("H100 SXM", costs={"m": ROW})
    with_energy = prior.raw_cell(shape(), warm=False).point
    monkeypatch.setattr(Prior, "energy_side_seconds", staticmethod(lambda call_s, steps: 0.0))
    eager, compiled = (prior.call_seconds(shape(), side_, TYPICAL) for side_ in ("eager", "default"))
    assert with_energy - prior.raw_cell(shape(), warm=False).point == pytest.approx(
        side(eager, TYPICAL.energy_steps) + side(compiled, TYPICAL.energy_steps))
    assert side(eager, TYPICAL.energy_steps) + side(compiled, TYPICAL.energy_steps) == pytest.approx(2.3)


def record_on(environment, batch, cell_s, mode="default", startup_s=0.0, energy_s=0.0, **phases):
    fields = dict(study="t", task="image-classification", model="m", batch_size=batch, compile_mode=mode,
                  dtype="float32", device="cuda")
    config = measurement_settings(Settings(blocks=30, tf32="strict"))
    return make_record(fields, measurement=Measurement([1.0, 2.0], 1.0), config=config, environment=environment,
                       compile={"warm_ms": 1.0},
                       extra={"phases": {"cell_s": cell_s, "startup_s": startup_s, "energy_s": energy_s, **phases}})


def test_calibration_moves_the_prior_toward_the_cells_recorded_on_the_device():
    # the work apart from the energy windows is scaled; the windows are the design's: the first H200 records
    # spent 10.8 s in 5-second windows, which must not scale the cells that no longer take them
    prior = Prior("H100 SXM", costs={"m": ROW})
    work, energy = prior.parts(shape(batch=4), False, True)
    raw = work

    def recorded_cell(batch, ratio, **phases):
        cell_work = prior.parts(shape(batch=batch), False, True)[0].point
        return record_on(H100_ENV, batch, ratio * cell_work + 10.8, energy_s=10.8, **phases)

    recorded = [recorded_cell(1, 2, startup_s=50.0), recorded_cell(16, 4)]
    a100 = {**H100_ENV, "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]}
    assert records_on_device(Rs([*recorded, record_on(a100, 4, 1.0)]), "H100 SXM") == Rs(recorded)
    shared = record_on(H100_ENV, 4, 50.0, mode="eager")  # an eager cell on shared pairs: says nothing of the rest
    shared["shared_measurement"] = {"with_compile_mode": "default"}
    calibrated = prior.calibrate(Rs([*recorded, shared]))
    assert calibrated.calibrated_on == 2 and prior.calibrated_on == 0
    span = calibrated.cell(shape(batch=4))
    # the median of the ratios 2 and 4, and their spread, on the work; today's windows beside it
    assert span.point == pytest.approx(3 * raw.point + energy.point)
    assert span.low == pytest.approx(2 * raw.point + energy.low) and span.high == pytest.approx(4 * raw.point + energy.high)
    assert calibrated.start("m").point == pytest.approx(50.0)  # the one recorded kernel start
    # the factors themselves (the pipeline's cold compiles take them too), and none before calibration
    ratio = calibrated.work_ratio("m")
    assert (ratio.low, ratio.point, ratio.high) == pytest.approx((2, 3, 4)) and prior.work_ratio("m").point == 1.0
    # one recorded cell: its ratio, with at least +-25 % around it
    one = prior.calibrate(Rs(recorded[:1])).cell(shape(batch=4))
    assert (one.low, one.point, one.high) == pytest.approx((1.6 * raw.point + energy.low, 2 * raw.point + energy.point,
                                                            2.5 * raw.point + energy.high))


def test_a_wait_for_a_compile_process_calibrates_nothing():
    # the first pipelined H200 lease's cells waited 10.5 to 16.6 s for compile processes: the pipeline's time
    # (``pricing.pipeline``), which scaled into the cell's work would be counted again in every cell priced from it
    prior = Prior("H100 SXM", costs={"m": ROW})
    work = prior.parts(shape(batch=4), False, True)[0].point
    waited = record_on(H100_ENV, 4, 2 * work + 12.0, compile_wait_s=12.0)
    assert prior.calibrate(Rs([waited])).model_ratios["m"] == [pytest.approx(2.0)]


def test_a_model_with_recorded_cells_is_calibrated_by_its_own_others_by_all():
    # the H200: Mask2Former took twice its prior where the other models took about it
    prior = Prior("H100 SXM", costs={"m": ROW, "big": ROW})
    work, energy = prior.parts(shape(batch=4), False, True)

    def recorded_cell(model, batch, ratio):
        record = record_on(H100_ENV, batch, ratio * prior.parts(shape(batch=batch), False, True)[0].point)
        record["cell"]["model"] = model
        return record

    calibrated = prior.calibrate(Rs([recorded_cell("m", 1, 1.0), recorded_cell("m", 16, 1.2),
                                  recorded_cell("m", 4, 1.1), recorded_cell("big", 1, 2.0),
                                  recorded_cell("big", 16, 2.4)]))
    big = calibrated.cell(replace(shape(batch=4), model="big"))
    assert big.point == pytest.approx(2.2 * work.point + energy.point)  # the median of its own two
    # its own spread, at least +-25 % around the median: 2.2 / 1.25 to 2.2 x 1.25
    assert big.low == pytest.approx(1.76 * work.point + energy.low)
    assert big.high == pytest.approx(2.75 * work.point + energy.high)
    calibrated.costs["new"] = ROW
    new = calibrated.cell(replace(shape(batch=4), model="new"))
    assert new.point == pytest.approx(1.2 * work.point + energy.point)  # the median over all five


def test_device_names_resolve_and_unknown_ones_list_the_known():
    assert device_key("H100") == "H100 SXM" and device_key("a100-pcie") == "A100 PCIe" and device_key("L4") == "L4"
    with pytest.raises(ValueError, match=r"'RTX 4090'.*known: H100 SXM, H100 NVL, .*V100S PCIe$"):
        device_key("RTX 4090")


def test_the_price_is_the_cells_plan_its_calls_at_each_sides_seconds(monkeypatch):
    # the cell's steps and calls are its plan's (variants.cell_plan), the one study.cell runs: change a count there
    # and the price moves with it (tests/study/cell/test_measured_cell_plan.py sees the cell move too)
    from bench_utils.variants import cell_plan

    prior = Prior("H100 SXM", costs={"m": ROW})
    graphs = shape(mode="reduce-overhead", warmup=1)
    eager, replay = (prior.call_seconds(graphs, side, TYPICAL) for side in ("eager", "reduce-overhead"))
    once = prior.raw_cell(graphs).point
    assert cell_plan.plan_cell("reduce-overhead", warmup=1, runs=300, cuda=True).warmup == 2
    assert prior.raw_cell(shape(mode="reduce-overhead", warmup=2)).point == pytest.approx(once)  # twice either way
    monkeypatch.setattr(cell_plan, "CUDA_GRAPH_WARMUP", 4)  # two more warm-up calls a side
    assert prior.raw_cell(graphs).point - once == pytest.approx(2 * (eager + replay))
    monkeypatch.setattr(cell_plan, "MEMORY_CALLS", cell_plan.MEMORY_CALLS + 2)  # and two more in each side's probe
    assert prior.raw_cell(graphs).point - once == pytest.approx(4 * (eager + replay))


def test_a_later_replicate_pays_a_warm_compile_not_a_cold_one(monkeypatch):
    from types import SimpleNamespace

    prior = Prior("H100 SXM", costs={"m": ROW})
    first = prior.raw_cell(shape(), warm=False).point
    later = prior.raw_cell(replace(shape(), cold_kept=True), warm=False).point
    cold = Prior.compile_seconds(ROW, "default", TYPICAL)
    assert first - later == pytest.approx(cold * (1 - TYPICAL.warm_compile_share))
    # the grid's later replicates, and the records of cells that compiled warm from a kept cold compile
    cell = SimpleNamespace(model="m", batch_size=1, compile_mode="default", dtype="float32",
                           settings=Settings(replicate="r2"))
    assert CellShape.of_cell(cell).cold_kept and not CellShape.of_cell(replace_settings(cell, "r1")).cold_kept
    # a later replicate whose first an earlier run measured (on a lease since ended) finds nothing kept: cold, unless
    # a compile process takes it, as it takes the first of a cell's replicates in the run
    assert not CellShape.of_cell(cell, kept_before=False).cold_kept
    assert CellShape.of_cell(cell, ahead=True, kept_before=False).cold_kept
    assert CellShape.of_cell(replace_settings(cell, "r1"), kept_before=True).cold_kept  # measured again, say
    # a dynamic batch and an AOTInductor package keep nothing between processes (``task._kept``): cold in each
    dynamic = SimpleNamespace(**{**vars(cell), "settings": replace(cell.settings, shapes="dynamic")})
    aot = SimpleNamespace(**{**vars(cell), "compile_mode": "aot-inductor"})
    for other in (dynamic, aot):
        assert not CellShape.of_cell(other).cold_kept and not CellShape.of_cell(other, ahead=True).cold_kept
    # nor the figures taken once per cell: its energy windows, memory probes and profile
    assert CellShape.of_cell(cell).first_replicate is False
    assert prior.raw_cell(replace(shape(), cold_kept=True, first_replicate=False), warm=False).point < later - 2.0
    kept = R(ok_record(compile={"mode": "default", "cold_ms": 100.0, "cold_measured_in": "replicate r1"}))
    assert CellShape.of_record(kept).cold_kept
    assert not CellShape.of_record(R(ok_record(compile={"mode": "default", "cold_ms": 100.0}))).cold_kept


def replace_settings(cell, replicate):
    from types import SimpleNamespace

    return SimpleNamespace(**{**vars(cell), "settings": replace(cell.settings, replicate=replicate)})


def test_every_step_of_every_plan_has_a_price_and_a_new_one_is_an_error(monkeypatch):
    from itertools import product

    from bench_utils.variants import cell_plan
    from bench_utils.vocabulary import COMPILED_MODE_ORDER, CompileMode

    prior = Prior("H100 SXM", costs={"m": ROW})
    assert set(prior_module.MODE_COMPILE_FACTOR) == set(COMPILED_MODE_ORDER)
    for mode, shares, warm, profile, portable, shapes, kept in product(
            CompileMode, (False, True), (False, True), (False, True), (False, True), ("static", "dynamic"),
            (False, True)):
        cell = replace(shape(mode=mode), profile=profile, portable_cache=portable, shapes=shapes, cold_kept=kept)
        assert prior.raw_cell(cell, shares_pairs=shares, warm=warm).point > 0
    # a portable cache's fresh process: a new interpreter compiling from a warm cache, once per mode
    portable = replace(shape(), portable_cache=True)
    assert prior.raw_cell(portable).point - prior.raw_cell(shape()).point == pytest.approx(
        TYPICAL.start_s + Prior.compile_seconds(ROW, "default", TYPICAL) * TYPICAL.warm_compile_share)
    assert prior.raw_cell(portable, warm=False).point == pytest.approx(prior.raw_cell(shape(), warm=False).point)
    real = cell_plan.plan_cell

    def with_a_new_step(mode, **settings):
        plan = real(mode, **settings)
        return replace(plan, steps=plan.steps + (cell_plan.Step("calibrate the flux", "timed", ("eager",), 1),))

    monkeypatch.setattr(cell_plan, "plan_cell", with_a_new_step)
    with pytest.raises(ValueError, match="no price for a cell's step 'calibrate the flux'"):
        prior.raw_cell(shape())


def test_the_table_says_where_it_came_from():
    import json

    table = json.loads((PROJECT_ROOT / "bench_utils" / "study" / "pricing" / "data" / "model_costs.json").read_text())
    assert table["provenance"]["script"].startswith("benchmarks/model_costs.py")
    assert {"torch", "transformers", "cpu_model", "measured"} <= set(table["provenance"])


def test_span_adds_each_end():
    assert Span(1, 2, 3) + Span(10, 20, 30) == Span(11, 22, 33) and Span.exact(4) == Span(4, 4, 4)


def test_the_priors_call_times_hold_the_guides_published_latencies():
    """The guide's A100, V100 and T4 tables (torch 2.0.1, fp32, default mode): its eager and compiled latencies
    fall within the prior's range for most cells, and its point is right within a factor of 1.3 on average."""
    import csv
    import math

    from bench_utils.zoo.registry import REGISTRY

    key_of = {spec.label: spec.key for spec in REGISTRY.values()}
    devices = {"A100": "A100 SXM", "V100": "V100 SXM2", "T4": "T4"}
    inside, ratios = 0, []
    with open(PROJECT_ROOT / "bench_utils" / "report" / "data" / "hf_torch_compile_reference.csv") as table:
        rows = [row for row in csv.DictReader(table) if row["torch_version"] == "2.0.1" and row["status"] == "ok"]
    for row in rows:
        prior = Prior(devices[row["gpu"]])
        cell = CellShape(key_of[row["model"]], int(row["batch_size"]), "default", "float32", "default", 300, 10)
        for side, published in (("eager", row["eager_ms"]), ("default", row["compiled_ms"])):
            low, point, high = (prior.call_seconds(cell, side, ends) * 1e3 for ends in ENDS)
            inside += low <= float(published) <= high
            ratios.append(float(published) / point)
    assert len(ratios) == 200
    assert inside >= 0.8 * len(ratios)
    assert 1 / 1.3 < math.exp(sum(map(math.log, ratios)) / len(ratios)) < 1.3


def test_a_cold_compile_follows_the_eager_operators_as_on_the_h200_host():
    # the H200's records: each cold compile inside the prior's range and within a factor 2 of its typical figure,
    # the fit unbiased over them (geometric mean of recorded / typical within 10 % of 1)
    import json
    from bench_utils.paths import PROJECT_ROOT
    prior = Prior("H200 SXM")
    ratios = []
    for study in ("hf-guide-h200", "gpu-check-h200"):
        for line in (PROJECT_ROOT / "reports" / study / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            mode = record["cell"]["compile_mode"]
            if mode == "eager" or record["compile"].get("cold_measured_in"):
                continue  # a cold compile beside others (compiled ahead): not the lone host's figure
            row, cold = prior.costs[record["cell"]["model"]], record["compile"]["cold_ms"] / 1e3
            low, point, high = (Prior.compile_seconds(row, mode, ends) for ends in ENDS)
            assert low <= cold <= high and 0.5 < cold / point < 2, (record["cell"], cold, point)
            ratios.append(cold / point)
    assert len(ratios) >= 27 and abs(statistics.geometric_mean(ratios) - 1) < 0.1

def test_a_kernel_started_ahead_calibrates_the_ahead_start_and_never_the_cold_one():
    prior = Prior("H100 SXM", costs={"m": ROW})
    assert prior.raw_start("m").point - prior.raw_start("m", ahead=True).point == pytest.approx(
        TYPICAL.start_s + ROW["build_s_cpu"] * TYPICAL.build_factor - TYPICAL.ahead_start_s)  # boot and build
    ahead = record_on(H100_ENV, 1, 5.0, startup_s=3 * prior.raw_start("m", ahead=True).point, started_ahead_s=8.0)
    calibrated = prior.calibrate(Rs([ahead]))
    assert calibrated.start("m") == prior.start("m")  # no cold start recorded: the prior's
    assert calibrated.start("m", ahead=True).point == pytest.approx(3 * prior.raw_start("m", ahead=True).point)
    cold = record_on(H100_ENV, 1, 5.0, startup_s=50.0)
    both = prior.calibrate(Rs([ahead, cold]))
    assert both.start("m").point == pytest.approx(50.0) and both.start("m", ahead=True) == calibrated.start("m", ahead=True)
