"""Energy, clocks and temperature of a GPU around a measured region, from NVML.

``with EnergyProbe(device) as probe: <timed work>`` then ``probe.report`` (keys: ``REPORT_KEYS``): ``energy_j``,
``duration_s`` and ``mean_power_w`` (all three or none) from the board's total-energy counter (millijoules, Volta and
later, other processes included); ``region_s``, the work's wall time; SM clock, temperature and throttle reasons at
start and end; and, aligned, the counter's period, its ``steps`` with the spread of their power and ``idle_power_w``.

The counter moves in steps (about 100 ms), so read at arbitrary times it is off by up to a step at each end:
``align=True`` polls it at entry until it steps twice and starts the region on that step, and at exit polls on
until the next step, which dates the last one before it. ``observe()`` between pieces of the work credits each
increment to the steps it holds: samples of the power. Why, and the figures: ``docs/measurement.md``; the window's
arithmetic: ``measurement/energy_window.py``. The device is synchronized at entry and exit, so "GpuIdle" among the
end reasons is expected. On a CPU, or where NVML is missing or refuses, every field is None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import importlib
import time
from typing import Any, NamedTuple

import torch

from .devices import resolve_device, synchronize
from .energy_window import CounterReadings, Sample, power_rel_ci95, power_rel_se, window_end
from .nvml_device import nvml_handle

# Module-level so tests can drive the clock and check the arithmetic exactly.
_now = time.perf_counter
_sleep = time.sleep

POLL_S = 0.001          # between reads of the counter while waiting for its step
STEP_TIMEOUT_S = 1.0    # a counter that does not step within this is not refreshed: no alignment
# Reads less than this share of the measured step apart hold at most one step. The step measured at entry is
# one step's time, which the counter's refresh jitter can put a tenth or so off the true period; 3/4 of it stays
# under the true period unless it is a third too long.
SINGLE_STEP_SHARE = 0.75

# Prefixes of pynvml's reason bit constants: the current names, then the older ones
# (which also hold bits the newer set lacks in some releases, e.g. BoardLimit).
_REASON_PREFIXES = ("nvmlClocksEventReason", "nvmlClocksThrottleReason")
# Not reasons: the empty and full masks, and a deprecated alias of ApplicationsClocksSetting.
_NOT_REASONS = {"None", "All", "UserDefinedClocks"}

REPORT_KEYS = (
    "device", "nvml_device", "energy_j", "duration_s", "mean_power_w", "region_s", "aligned", "counter_step_s",
    "steps", "power_rel_se", "power_rel_ci95", "idle_power_w",
    "sm_clock_mhz_start", "sm_clock_mhz_end", "temperature_c_start", "temperature_c_end",
    "throttle_reasons_start", "throttle_reasons_end", "note",
)


def decode_reasons(mask: int, nvml: Any) -> list[str]:
    """Names of the bits set in a clocks-event (throttle) ``mask``, from ``nvml``'s constants.

    ``0x4 | 0x40`` -> ``["SwPowerCap", "HwThermalSlowdown"]``; a bit this pynvml has
    no name for appears as ``"unknown:0x..."`` rather than being dropped.
    """
    names: dict[int, str] = {}
    for prefix in _REASON_PREFIXES:
        for attr in sorted(dir(nvml)):
            name = attr[len(prefix):]
            if not attr.startswith(prefix) or name in _NOT_REASONS:
                continue
            value = getattr(nvml, attr)
            if isinstance(value, int) and value > 0 and value & (value - 1) == 0:  # one bit
                names.setdefault(value, name)
    decoded = [names[bit] for bit in sorted(names) if mask & bit]
    unknown = mask & ~sum(names)
    if unknown:
        decoded.append(f"unknown:0x{unknown:x}")
    return decoded


def per_inference(report: dict[str, Any], calls: int) -> float | None:
    """Joules per call of ``calls`` run through the region: mean power times the region's time
    per call (``energy_j / calls`` where the window is the region); None when the energy is unknown."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls!r}")
    power, region_s = report.get("mean_power_w"), report.get("region_s")
    return None if power is None or region_s is None else power * region_s / calls


# --- the probe ---------------------------------------------------------------------------

def _as_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return resolve_device(None)
    resolved = torch.device(device)
    if resolved.type == "cuda" and resolved.index is None and torch.cuda.is_available():
        resolved = torch.device("cuda", torch.cuda.current_device())  # "cuda" means the current GPU
    return resolved


class _Step(NamedTuple):
    value_mj: int   # the counter after the step
    time_s: float   # when it stepped, mid-way between the two reads around it


