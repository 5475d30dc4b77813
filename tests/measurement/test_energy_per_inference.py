"""Joules per inference against a GPU whose NVML counter steps every 100 ms and samples a quarter of each step."""

import math
import random
import statistics
import sys

import pytest
import torch

from fake_nvml import SteppedEnergyGpu
from bench_utils.measurement import nvml_device, power
from bench_utils.measurement.power import EnergyProbe, per_inference
from bench_utils.measurement import energy_per_inference as energy_module
from bench_utils.measurement.energy_per_inference import (ENERGY_FALLBACK_WINDOW_S, ENERGY_POWER_REL_SE,
                                                         ENERGY_STEPS_MAX, ENERGY_STEPS_MIN, energy_per_inference)


def inference_power(t, phase):
    """A call: compute-bound for its first 40 % (550 W), memory-bound after (250 W), the whole
    drifting by +-10 % over 1.3 s (clocks, temperature)."""
    return (550.0 if phase < 0.4 else 250.0) * (1 + 0.1 * math.sin(2 * math.pi * t / 1.3))


class FakeTimer:
    """The timer energy_per_inference makes: runs ``calls`` of ``call_s`` each on the fake GPU."""

    def __init__(self, gpu, call_s):
        self.gpu, self.call_s = gpu, call_s

    def time_calls(self, fn, calls):
        self.gpu.run_calls(calls, self.call_s)
        return [self.call_s * 1e3] * calls


@pytest.fixture
def on_gpu(monkeypatch):
    """``on_gpu(gpu, call_s)``: NVML, the clock, sleeping and the timer are those of ``gpu``; no step
    known from an earlier window."""
    monkeypatch.setattr(energy_module, "_counter_steps", {})
    monkeypatch.setattr(power, "synchronize", lambda device: None)
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(gpu, call_s):
        monkeypatch.setitem(sys.modules, "pynvml", gpu.nvml())
        monkeypatch.setattr(power, "_now", gpu.now)
        monkeypatch.setattr(power, "_sleep", gpu.sleep)
        monkeypatch.setattr(energy_module, "_sleep", gpu.sleep)
        monkeypatch.setattr(energy_module, "make_timer", lambda device, sync: FakeTimer(gpu, call_s))
    return install


# 3 ms: many calls a sample; 33, 50 and 100 ms divide the step (sampled at one phase of the call without the
# drift gaps: -16 %, -32 %, -32 %); 180 ms and 1 s: longer than a step.
@pytest.mark.parametrize("call_s", [0.003, 0.0333, 0.05, 0.1, 0.18, 1.0])
def test_joules_per_inference_within_5_percent_of_the_truth(on_gpu, call_s):
    gpu = SteppedEnergyGpu(inference_power, idle_w=70.0, phase_s=0.063)
    on_gpu(gpu, call_s)
    energy = energy_per_inference(torch.device("cuda", 0), {"compiled": (None, call_s * 1e3)}, "per-call")
    block = energy["compiled"]
    error = block["joules_per_inference"] / gpu.true_joules_per_call() - 1
    assert abs(error) < 0.05
    # a read after each chunk of calls is a sample of the power: the error is within the interval they give; calls of
    # two steps or more give fewer than 8 samples (whole calls, alike): no spread is stated
    if call_s < 0.18:
        assert abs(error) <= block["power_rel_ci95"] and block["power_rel_se"] > ENERGY_POWER_REL_SE
    else:
        assert block["power_rel_se"] is None and block["power_rel_ci95"] is None
    assert block["aligned"] is True and block["counter_step_s"] == pytest.approx(0.1, abs=2e-3)
    assert (block["steps_min"], block["steps_max"], block["power_rel_se_target"]) == (
        ENERGY_STEPS_MIN, ENERGY_STEPS_MAX, ENERGY_POWER_REL_SE)
    # the power varies within a call and drifts (or a call holds many steps: too few samples to stop on): these
    # windows run to their longest, a call at most past it
    assert block["window_stopped_by"] == "steps_max"
    assert ENERGY_STEPS_MAX <= block["steps"] <= ENERGY_STEPS_MAX + math.ceil(call_s / 0.1)
    # the window integrated, step to step; where calls outlast 3/4 of a step, steps counted by the period measured at
    # entry (no earlier window here), to a step
    assert block["duration_s"] == pytest.approx(block["steps"] * 0.1, abs=2e-3 if call_s < 0.075 else 0.102)
    assert block["duration_s"] <= block["region_s"]
    # the region is the calls and the idle gaps recorded, and the gaps are at most a fifth of it
    assert block["region_s"] == pytest.approx(block["calls"] * call_s + block["idle_gaps_s"], abs=2e-3)
    assert block["idle_gaps_s"] <= 0.2 * block["region_s"]
    assert block["idle_power_w"] == pytest.approx(70.0, rel=1e-3)  # the idle step before the window


def _steady(watts=400.0, **kwargs):
    return SteppedEnergyGpu(lambda t, phase: watts, idle_w=70.0, **kwargs)


