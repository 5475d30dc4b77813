"""The a-priori price of a GPU cell (``pricing.prior``): known answers on a model of round figures, and the checks of
its rates against published latencies and the H200's recorded compiles."""

from dataclasses import replace
from itertools import product
import json
import math
import statistics

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.study.pricing import prior as prior_module
from bench_utils.study.pricing.prior import Prior, Shape, Span, device_key
from bench_utils.variants import cell_plan

# A model of round figures: 134 GFLOPs of matmuls per image, 1,675 MB of eager traffic per image, 100 operators.
ROW = {"conv_gflops_per_image": 0.0, "conv_gflops_fixed": 0.0, "other_gflops_per_image": 134.0,
       "other_gflops_fixed": 0.0, "eager_mb_per_image": 1675.0, "eager_mb_fixed": 0.0, "eager_ops": 100,
       "build_s_cpu": 2.0, "cold_compile_s_cpu": 30.0}
ENERGY_SIDE = Span(1.05, 1.15, 1.35)  # a side's energy window: 8 to 11 steps of a 100 ms counter, 2.5 of polling
WARM_SHARE = 0.2                      # a warm compile over a cold one
BOOT_S = Span(7.0, 9.5, 20.0)


def ends(span):
    return span.low, span.point, span.high


def shape(mode="default", **change):
    return replace(Shape("m", 1, mode, tf32="strict", runs=300, warmup=10), **change)


@pytest.fixture
def h100():
    return Prior("H100 SXM", costs={"m": ROW})


def test_a_call_is_the_slowest_of_its_flops_its_bytes_and_its_hosts_launches(h100):
    # at the point: 35 % of the peak FLOPs, 60 % of the bandwidth, 20 us a launched operator. H100 SXM float32 without
    # TF32 (67 TFLOP/s): 134 GFLOPs take 2 ms at the peak, 5.71 ms at 35 %; the bytes 0.5 ms / 0.6; 100 launches 2 ms
    assert h100.call(shape(), "eager").point == pytest.approx(2e-3 / 0.35)
    # with TF32 (494.5 TFLOP/s) the FLOPs take 0.77 ms: the host's 2 ms bound the call
    assert h100.call(shape(tf32="on"), "eager").point == pytest.approx(2e-3)
    # compiled: half the launches (1 ms) and half the bytes (0.42 ms): still the host
    assert h100.call(shape(tf32="on"), "default").point == pytest.approx(1e-3)
    # a CUDA-graph replay launches one graph (0.08 of eager's host cost): the FLOPs bound it
    assert h100.call(shape(tf32="on"), "reduce-overhead").point == pytest.approx(134 / 494.5e3 / 0.35)
    # the gate's float64 reference: every FLOP on the float64 units (34 TFLOP/s)
    assert h100.call(shape(), cell_plan.FLOAT64).point == pytest.approx(134 / 34e3 / 0.35)
    # the ends: the low at 70 % of the peak, the high at 15 %
    call = h100.call(shape(), "eager")
    assert (call.low, call.high) == pytest.approx((2e-3 / 0.7, 2e-3 / 0.15))
    # a memory-bound call: half its bytes in 16 bit
    memory_bound = Prior("H100 SXM", costs={"m": {**ROW, "other_gflops_per_image": 0.0, "eager_mb_per_image": 16750}})
    assert memory_bound.call(shape(), "eager").point == pytest.approx(5e-3 / 0.6)
    assert memory_bound.call(shape(dtype="float16"), "eager").point == pytest.approx(2.5e-3 / 0.6)
    assert memory_bound.call(shape(), cell_plan.FLOAT64).point == pytest.approx(10e-3 / 0.6)  # float64: twice the bytes


def test_a_model_outside_the_table_or_a_dtype_the_gpu_lacks_has_no_price():
    assert Prior("T4", costs={"m": ROW}).call(shape(dtype="bfloat16"), "eager") is None
    assert Prior("T4", costs={"m": ROW}).cell(shape(dtype="bfloat16")) is None
    assert Prior("H100 SXM", costs={}).cell(shape()) is None and Prior("H100 SXM", costs={}).start("m") is None


