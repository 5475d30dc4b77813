"""The energy window's arithmetic: pure functions of NVML's energy counter as a window has read it.

A window of calls runs from step to step of the counter (``measurement/power.py``, whose module docstring
says why); each increment credited is one sample of the power, held by the steps it spans.
``energy_window(readings, rule)`` says why the window ends now (or None while it runs on), from the
readings so far (``CounterReadings``) and the rule (``WindowRule``: fewest samples, most steps, the
standard error to reach, the longest window); ``window_end`` dates the window's last step; ``power_rel_se``
and ``power_rel_ci95`` state the spread of the samples. No clock is read and nothing is changed here.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Literal, Sequence

from scipy import stats as scipy_stats

Sample = tuple[int, int]  # one increment of the counter (mJ) and the steps it holds
WindowStop = Literal["power_rel_se", "steps_max", "time_limit", "fixed_window"]


def power_rel_se(samples: Sequence[Sample]) -> float | None:
    """Relative standard error of the mean power over ``samples`` (the ratio estimator: increments over
    the steps they hold); None under two samples or without energy."""
    n = len(samples)
    energy = sum(increment for increment, _ in samples)
    if n < 2 or energy <= 0:
        return None
    per_step = energy / sum(held for _, held in samples)
    spread = sum((increment - per_step * held) ** 2 for increment, held in samples) / (n - 1)
    return math.sqrt(spread / n) / (energy / n)


def power_rel_ci95(samples: Sequence[Sample]) -> float | None:
    """The 95 % half-width of the mean power, relative: ``power_rel_se`` times Student's t."""
    se = power_rel_se(samples)
    return None if se is None else se * float(scipy_stats.t.ppf(0.975, len(samples) - 1))


@dataclass(frozen=True)
class CounterReadings:
    """What a window has read of the counter so far: the basis of its rule."""

    counter_step_s: float | None   # the counter's period, measured at an aligned entry; None: not aligned
    samples: tuple[Sample, ...]    # the increments credited, in order
    elapsed_s: float               # seconds since the window started (on a step, where aligned)

    @property
    def steps(self) -> int:
        """The counter's steps credited since the window started."""
        return sum(held for _, held in self.samples)


@dataclass(frozen=True)
class WindowRule:
    """When a window of calls has measured enough: ``steps_min`` samples whose mean power has a relative
    standard error of at most ``power_rel_se_target``, or ``steps_max`` steps. ``longest_s`` is the
    longest window planned (``steps_max`` periods; a fixed window's length where the period is unknown):
    a counter still short of ``steps_max`` two periods past it has stopped stepping."""

    steps_min: int
    steps_max: int
    power_rel_se_target: float
    longest_s: float


def energy_window(readings: CounterReadings, rule: WindowRule) -> WindowStop | None:
    """Why the window ends now, or None while it runs on: ``power_rel_se`` (the spread met the target),
    ``steps_max``, ``time_limit`` (the counter stopped stepping), ``fixed_window`` (its period unknown:
    the window is ``rule.longest_s`` long). No side effect: the readings and the rule decide."""
    if readings.counter_step_s is None:
        return "fixed_window" if readings.elapsed_s >= rule.longest_s else None
    rel_se = power_rel_se(readings.samples)
    if len(readings.samples) >= rule.steps_min and rel_se is not None and rel_se <= rule.power_rel_se_target:
        return "power_rel_se"
    if readings.steps >= rule.steps_max:
        return "steps_max"
    if readings.elapsed_s >= rule.longest_s + 2 * readings.counter_step_s:
        return "time_limit"
    return None


@dataclass(frozen=True)
class WindowEnd:
    """When the window's last step came, the steps in the window, and the period averaged over it (None
    where its steps were not counted)."""

    time_s: float
    steps: int
    mean_step_s: float | None


def window_end(start_s: float, after_s: float, steps: int, *, one_by_one: bool, counter_step_s: float,
               known_step_s: float | None) -> WindowEnd:
    """The window that started (on a step) at ``start_s``, its last step dated from ``after_s``, the step after
    it. With its ``steps`` counted (each seen alone, ``one_by_one``; or, several a read, by ``known_step_s``,
    a period known better) the period averaged over the window dates it; else the one measured at entry."""
    span = after_s - start_s
    if not one_by_one and known_step_s:
        steps = max(1, round(span / known_step_s) - 1)  # several steps a read: counted by that period
    elif not one_by_one:
        return WindowEnd(after_s - counter_step_s, steps, None)
    mean_step_s = span / (steps + 1)
    return WindowEnd(start_s + steps * mean_step_s, steps, mean_step_s)