@pytest.mark.parametrize("call_s", [0.001, 0.005, 0.02])
def test_a_steady_load_stops_both_sides_at_the_minimum_within_3_seconds(on_gpu, call_s):
    gpu = _steady(phase_s=0.037)
    on_gpu(gpu, call_s)
    energy = energy_per_inference(torch.device("cuda", 0), {"eager": (None, call_s * 1e3),
                                                            "compiled": (None, call_s * 1e3)}, "per-call")
    assert gpu.now() <= 3.0  # both sides, the polling for the steps at each end included (was 10.8 s)
    for side in ("eager", "compiled"):
        block = energy[side]
        assert block["window_stopped_by"] == "power_rel_se" and block["steps"] == ENERGY_STEPS_MIN
        assert block["power_rel_se"] <= ENERGY_POWER_REL_SE
        assert block["duration_s"] == pytest.approx(ENERGY_STEPS_MIN * 0.1, abs=1e-3)
        assert block["joules_per_inference"] == pytest.approx(400.0 * call_s, rel=5e-3)
        assert block["note"] is None


def showing_its_first_step_late(gpu, late_s):
    """``gpu``'s counter shows its first step ``late_s`` late: the step measured at entry strays, as the H200's did
    (89 to 105 ms for a counter of 100 ms)."""
    first, before, stepping = gpu.next_step, int(gpu.counter_j * 1000), gpu.energy_mj
    gpu.energy_mj = lambda: before if first <= gpu.time < first + late_s else stepping()
    return gpu


def test_the_second_side_plans_its_gaps_on_the_step_averaged_over_the_first(on_gpu, monkeypatch):
    gpu = showing_its_first_step_late(_steady(phase_s=0.037), 0.011)
    on_gpu(gpu, 0.005)
    planned, real_drift = [], energy_module.drift_s
    monkeypatch.setattr(energy_module, "drift_s", lambda *plan: planned.append(plan[2:]) or real_drift(*plan))
    energy = energy_per_inference(torch.device("cuda", 0), {"eager": (None, 5.0), "compiled": (None, 5.0)}, "per-call")
    # the entry's step 11 ms short, yet the window is dated by the steps' mean period
    assert energy["eager"]["counter_step_s"] == pytest.approx(0.089, abs=2e-3)
    assert energy["eager"]["duration_s"] == pytest.approx(energy["eager"]["steps"] * 0.1, abs=1e-3)
    # the first: the step measured at entry, 11 ms short, taken as uncertain; the second: the first window's average,
    # to a poll over 9 steps
    assert planned[0][0] == pytest.approx(0.089, abs=2e-3) and planned[0][1] == energy_module.ENERGY_STEP_STRAY
    assert planned[1][0] == pytest.approx(0.1, abs=1e-4) and planned[1][1] == 0.0
    assert energy_module._counter_steps["cuda:0"] == pytest.approx(0.1, abs=1e-4)


def _noisy_side(on_gpu, sd, seed, call_s=0.005):
    """One side on a steady GPU whose every step's sample is off by a normal error of relative ``sd``."""
    rng = random.Random(seed)
    gpu = _steady(phase_s=rng.uniform(0.0, 0.1), dt=1e-3, step_factor=lambda: 1 + sd * rng.gauss(0.0, 1.0))
    on_gpu(gpu, call_s)
    energy_module._counter_steps.clear()
    block = energy_per_inference(torch.device("cuda", 0), {"compiled": (None, call_s * 1e3)}, "per-call")["compiled"]
    return block, block["joules_per_inference"] / gpu.true_joules_per_call() - 1


def test_a_noisy_counter_grows_the_window_until_the_stated_error_is_met_or_the_maximum(on_gpu):
    # 6 % a step: a standard error of 2.1 % over 8 steps, 1.8 % over 11: some windows stop at 8, others grow
    blocks = [_noisy_side(on_gpu, 0.06, seed)[0] for seed in range(60)]
    for block in blocks:
        assert ENERGY_STEPS_MIN <= block["steps"] <= ENERGY_STEPS_MAX
        if block["window_stopped_by"] == "power_rel_se":
            assert block["power_rel_se"] <= ENERGY_POWER_REL_SE
        else:
            assert block["window_stopped_by"] == "steps_max" and block["steps"] == ENERGY_STEPS_MAX
            assert block["power_rel_se"] > ENERGY_POWER_REL_SE
    lengths = {block["steps"] for block in blocks}
    assert ENERGY_STEPS_MIN in lengths and ENERGY_STEPS_MAX in lengths and len(lengths) >= 3
    # 15 %: the target out of reach, every window at its longest
    for seed in range(10):
        block = _noisy_side(on_gpu, 0.15, seed)[0]
        assert block["window_stopped_by"] == "steps_max" and block["steps"] == ENERGY_STEPS_MAX