def test_an_eager_cell_is_its_plans_steps_priced(h100):
    eager, cell = h100.call(shape(), "eager").point, h100.cell(shape("eager")).point
    # 1 s of record; the FLOP count's call and 50 us an operator; 10 warm-up and 300 timed calls; the memory probe's
    # 3 calls and 0.5 s; its energy window; the profile is a compiled cell's
    assert cell == pytest.approx(1.0 + (1 + 10 + 300 + 3) * eager + 100 * 50e-6 + 0.5 + ENERGY_SIDE.point)
    assert h100.cell(shape("eager", shares_pairs=True)) == Span.exact(0.5)  # it takes a compiled cell's pairs
    assert h100.energy(shape("eager")) == ENERGY_SIDE and h100.energy(shape()) == ENERGY_SIDE * 2


def test_a_compiled_cell_pays_its_cold_compile_and_at_its_modes_first_batch_size_a_warm_one(h100):
    cold = Span(0.6, 1.0, 2.0) * (4.9 + 0.0304 * 100)  # 7.94 s at the point for 100 operators, 0.6 to twice that
    assert ends(h100.cold_compile("m", "default")) == pytest.approx(ends(cold))
    assert ends(h100.cold_compile("m", "max-autotune")) == pytest.approx(ends(cold * 4.0))
    compiled = h100.call(shape(), "default")
    first, later = h100.cell(shape(warm=True)), h100.cell(shape(warm=False))
    assert (first - later).point == pytest.approx((cold * WARM_SHARE + compiled).point)  # a compiling call, warm
    eager = h100.cell(shape("eager"))
    assert later.point > eager.point + cold.point  # both sides timed, the gate, the profile
    assert 0 < later.low < later.point < later.high


def test_a_later_replicate_takes_its_timed_runs_and_gate_only_and_compiles_warm_where_its_cold_compile_was_kept(h100):
    first = h100.cell(shape(warm=False)).point
    later_kept = h100.cell(shape(warm=False, first=False, kept=True)).point
    later_cold = h100.cell(shape(warm=False, first=False)).point
    eager, compiled = h100.call(shape(), "eager").point, h100.call(shape(), "default").point
    cold = h100.cold_compile("m", "default").point
    assert later_cold - later_kept == pytest.approx(cold * (1 - WARM_SHARE))
    # what the first replicate takes once per cell: the FLOP count (its counting and its eager call), both memory
    # probes, both energy windows, the profile of both sides
    once = (ROW["eager_ops"] * prior_module.FLOP_COUNT_S_PER_OP + eager + 3 * (eager + compiled) + 2 * 0.5
            + 2 * ENERGY_SIDE.point + cell_plan.PROFILED_CALLS * (eager + compiled) + 2 * 0.3)
    assert first - later_cold == pytest.approx(once)
    assert h100.energy(shape(first=False)) == Span.exact(0.0)


def test_a_kernel_start_is_a_boot_and_a_share_of_the_tables_build(h100):
    # a boot of 7 to 20 s (9.5), and 0.2, 0.3 and all of the table's build
    assert ends(h100.start("m")) == pytest.approx((7.4, 10.1, 22.0))


def test_every_step_of_every_plan_has_a_price_and_a_new_one_is_an_error(h100, monkeypatch):
    from bench_utils.vocabulary import COMPILED_MODE_ORDER, CompileMode

    assert set(prior_module.MODE_COMPILE_FACTOR) == set(COMPILED_MODE_ORDER)
    for mode, shares, warm, profile, portable, shapes, kept, first in product(
            CompileMode, *[(False, True)] * 4, ("static", "dynamic"), (False, True), (False, True)):
        cell = shape(mode, shares_pairs=shares, warm=warm, profile=profile, portable_cache=portable, shapes=shapes,
                     kept=kept, first=first)
        assert h100.cell(cell).point > 0
    # a portable cache's fresh process: a boot and a warm compile, once per mode
    assert (h100.cell(shape(portable_cache=True)) - h100.cell(shape())).point == pytest.approx(
        (BOOT_S + h100.cold_compile("m", "default") * WARM_SHARE + h100.call(shape(), "default")).point)
    real = cell_plan.plan_cell

    def with_a_new_step(mode, **settings):
        plan = real(mode, **settings)
        return replace(plan, steps=plan.steps + (cell_plan.Step("calibrate the flux", "timed", ("eager",), 1),))

    monkeypatch.setattr(cell_plan, "plan_cell", with_a_new_step)
    with pytest.raises(ValueError, match="no price for a cell's step 'calibrate the flux'"):
        h100.cell(shape())


