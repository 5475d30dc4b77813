import statistics
import sys

import pynvml as real_pynvml
import pytest
from scipy import stats as scipy_stats
import torch

from fake_nvml import UUIDS, SteppedEnergyGpu, make_fake_pynvml
from bench_utils.measurement import nvml_device, power
from bench_utils.measurement.energy_window import (CounterReadings, WindowEnd, WindowRule, energy_window,
                                                   power_rel_ci95, power_rel_se, window_end)
from bench_utils.measurement.power import REPORT_KEYS, EnergyProbe, decode_reasons, per_inference

EVENT_BITS = {name: getattr(real_pynvml, name) for name in dir(real_pynvml)
              if name.startswith(("nvmlClocksEventReason", "nvmlClocksThrottleReason"))}


class FakeNVMLError(Exception):
    """pynvml's NVMLError carries a return code; this one too."""

    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def make_energy_nvml(log, *, energy_mj=None, energy_supported=True, reasons=None,
                     event_api=True, throttle_api=True):
    """The project's fake pynvml, extended with energy, clocks, temperature and reasons.

    Every energy read pops the next value of ``energy_mj[handle]`` and is logged,
    so the test knows the exact numbers and the order of reads and synchronizes.
    """
    nvml = make_fake_pynvml()
    nvml.NVMLError = FakeNVMLError
    nvml.NVML_TEMPERATURE_GPU = real_pynvml.NVML_TEMPERATURE_GPU
    for name, value in EVENT_BITS.items():
        setattr(nvml, name, value)
    energy_mj = {handle: list(values) for handle, values in (energy_mj or {}).items()}
    reasons = list(reasons or [0, 0])
    clocks, temperatures = [1980, 1755], [41, 67]

    def total_energy(handle):
        if not energy_supported:
            raise FakeNVMLError(real_pynvml.NVML_ERROR_NOT_SUPPORTED)
        log.append(("energy", handle))
        return energy_mj[handle].pop(0)

    def clock_info(handle, clock):
        assert clock == nvml.NVML_CLOCK_SM
        log.append(("clock", handle))
        return clocks.pop(0)

    def temperature(handle, sensor):
        assert sensor == nvml.NVML_TEMPERATURE_GPU
        return temperatures.pop(0)

    def current_reasons(handle):
        return reasons.pop(0)

    def no_such_function(handle):
        raise FakeNVMLError(real_pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    nvml.nvmlDeviceGetTotalEnergyConsumption = total_energy
    nvml.nvmlDeviceGetClockInfo = clock_info
    nvml.nvmlDeviceGetTemperature = temperature
    nvml.nvmlDeviceGetCurrentClocksEventReasons = current_reasons if event_api else no_such_function
    if throttle_api:
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons = current_reasons
    nvml.shutdowns = 0

    def shutdown():
        nvml.shutdowns += 1

    nvml.nvmlShutdown = shutdown
    return nvml


@pytest.fixture
def log(monkeypatch):
    """Records synchronize calls (no GPU here) and drives the probe's clock: 10 s, 12 s, 14 s, ..."""
    events = []
    times = iter(range(10, 1000, 2))
    monkeypatch.setattr(power, "synchronize", lambda device: events.append(("sync", str(device))))
    monkeypatch.setattr(power, "_now", lambda: float(next(times)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: None)  # as on a CPU, on any machine
    return events


def test_energy_power_and_per_inference_arithmetic(log):
    # 1,000,000 mJ at entry, 1,250,500 mJ at exit: 250.5 J over 2 s
    nvml = make_energy_nvml(log, energy_mj={0: [1_000_000, 1_250_500]})
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        log.append(("work", None))
    report = probe.report
    assert set(report) == set(REPORT_KEYS)
    assert report["device"] == "cuda:0"
    assert report["energy_j"] == 250.5
    assert report["duration_s"] == 2.0
    assert report["mean_power_w"] == 125.25
    assert per_inference(report, 4) == 62.625
    assert report["sm_clock_mhz_start"] == 1980 and report["sm_clock_mhz_end"] == 1755
    assert report["temperature_c_start"] == 41 and report["temperature_c_end"] == 67
    assert report["throttle_reasons_start"] == [] and report["throttle_reasons_end"] == []
    assert report["note"] is None
    assert nvml.shutdowns == 1


def test_device_is_synchronized_before_each_energy_read(log):
    nvml = make_energy_nvml(log, energy_mj={0: [5_000, 9_000]})
    with EnergyProbe("cuda:0", nvml=nvml):
        log.append(("work", None))
    order = [event for event in log if event[0] in ("sync", "energy", "work")]
    assert order == [("sync", "cuda:0"), ("energy", 0), ("work", None),
                     ("sync", "cuda:0"), ("energy", 0)]


def test_gpu_index_maps_through_cuda_visible_devices(log, monkeypatch):
    nvml = make_energy_nvml(log, energy_mj={1: [0, 3_000]})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    with EnergyProbe(torch.device("cuda", 0), nvml=nvml) as probe:  # cuda:0 is NVML GPU 1
        pass
    assert ("energy", 1) in log and ("energy", 0) not in log
    assert probe.report["energy_j"] == 3.0
    assert probe.report["mean_power_w"] == 1.5
    assert probe.report["nvml_device"] == "index 1"


def test_gpu_is_found_by_its_uuid_under_a_uuid_mask(log, monkeypatch):
    # The old index mapping read NVML GPU 0 here: another GPU's energy.
    nvml = make_energy_nvml(log, energy_mj={1: [0, 3_000]})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUIDS[1]},{UUIDS[0]}")
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: UUIDS[1].removeprefix("GPU-"))
    with EnergyProbe(torch.device("cuda", 0), nvml=nvml) as probe:
        pass
    assert ("energy", 1) in log and ("energy", 0) not in log
    assert probe.report["nvml_device"] == f"uuid {UUIDS[1]}" and probe.report["energy_j"] == 3.0