@pytest.mark.parametrize("sd", [0.04, 0.1])
def test_the_stated_uncertainty_is_the_true_one(on_gpu, sd):
    """Over 400 windows: the recorded standard error is the errors' own, and the 95 % interval holds the truth in
    about 95 % of them (at 4 % a step most stop early, on their spread: that stopping does not bias it)."""
    runs = [_noisy_side(on_gpu, sd, seed) for seed in range(400)]
    errors = [error for _, error in runs]
    rms = math.sqrt(statistics.fmean(error ** 2 for error in errors))
    stated = statistics.fmean(block["power_rel_se"] for block, _ in runs)
    truth = statistics.fmean(sd / math.sqrt(block["steps"]) for block, _ in runs)  # sd / sqrt(n) of each window
    assert stated == pytest.approx(truth, rel=0.12) and rms == pytest.approx(truth, rel=0.12)
    covered = sum(abs(error) <= block["power_rel_ci95"] for block, error in runs) / len(runs)
    assert 0.92 <= covered <= 0.98


def test_a_counter_that_never_steps_gets_the_fixed_window_with_a_note(on_gpu):
    gpu = _steady(step_s=1e6)
    on_gpu(gpu, 0.005)
    block = energy_per_inference(torch.device("cuda", 0), {"compiled": (None, 5.0)}, "per-call")["compiled"]
    assert block["aligned"] is False and block["counter_step_s"] is None and block["steps"] is None
    assert block["window_stopped_by"] == "fixed_window"
    assert block["region_s"] is None and block["joules_per_inference"] is None  # the counter never moved: no energy
    assert block["calls"] * 0.005 == pytest.approx(ENERGY_FALLBACK_WINDOW_S, abs=0.01)
    assert "did not step within 1 s" in block["note"] and "step unknown: a fixed window of 1 s" in block["note"]
    assert gpu.now() <= 1.0 + ENERGY_FALLBACK_WINDOW_S + 0.05  # the wait for a step, then the window


def test_a_counter_whose_step_is_unknown_is_read_around_the_fixed_window(on_gpu):
    # steps at 0.5 s, then every 1.5 s: the first within the second of waiting, not the next
    gpu = _steady(step_s=1.5, phase_s=-1.0)
    on_gpu(gpu, 0.005)
    block = energy_per_inference(torch.device("cuda", 0), {"compiled": (None, 5.0)}, "per-call")["compiled"]
    assert block["aligned"] is False and block["counter_step_s"] is None and block["power_rel_se"] is None
    assert block["window_stopped_by"] == "fixed_window" and "fixed window of 1 s, not aligned" in block["note"]
    assert block["region_s"] == pytest.approx(ENERGY_FALLBACK_WINDOW_S, abs=0.01)  # the wait left out of it
    assert block["joules_per_inference"] is not None  # one step of 1.5 s in a 1 s window: a figure, off, and said


def test_a_counter_that_stops_stepping_ends_the_window_at_its_time_limit(on_gpu):
    gpu = _steady(phase_s=0.037)
    on_gpu(gpu, 0.005)
    stepping = gpu.energy_mj

    def frozen_after_half_a_second():
        if gpu.time > 0.5:
            gpu.next_step = math.inf
        return stepping()

    gpu.energy_mj = frozen_after_half_a_second
    block = energy_per_inference(torch.device("cuda", 0), {"compiled": (None, 5.0)}, "per-call")["compiled"]
    assert block["window_stopped_by"] == "time_limit" and block["steps"] < ENERGY_STEPS_MIN
    assert "stopped stepping" in block["note"]
    assert block["region_s"] == pytest.approx((ENERGY_STEPS_MAX + 2) * 0.1, abs=0.02)


def test_an_unaligned_half_second_window_is_off_by_more_than_5_percent(on_gpu):
    # What energy_per_inference did before: the counter read at arbitrary times around 0.5 s of calls.
    call_s = 0.037
    errors = []
    for start in (0.0, 0.03, 0.06, 0.09):
        gpu = SteppedEnergyGpu(inference_power, idle_w=70.0)
        gpu.time = start
        on_gpu(gpu, call_s)
        calls = 0
        with EnergyProbe(torch.device("cuda", 0)) as probe:
            while gpu.now() - start < 0.5:
                gpu.run_calls(3, call_s)
                calls += 3
        errors.append(abs(per_inference(probe.report, calls) / gpu.true_joules_per_call() - 1))
    assert max(errors) > 0.05  # up to a step at each end of five, and five samples of a quarter


def test_without_an_energy_counter_no_calls_are_run(on_gpu, monkeypatch):
    gpu = SteppedEnergyGpu(inference_power)
    on_gpu(gpu, 0.01)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: nothing to integrate
    energy = energy_per_inference(torch.device("cuda", 0), {"eager": (None, 10.0)}, "per-call")
    assert energy["eager"]["joules_per_inference"] is None and energy["eager"]["calls"] == 0
    assert energy["eager"]["window_stopped_by"] is None and energy["eager"]["idle_gaps_s"] is None
    assert gpu.runs == [] and gpu.now() == 0.0  # no GPU time spent on a figure that cannot be had


def test_no_energy_on_a_cpu():
    assert energy_per_inference(torch.device("cpu"), {"eager": (None, 1.0)}, "per-call") is None
