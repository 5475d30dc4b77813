import math

from bench_utils.records.schema import EnergyBlock, EnergySide
from bench_utils.report.energy_readings import (PACE_RATIO, energy_columns, pace_differs, throttles,
                                                window_ms)


def test_a_windows_pace_is_its_calls_time_over_their_count():
    # Segformer, batch 4, eager on the H200: 57 calls in 0.8407 s, 14.75 ms a call against 7.08 ms timed
    side = EnergySide(region_s=0.8407132914999806, calls=57, joules_per_inference=3.04)
    assert window_ms(side) == __import__("pytest").approx(14.75, abs=0.005)
    assert pace_differs(window_ms(side), 7.08) and pace_differs(7.08 / 2.08, 7.08)  # either way
    assert not pace_differs(7.08 * PACE_RATIO * 0.99, 7.08)
    assert math.isnan(window_ms(EnergySide(joules_per_inference=1.0))) and math.isnan(window_ms(None))
    assert not pace_differs(math.nan, 7.08) and not pace_differs(14.75, math.nan)


def test_throttle_reasons_are_named_once_and_an_idle_gpu_is_none():
    assert throttles([], ["SwPowerCap"]) == ("SwPowerCap",)
    assert throttles(["SwPowerCap", "GpuIdle"], ["HwThermalSlowdown", "SwPowerCap"]) == ("HwThermalSlowdown",
                                                                                          "SwPowerCap")
    assert throttles(["GpuIdle"], None) == () and throttles("SwPowerCap") == ()  # a string is no list of reasons


def test_the_frames_energy_columns_read_each_side_and_the_timed_runs():
    # DETR, batch 16 on the H200: SwPowerCap at the end of the timed runs and around both windows
    energy = EnergyBlock.model_validate({
        "timed_runs": {"throttle_reasons_start": [], "throttle_reasons_end": ["SwPowerCap"]},
        "eager": {"region_s": 1.0, "calls": 16, "joules_per_inference": 2.0,
                  "throttle_reasons_start": ["SwPowerCap"], "throttle_reasons_end": []},
        "compiled": {"region_s": 1.0, "calls": 32, "joules_per_inference": 1.0,
                     "throttle_reasons_start": [], "throttle_reasons_end": ["GpuIdle"]}})
    compiled = energy_columns(energy, eager_cell=False)
    assert compiled == {"joules": 1.0, "eager_joules": 2.0, "window_ms": 31.25, "eager_window_ms": 62.5,
                        "energy_throttled": (),
                        "eager_energy_throttled": ("SwPowerCap",), "throttled": ("SwPowerCap",)}
    eager = energy_columns(energy, eager_cell=True)
    assert eager["joules"] == 2.0 and eager["window_ms"] == 62.5 and eager["energy_throttled"] == ("SwPowerCap",)
    none = energy_columns(None, eager_cell=False)
    assert math.isnan(none["window_ms"]) and none["throttled"] == () and none["joules"] is None