@dataclass
class _Window:
    """One region's state, entry to exit: where it started, and the counter's steps credited since."""

    state_start: dict[str, Any] = field(default_factory=dict)  # clocks, temperature, reasons at entry
    energy_start: int | None = None       # the counter at the start (mJ); None: no energy counter
    time_start: float = 0.0
    counter_step_s: float | None = None   # the counter's period, measured at an aligned entry
    samples: list[Sample] = field(default_factory=list)
    steps: int = 0                        # the steps credited (then counted, at exit)
    one_by_one: bool = True               # every step credited alone (reads under a step apart)
    last_value: int = 0                   # the counter at the last read (aligned)
    last_read: float = 0.0
    idle_mj: int | None = None            # the step that starts the window, the GPU idle since entry (aligned)
    mean_step_s: float | None = None      # the period averaged over the window, where its steps were counted

    def credit(self, value: int, now: float, period_s: float) -> None:
        """The increment since the last read, if the counter stepped, as one sample of the power, held by one
        step where the reads came under ``SINGLE_STEP_SHARE`` of a step apart, else by the steps ``period_s``
        puts since the last ones credited."""
        assert self.counter_step_s is not None, "credited only in an aligned window"
        if value != self.last_value:
            if now - self.last_read < SINGLE_STEP_SHARE * self.counter_step_s:
                held = 1
            else:  # a read interval that may hold several
                held = max(1, int((now - self.time_start) / period_s) - self.steps)
                self.one_by_one = False
            self.samples.append((value - self.last_value, held))
            self.steps += held
            self.last_value = value
        self.last_read = now