def test_unsupported_energy_counter_still_reports_clocks(log):
    nvml = make_energy_nvml(log, energy_supported=False)
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        pass
    report = probe.report
    assert report["energy_j"] is None and report["duration_s"] is None and report["mean_power_w"] is None
    assert per_inference(report, 10) is None
    assert report["sm_clock_mhz_start"] == 1980 and report["sm_clock_mhz_end"] == 1755
    assert report["temperature_c_end"] == 67
    assert report["throttle_reasons_end"] == []
    assert "energy counter unavailable" in report["note"]


def test_throttle_reasons_are_decoded_by_name(log):
    capped = real_pynvml.nvmlClocksEventReasonSwPowerCap | real_pynvml.nvmlClocksEventReasonHwThermalSlowdown
    nvml = make_energy_nvml(log, energy_mj={0: [0, 1_000]},
                            reasons=[real_pynvml.nvmlClocksEventReasonGpuIdle, capped])
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        pass
    assert probe.report["throttle_reasons_start"] == ["GpuIdle"]
    assert probe.report["throttle_reasons_end"] == ["SwPowerCap", "HwThermalSlowdown"]


def test_older_throttle_api_is_used_when_the_event_api_is_missing(log):
    nvml = make_energy_nvml(log, energy_mj={0: [0, 1_000]}, event_api=False,
                            reasons=[0, real_pynvml.nvmlClocksThrottleReasonHwSlowdown])
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        pass
    assert probe.report["throttle_reasons_end"] == ["HwSlowdown"]
    # and neither API: None, not an empty list (which would claim "not throttled")
    nvml = make_energy_nvml(log, energy_mj={0: [0, 1_000]}, event_api=False, throttle_api=False)
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        pass
    assert probe.report["throttle_reasons_start"] is None and probe.report["throttle_reasons_end"] is None


def test_decode_reasons():
    bits = real_pynvml
    assert decode_reasons(0, bits) == []
    # the deprecated alias UserDefinedClocks shares ApplicationsClocksSetting's bit: named once
    assert decode_reasons(bits.nvmlClocksEventReasonApplicationsClocksSetting, bits) == [
        "ApplicationsClocksSetting"]
    assert decode_reasons(bits.nvmlClocksEventReasonSwThermalSlowdown | 0x8000_0000, bits) == [
        "SwThermalSlowdown", "unknown:0x80000000"]


