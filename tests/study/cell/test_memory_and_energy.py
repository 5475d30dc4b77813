"""Joules per inference against a GPU whose NVML counter steps every 100 ms and samples a quarter of each step."""

import math
import sys

import pytest
import torch

from fake_nvml import SteppedEnergyGpu
from bench_utils.measurement import nvml_device, power
from bench_utils.measurement.power import EnergyProbe, per_inference
from bench_utils.study.cell import memory_and_energy as after_timing
from bench_utils.study.cell.memory_and_energy import ENERGY_WINDOW_S, energy_per_inference


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
    """``on_gpu(gpu, call_s)``: NVML, the clock, sleeping and the timer are those of ``gpu``."""
    monkeypatch.setattr(power, "synchronize", lambda device: None)
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(gpu, call_s):
        monkeypatch.setitem(sys.modules, "pynvml", gpu.nvml())
        monkeypatch.setattr(power, "_now", gpu.now)
        monkeypatch.setattr(power, "_sleep", gpu.sleep)
        monkeypatch.setattr(after_timing, "_sleep", gpu.sleep)
        monkeypatch.setattr(after_timing, "make_timer", lambda device, sync: FakeTimer(gpu, call_s))
    return install


# 3 ms: many calls a sample; 33, 50 and 100 ms divide the step (sampled at one phase of the call without the
# drift gaps: -16 %, -32 %, -32 %); 180 ms and 1 s: longer than a step.
@pytest.mark.parametrize("call_s", [0.003, 0.0333, 0.05, 0.1, 0.18, 1.0])
def test_joules_per_inference_within_5_percent_of_the_truth(on_gpu, call_s):
    gpu = SteppedEnergyGpu(inference_power, idle_w=70.0, phase_s=0.063)
    on_gpu(gpu, call_s)
    energy = energy_per_inference(torch.device("cuda", 0), {"compiled": (None, call_s * 1e3)}, "per-call")
    block = energy["compiled"]
    assert block["joules_per_inference"] == pytest.approx(gpu.true_joules_per_call(), rel=0.05)
    assert block["aligned"] is True and block["counter_step_s"] == pytest.approx(0.1, abs=2e-3)
    assert block["window_min_s"] == ENERGY_WINDOW_S >= 5.0
    assert ENERGY_WINDOW_S <= block["duration_s"] <= block["region_s"]  # the window integrated, recorded
    assert block["calls"] * call_s <= block["region_s"] < block["calls"] * call_s * 1.05  # the drift gaps: < 5 %


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
    assert gpu.runs == [] and gpu.now() == 0.0  # no GPU time spent on a figure that cannot be had


def test_no_energy_on_a_cpu():
    assert energy_per_inference(torch.device("cpu"), {"eager": (None, 1.0)}, "per-call") is None


def _counted(fn):
    calls = []

    def counted():
        calls.append(1)
        return fn()
    return counted, calls


def test_a_cpu_cells_memory_adds_one_profiled_call_after_the_probes_region():
    from types import SimpleNamespace

    from bench_utils.study.cell.time_by_phase import Phases

    weight, x = torch.randn(256, 4096), torch.randn(4096, 256)
    forward, calls = _counted(lambda: (x @ weight).sum(dim=1))  # a 64 MiB intermediate
    phases = Phases()
    with torch.no_grad():
        forward()  # warm-up, as the cell's timed runs are
        memory = after_timing.memory_of(forward, torch.device("cpu"), SimpleNamespace(model=torch.nn.Linear(2, 2)),
                                        {"x": x}, phases)
    assert len(calls) == 1 + after_timing.MEMORY_CALLS + 1
    assert memory["rss_peak_method"].startswith("sampled") and memory["input_bytes"] == x.numel() * 4
    assert memory["cpu_activation_method"] == "torch.profiler profile_memory"
    assert memory["cpu_activation_peak_bytes"] == pytest.approx(64 * 2**20, rel=0.1)
    assert phases.seconds["memory"] > 0


def test_a_cuda_cells_memory_runs_no_profiler(monkeypatch):
    from contextlib import nullcontext
    from types import SimpleNamespace

    from bench_utils.study.cell.time_by_phase import Phases

    probe = SimpleNamespace(report={"cuda_peak_reserved_increase_bytes": 5})
    monkeypatch.setattr(after_timing, "MemoryProbe", lambda *args, **kwargs: nullcontext(probe))
    forward, calls = _counted(lambda: None)
    memory = after_timing.memory_of(forward, torch.device("cuda", 0), SimpleNamespace(model=None), {}, Phases())
    assert len(calls) == after_timing.MEMORY_CALLS  # the allocator's own figures measure it
    assert memory["cuda_peak_reserved_increase_bytes"] == 5
    assert memory["cpu_activation_peak_bytes"] is None and memory["cpu_activation_method"] is None