def test_the_range_holds_the_point_for_every_model_of_the_table():
    prior = Prior("H100 SXM")
    assert set(prior.costs) >= {"vit", "resnet", "detr", "maskformer", "conditional-detr"}
    for model, mode, batch in product(prior.costs, ("eager", "default", "reduce-overhead", "max-autotune"), (1, 16)):
        span = prior.cell(Shape(model, batch, mode))
        assert 0 < span.low < span.point < span.high, (model, mode, batch)
        assert 0 < prior.start(model).low < prior.start(model).point < prior.start(model).high


def test_the_priors_call_times_hold_the_guides_published_latencies():
    """The guide's A100, V100 and T4 tables (torch 2.0.1, fp32, default mode): the range holds ~90 % of its eager and
    compiled latencies, and the point is right within 25 % on the geometric mean."""
    import csv

    from bench_utils.zoo.registry import REGISTRY

    key_of = {spec.label: spec.key for spec in REGISTRY.values()}
    devices = {"A100": "A100 SXM", "V100": "V100 SXM2", "T4": "T4"}
    with open(PROJECT_ROOT / "bench_utils" / "report" / "data" / "hf_torch_compile_reference.csv") as table:
        rows = [row for row in csv.DictReader(table) if row["torch_version"] == "2.0.1" and row["status"] == "ok"]
    inside, ratios = 0, []
    for row in rows:
        cell = Shape(key_of[row["model"]], int(row["batch_size"]), "default")
        for side, published in (("eager", float(row["eager_ms"]) / 1e3), ("default", float(row["compiled_ms"]) / 1e3)):
            call = Prior(devices[row["gpu"]]).call(cell, side)
            inside += call.low <= published <= call.high
            ratios.append(published / call.point)
    assert len(ratios) == 200 and inside >= 0.85 * len(ratios)
    assert 1 / 1.25 < math.exp(statistics.fmean(map(math.log, ratios))) < 1.25


def test_a_cold_compile_follows_the_eager_operators_as_on_the_h200_host():
    # the H200's records: each cold compile inside the prior's range and within a factor 2 of its point, the fit
    # unbiased over them (geometric mean of recorded / point within 10 % of 1)
    prior, ratios = Prior("H200 SXM"), []
    for study in ("hf-guide-h200", "gpu-check-h200"):
        for line in (PROJECT_ROOT / "reports" / study / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            mode = record["cell"]["compile_mode"]
            if mode == "eager" or record["compile"].get("cold_measured_in"):
                continue  # a cold compile beside others (compiled ahead): not the lone host's figure
            cold, span = record["compile"]["cold_ms"] / 1e3, prior.cold_compile(record["cell"]["model"], mode)
            assert span.low <= cold <= span.high and 0.5 < cold / span.point < 2, (record["cell"], cold, span)
            ratios.append(cold / span.point)
    assert len(ratios) >= 27 and abs(statistics.geometric_mean(ratios) - 1) < 0.1


def test_device_names_resolve_and_unknown_ones_list_the_known():
    assert device_key("H100") == "H100 SXM" and device_key("a100-pcie") == "A100 PCIe" and device_key("L4") == "L4"
    with pytest.raises(ValueError, match=r"'RTX 4090'.*known: H100 SXM, H100 NVL, .*V100S PCIe$"):
        device_key("RTX 4090")


def test_the_table_says_where_it_came_from():
    table = json.loads(prior_module.MODEL_COSTS.read_text())
    assert table["provenance"]["script"].startswith("benchmarks/model_costs.py")
    assert {"torch", "transformers", "cpu_model", "measured"} <= set(table["provenance"])