def test_cpu_gives_every_field_none_and_never_touches_nvml(log):
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"NVML used on CPU: {name}")

    with EnergyProbe("cpu", nvml=Untouchable()) as probe:
        pass
    report = probe.report
    assert report["device"] == "cpu"
    assert all(report[key] is None for key in REPORT_KEYS if key not in ("device", "note"))
    assert per_inference(report, 1) is None
    assert log == []  # no synchronize either


def test_missing_nvml_gives_every_field_none(log, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now fails
    with EnergyProbe("cuda:0") as probe:
        pass
    assert all(probe.report[key] is None for key in REPORT_KEYS if key not in ("device", "note"))
    assert "NVML unavailable" in probe.report["note"]
    failing = make_fake_pynvml(fail_init=True)
    with EnergyProbe("cuda:0", nvml=failing) as probe:
        pass
    assert probe.report["energy_j"] is None and probe.report["sm_clock_mhz_start"] is None
    assert "NVML Shared Library Not Found" in probe.report["note"]


def test_a_still_or_reset_counter_is_not_a_measurement(log):
    nvml = make_energy_nvml(log, energy_mj={0: [7_000, 7_000]})
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        pass
    assert probe.report["energy_j"] is None and probe.report["mean_power_w"] is None
    assert "did not advance" in probe.report["note"]


def test_per_inference_refuses_no_calls():
    with pytest.raises(ValueError, match="calls must be >= 1"):
        per_inference({"energy_j": 1.0}, 0)


# --- a region aligned on the counter's steps, with a GPU whose counter steps as H100's ------------

@pytest.fixture
def stepped(monkeypatch):
    """``stepped(gpu)``: the probe reads ``gpu``'s counter and clock (sleeping advances it)."""
    monkeypatch.setattr(power, "synchronize", lambda device: None)
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(gpu):
        monkeypatch.setattr(power, "_now", gpu.now)
        monkeypatch.setattr(power, "_sleep", gpu.sleep)
        return gpu.nvml()
    return install


def test_aligned_window_runs_from_step_to_step_of_the_counter(stepped):
    gpu = SteppedEnergyGpu(lambda t, phase: 400.0, idle_w=100.0, phase_s=0.0371)
    gpu.time = 0.01
    with EnergyProbe("cuda:0", nvml=stepped(gpu), align=True) as probe:
        # the window starts on a step (the second: the first measures the period), the GPU idle until then
        assert gpu.now() == pytest.approx(0.2371, abs=1e-3) and abs(probe.elapsed_s()) < 1e-3
        gpu.run_calls(20, 0.0243)  # 0.486 s of calls at 400 W, up to the exit
    report = probe.report
    assert report["aligned"] is True
    assert report["counter_step_s"] == pytest.approx(0.1, abs=2e-3)  # measured, to a poll
    # steps at 0.1371 + k * 0.1; the last before the exit (at 0.723) is at 0.6371, dated by the next one
    assert report["duration_s"] == pytest.approx(0.4, abs=2e-3)
    assert report["energy_j"] == pytest.approx(160.0, abs=0.01)  # four steps of 40 J: busy ones only
    assert report["mean_power_w"] == pytest.approx(400.0, rel=0.01)
    assert report["region_s"] == pytest.approx(0.486, abs=1e-3)
    assert per_inference(report, 20) == pytest.approx(400.0 * 0.0243, rel=0.01)
    # not observed: the exit's read holds the four steps, counted by the period measured at entry; one sample
    assert report["steps"] == 4 and report["power_rel_se"] is None and report["power_rel_ci95"] is None
    assert report["idle_power_w"] == pytest.approx(100.0, rel=1e-3)  # the step that starts the window: idle


def test_steps_seen_one_by_one_are_samples_of_the_power(stepped):
    # what each step adds, times: the two of the alignment (idle), then seven of the window, then the exit's next
    factors = [1.0, 1.2, 1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 0.97, 1.0]
    gpu = SteppedEnergyGpu(lambda t, phase: 400.0, idle_w=70.0, phase_s=0.0371, step_factor=iter(factors).__next__)
    with EnergyProbe("cuda:0", nvml=stepped(gpu), align=True) as probe:
        for _ in range(38):  # 0.76 s of calls in chunks of 20 ms, the counter read after each
            gpu.run_calls(4, 0.005)
            probe.observe()
        assert probe.steps == probe.samples == 7
    report, window = probe.report, factors[2:9]
    assert report["steps"] == 7 and report["energy_j"] == pytest.approx(40.0 * sum(window), abs=0.01)
    assert report["duration_s"] == pytest.approx(0.7, abs=1e-3) and report["aligned"] is True
    rel_se = statistics.stdev(window) / len(window) ** 0.5 / statistics.fmean(window)
    assert report["power_rel_se"] == pytest.approx(rel_se, rel=1e-3)
    assert report["power_rel_ci95"] == pytest.approx(rel_se * scipy_stats.t.ppf(0.975, 6), rel=1e-3)
    assert report["idle_power_w"] == pytest.approx(70.0 * factors[1], rel=1e-3)
    assert probe.mean_step_s == pytest.approx(0.1, abs=2e-4)


def _first_step_late(gpu, late_s):
    """The counter shows its first step ``late_s`` late: the step measured at entry is short by that much, as the
    H200's strayed (89 to 105 ms for a counter of exactly 100 ms)."""
    first, before, stepping = gpu.next_step, int(gpu.counter_j * 1000), gpu.energy_mj
    gpu.energy_mj = lambda: before if first <= gpu.time < first + late_s else stepping()
    return gpu


@pytest.mark.parametrize("observed", [True, False])
def test_steps_counted_date_the_end_by_their_mean_period_not_the_entrys(stepped, observed):
    gpu = _first_step_late(SteppedEnergyGpu(lambda t, phase: 400.0, phase_s=0.0371), 0.011)
    with EnergyProbe("cuda:0", nvml=stepped(gpu), align=True) as probe:
        for _ in range(38):
            gpu.run_calls(4, 0.005)
            if observed:
                probe.observe()
    report = probe.report
    assert report["counter_step_s"] == pytest.approx(0.089, abs=2e-3)
    assert report["energy_j"] == pytest.approx(7 * 40.0, abs=0.01)
    if observed:  # seven steps seen one by one: the window dated by their mean period
        assert report["steps"] == 7 and report["duration_s"] == pytest.approx(0.7, abs=1e-3)
    else:  # one read at the exit: dated by the period measured at entry, 11 ms off (1.6 % of this window)
        assert report["duration_s"] == pytest.approx(0.711, abs=2e-3)


def test_a_period_known_better_counts_the_steps_of_long_reads(stepped):
    gpu = _first_step_late(SteppedEnergyGpu(lambda t, phase: 400.0, phase_s=0.0371), 0.011)
    with EnergyProbe("cuda:0", nvml=stepped(gpu), align=True) as probe:
        probe.known_step_s = 0.1  # the caller's, from an earlier window
        for _ in range(4):  # calls of 240 ms: a read holds two or three steps
            gpu.run_calls(1, 0.24)
            probe.observe()
    report = probe.report
    assert probe.samples == 4 and report["steps"] == 9 and report["energy_j"] == pytest.approx(9 * 40.0, abs=0.01)
    assert report["duration_s"] == pytest.approx(0.9, abs=1e-3)


def test_a_counter_that_does_not_step_is_not_aligned_and_says_so(stepped):
    gpu = SteppedEnergyGpu(lambda t, phase: 400.0, step_s=1e6)
    with EnergyProbe("cuda:0", nvml=stepped(gpu), align=True) as probe:
        gpu.run_calls(10, 0.1)
    report = probe.report
    assert report["aligned"] is False and report["counter_step_s"] is None
    assert report["energy_j"] is None  # the counter did not move: no energy, not 0
    assert "did not step within 1 s" in report["note"]
    assert gpu.now() < 2.5  # gave up after STEP_TIMEOUT_S, and did not wait again at the end


def test_unaligned_probe_reports_no_alignment_fields(log):
    nvml = make_energy_nvml(log, energy_mj={0: [0, 1_000]})
    with EnergyProbe("cuda:0", nvml=nvml) as probe:
        pass
    assert probe.report["aligned"] is None and probe.report["counter_step_s"] is None
    assert probe.report["energy_j"] == 1.0 and probe.report["region_s"] == probe.report["duration_s"]
    assert all(probe.report[key] is None for key in ("steps", "power_rel_se", "power_rel_ci95", "idle_power_w"))


# --- the window's rule and end: pure functions of synthetic counter readings --------------------------------

RULE = WindowRule(steps_min=8, steps_max=11, power_rel_se_target=0.02, longest_s=1.1)  # a 100 ms counter


def readings(increments_j, *, held=1, elapsed_s=None, step_s=0.1):
    """The counter as a window read it: one increment of ``increments_j`` a read, each holding ``held`` steps."""
    samples = tuple((round(joules * 1000), held) for joules in increments_j)
    elapsed = len(samples) * held * step_s if elapsed_s is None else elapsed_s
    return CounterReadings(step_s, samples, elapsed)


def test_a_window_stops_once_enough_samples_agree():
    steady = [40.0, 40.4, 39.8, 40.2, 39.9, 40.1, 40.3, 39.7]
    assert energy_window(readings(steady[:7]), RULE) is None  # 7 samples: too few to judge the spread on
    assert energy_window(readings(steady), RULE) == "power_rel_se"
    assert power_rel_se(readings(steady).samples) <= RULE.power_rel_se_target


def test_a_window_whose_samples_disagree_runs_to_its_most_steps():
    noisy = [40.0, 46.0, 34.0, 44.0, 36.0, 45.0, 35.0, 43.0, 37.0, 46.0, 34.0]
    assert power_rel_se(readings(noisy[:10]).samples) > RULE.power_rel_se_target
    assert energy_window(readings(noisy[:10]), RULE) is None
    assert energy_window(readings(noisy), RULE) == "steps_max"
    # reads of whole long calls: four samples of three steps each reach the most steps, fewer than 8 samples
    assert energy_window(readings([120.0, 121.0, 119.0, 120.0], held=3), RULE) == "steps_max"


def test_a_counter_that_stops_stepping_ends_the_window_two_steps_past_its_longest():
    stalled = [40.0, 40.2, 39.9]
    assert energy_window(readings(stalled, elapsed_s=1.29), RULE) is None
    assert energy_window(readings(stalled, elapsed_s=1.31), RULE) == "time_limit"


def test_a_counter_whose_step_is_unknown_gets_the_fixed_window():
    unknown = CounterReadings(counter_step_s=None, samples=(), elapsed_s=1.0)
    assert energy_window(unknown, RULE) is None
    assert energy_window(CounterReadings(None, (), 1.1), RULE) == "fixed_window"


def test_the_rule_changes_nothing_it_is_given():
    given = readings([40.0] * 8)
    assert energy_window(given, RULE) == energy_window(given, RULE) == "power_rel_se"
    assert given == readings([40.0] * 8) and given.steps == 8
    assert power_rel_se(given.samples[:1]) is None and power_rel_ci95(given.samples[:1]) is None


def test_the_window_end_is_dated_by_its_mean_period_where_its_steps_were_counted():
    # seven steps seen one by one, the step after the last at 0.805 s: the period averaged over the window
    counted = window_end(0.0, 0.805, 7, one_by_one=True, counter_step_s=0.089, known_step_s=None)
    assert counted.steps == 7 and counted.mean_step_s == pytest.approx(0.805 / 8)
    assert counted.time_s == pytest.approx(7 * 0.805 / 8)
    # several steps a read, a period known better: the steps counted by it
    known = window_end(1.0, 2.0, 4, one_by_one=False, counter_step_s=0.089, known_step_s=0.1)
    assert known.steps == 9 and known.mean_step_s == pytest.approx(0.1) and known.time_s == pytest.approx(1.9)
    # several steps a read and no better period: the entry's period dates the end, the steps as credited
    entry = window_end(1.0, 2.0, 4, one_by_one=False, counter_step_s=0.089, known_step_s=None)
    assert entry == WindowEnd(2.0 - 0.089, 4, None)


def test_a_probe_never_entered_reads_as_not_counting(log):
    probe = EnergyProbe("cpu")
    assert probe.counting is False and probe.counter_step_s is None and probe.steps == probe.samples == 0