class EnergyProbe:
    """``with EnergyProbe(device) as probe: ...``; then ``probe.report`` (keys: ``REPORT_KEYS``).

    ``nvml`` replaces the ``pynvml`` module (tests pass a fake); by default it is
    imported on entry. ``align``: integrate from step to step of the energy counter (module docstring);
    then ``observe()`` between pieces of the work makes each step a sample of the power, and
    ``known_step_s``, set after entry, is a period known better than the one measured there.
    ``readings()`` is what the window's rule (``energy_window``) decides on.
    """

    def __init__(self, device: str | torch.device | None = None, *, nvml: Any = None,
                 align: bool = False) -> None:
        self.device = _as_device(device)
        self.align = align
        self.report: dict[str, Any] = {}
        self.known_step_s: float | None = None  # the caller's: the period known better than ``counter_step_s``
        self._nvml_given = nvml
        self._nvml: Any = None
        self._handle: Any = None
        self._lookup: str | None = None
        self._notes: list[str] = []
        self._window = _Window()

    # --- NVML access -------------------------------------------------------------

    def _open(self) -> None:
        """NVML and the handle of this GPU, or a note saying why not."""
        if self.device.type != "cuda":
            self._notes.append(f"no NVML on {self.device.type}")
            return
        try:
            nvml = self._nvml_given if self._nvml_given is not None else importlib.import_module("pynvml")
            nvml.nvmlInit()
        except Exception as exc:  # library or driver missing: every field stays None
            self._notes.append(f"NVML unavailable: {type(exc).__name__}: {exc}")
            return
        self._nvml = nvml
        try:
            self._handle, self._lookup = nvml_handle(nvml, self.device)
        except Exception as exc:
            self._notes.append(f"no NVML handle for {self.device}: {type(exc).__name__}: {exc}")
            self._close()

    def _close(self) -> None:
        shutdown = getattr(self._nvml, "nvmlShutdown", None)
        if shutdown is not None:
            try:
                shutdown()  # NVML counts inits: this releases only ours
            except Exception:
                pass
        self._nvml = None

    def _query(self, getter, what: str | None = None):
        """``getter(nvml, handle)``, or None (noting ``what`` failed) where NVML refuses."""
        if self._handle is None or self._nvml is None:
            return None
        try:
            return getter(self._nvml, self._handle)
        except Exception as exc:
            if what:
                self._notes.append(f"{what} unavailable: {type(exc).__name__}: {exc}")
            return None

    def _energy_mj(self) -> int | None:
        return self._query(lambda nvml, h: int(nvml.nvmlDeviceGetTotalEnergyConsumption(h)),
                           "energy counter")

    def _reasons(self) -> list[str] | None:
        for getter in ("nvmlDeviceGetCurrentClocksEventReasons",
                       "nvmlDeviceGetCurrentClocksThrottleReasons"):  # newer name, then older
            mask = self._query(lambda nvml, h, g=getter: int(getattr(nvml, g)(h)))
            if mask is not None:
                return decode_reasons(mask, self._nvml)
        return None

    def _state(self) -> dict[str, Any]:
        return {
            "sm_clock_mhz": self._query(lambda nvml, h: int(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))),
            "temperature_c": self._query(
                lambda nvml, h: int(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))),
            "throttle_reasons": self._reasons(),
        }

    # --- steps of the counter ------------------------------------------------------

    def _next_step(self, value: int) -> _Step | None:
        """Read the counter every ``POLL_S`` until it differs from ``value``: its new value and
        the step's time, mid-way between the last two reads. None if it does not step within
        ``STEP_TIMEOUT_S`` or refuses."""
        before = _now()
        deadline = before + STEP_TIMEOUT_S
        while True:
            _sleep(POLL_S)
            current, now = self._energy_mj(), _now()
            if current is None:
                return None
            if current != value:
                return _Step(current, (before + now) / 2)
            if now > deadline:
                self._notes.append(f"energy counter did not step within {STEP_TIMEOUT_S:g} s: not aligned")
                return None
            before = now

    # --- steps as samples of the power (aligned windows) -------------------------------

    def observe(self) -> None:
        """Read the counter now: the increment since the last read, if it stepped, is one sample
        of the power, credited to the steps it holds (module docstring). Aligned windows only."""
        if self._window.counter_step_s is None:
            return
        value = self._energy_mj()
        if value is not None:
            self._window.credit(value, _now(), self._period_s())

    def _period_s(self) -> float:
        period_s = self.known_step_s or self._window.counter_step_s
        assert period_s is not None, "a period only in an aligned window"
        return period_s

    def readings(self) -> CounterReadings:
        """The counter's readings so far, now: what ``energy_window`` decides on."""
        return CounterReadings(self._window.counter_step_s, tuple(self._window.samples), self.elapsed_s())

    @property
    def counter_step_s(self) -> float | None:
        """The counter's period, measured at an aligned entry (None: not aligned)."""
        return self._window.counter_step_s

    @property
    def steps(self) -> int:
        """The counter's steps credited since the start (aligned), counted at exit."""
        return self._window.steps

    @property
    def mean_step_s(self) -> float | None:
        """The period averaged over the window, where its steps were counted (at exit)."""
        return self._window.mean_step_s

    @property
    def samples(self) -> int:
        """The increments credited so far: samples of the power (one a step where counted one by one)."""
        return len(self._window.samples)

    @property
    def counting(self) -> bool:
        """Whether the energy counter was read at the start: else the region measures no energy."""
        return self._window.energy_start is not None

    def elapsed_s(self) -> float:
        """Seconds since the region started (on a step, where aligned)."""
        return _now() - self._window.time_start

    # --- the region ----------------------------------------------------------------

    def __enter__(self) -> "EnergyProbe":
        self._notes = []
        self._open()
        if self._handle is not None:
            synchronize(self.device)
        window = self._window = _Window(state_start=self._state())
        window.energy_start, window.time_start = self._energy_mj(), _now()
        if self.align and window.energy_start is not None:
            first = self._next_step(window.energy_start)
            second = self._next_step(first.value_mj) if first is not None else None
            if first is not None and second is not None:
                window.energy_start, window.time_start = second
                window.counter_step_s = second.time_s - first.time_s
                window.last_value, window.last_read = second
                window.idle_mj = second.value_mj - first.value_mj  # the GPU idle since entry
            else:  # not aligned: the region starts now, the idle wait for a step left out of it
                window.energy_start, window.time_start = self._energy_mj(), _now()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        window = self._window
        energy_end: int | None = None
        time_end = region_end = window.time_start
        aligned = False
        if self._handle is not None:
            synchronize(self.device)
            if window.energy_start is not None:
                energy_end = self._energy_mj()
                time_end = region_end = _now()
            if energy_end is not None and window.counter_step_s is not None:
                window.credit(energy_end, region_end, self._period_s())
                after = self._next_step(energy_end)  # the step after exit dates the last one before it
                if after is not None:
                    end = window_end(window.time_start, after.time_s, window.steps, one_by_one=window.one_by_one,
                                     counter_step_s=window.counter_step_s, known_step_s=self.known_step_s)
                    window.steps, window.mean_step_s = end.steps, end.mean_step_s
                    time_end, aligned = end.time_s, True
        state_end = self._state()
        report: dict[str, Any] = dict.fromkeys(REPORT_KEYS)
        report["device"] = str(self.device)
        report["nvml_device"] = self._lookup
        if self.align and self._handle is not None:
            report["aligned"] = aligned
            report["counter_step_s"] = window.counter_step_s
            if window.idle_mj is not None:
                report["idle_power_w"] = window.idle_mj / 1000.0 / (window.mean_step_s or self._period_s())
        for name, value in window.state_start.items():
            report[f"{name}_start"] = value
        for name, value in state_end.items():
            report[f"{name}_end"] = value
        if energy_end is not None and window.energy_start is not None:
            energy_j = (energy_end - window.energy_start) / 1000.0
            duration_s = time_end - window.time_start
            if energy_j < 0:
                self._notes.append("energy counter went backwards (driver reloaded?)")
            elif energy_j == 0 or duration_s <= 0:
                # A powered GPU always draws energy: a still counter was not refreshed yet.
                self._notes.append("energy counter did not advance: region too short to measure")
            else:
                report.update(energy_j=energy_j, duration_s=duration_s, mean_power_w=energy_j / duration_s,
                              region_s=region_end - window.time_start)
                if window.counter_step_s is not None:
                    report.update(steps=window.steps, power_rel_se=power_rel_se(window.samples),
                                  power_rel_ci95=power_rel_ci95(window.samples))
        report["note"] = "; ".join(self._notes) or None
        self.report = report
        if self._nvml is not None:
            self._close()
