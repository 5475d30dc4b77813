"""Joules per inference of a callable on a GPU, from NVML's energy counter, outside every timed region.

Each side runs calls in a window from step to step of the counter (``power.EnergyProbe(align=True)``), reading it
between chunks of calls, each step a sample of the power, until enough samples agree (``energy_window``'s rule).
The window's length and the idle gaps that keep the counter's steps from sampling one phase of a call are sized
here, from the counter's measured step (``docs/measurement.md``).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from .energy_window import WindowRule, energy_window
from .power import EnergyProbe, per_inference
from .timing import make_timer

# The energy window of each side, sized from the counter's measured step (~100 ms): each step's increment is one
# sample of the power, and a side runs until enough of them agree (the cell's plan prices it, ``variants.cell_plan``).
ENERGY_STEPS_MIN = 8        # fewest samples (steps, where seen one by one) to stop on the spread: from fewer it is
                            # itself too uncertain (7 degrees of freedom: the 95 % interval is 2.36 standard errors);
                            # a steady load, its steps within ~5 % of each other, stops at 8: ~1.05 s a side
ENERGY_STEPS_MAX = 11       # most steps: a side is at most 2 steps of alignment + 11 + 1 (the read that sees the
                            # last, then the wait for the next, which dates it): 1.4 s on a 0.1 s step where calls
                            # are shorter than a step, both sides 2.8 s (<= 3 s); 11 steps of a 6.6 % spread still
                            # meet the target
ENERGY_CHUNK_MS = 20.0      # calls between reads of the counter: a fifth of its step, so reads under 3/4 of a step
                            # apart see each step alone, and a side stops within ~20 ms of the step that ends it
ENERGY_POWER_REL_SE = 0.02  # stop once the mean power's relative standard error is at most this: +-4.7 % at 95 %
                            # over 8 steps (Student's t); the 5-second windows were within 3 % in simulation
ENERGY_MAX_CALLS = 5_000    # calls in one chunk, at most
ENERGY_FALLBACK_WINDOW_S = 1.0  # a counter whose step is unknown (it did not step within 1 s, twice): a fixed,
                                # unaligned window about as long as the longest aligned one, said in the note
# A call whose phase moves little from one step to the next (a period near a simple fraction or multiple of the
# step) would be sampled at one phase only: an idle gap before each chunk moves the phase (``drift_s``), its energy
# at the idle power taken out (docs/measurement.md).
ENERGY_SWEEPS = tuple(eighths / 8 for eighths in range(17))  # up to 2: capped at 1 or 1.5, more phases were left
                                                             # clustered (errors past the interval) in simulation
ENERGY_STEP_STRAY = 0.10     # the entry's step strayed -11 % to +5 % on the H200: planned over +-10 % of it
ENERGY_DRIFT_MAX_MS = 100.0  # the step unknown: the gaps sweep one call, at most this (A100/H100/H200's step)

_sleep = time.sleep  # module-level so tests can drive the clock
_counter_steps: dict[str, float] = {}  # per device: the counter's step averaged over its last window counted step by step


def energy_per_inference(device: torch.device, sides: dict[str, tuple[Callable[[], Any], float]], sync: str,
                         clocks: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Joules per inference (one call: a whole batch) of each side (CUDA only), and the clocks,
    temperatures and throttle reasons at the start and end of the timed runs (``clocks``). Each side's window:
    the module's docstring and the constants above."""
    if device.type != "cuda":
        return None
    energy: dict[str, Any] = {"timed_runs": clocks}
    timer = make_timer(device, sync)
    for side, (fn, mean_ms) in sides.items():
        energy[side] = _energy_of(device, timer, fn, mean_ms)
    return energy


def step_phases(call_s: float, chunk: int, gap_s: float, step_s: float, steps: int) -> list[float]:
    """Where in its call (0 to 1) each of the first ``steps`` steps of a window falls: the window starts on a step,
    then a gap of ``gap_s`` and ``chunk`` calls of ``call_s``, over and over (a step in a gap: 0, the next call)."""
    cycle = gap_s + chunk * call_s
    phases = []
    for step in range(1, steps + 1):
        into = (step * step_s) % cycle - gap_s
        phases.append(0.0 if into < 0 else (into % call_s) / call_s)
    return phases


def discrepancy(phases: list[float]) -> float:
    """Kuiper's discrepancy of points on the circle [0, 1): how far the share of the points in an arc strays from
    the arc's length, the most above plus the most below. 1/n for n points evenly spread, 1 for n at one place."""
    points, n = sorted(phases), len(phases)
    return (max((i + 1) / n - x for i, x in enumerate(points))
            + max(x - i / n for i, x in enumerate(points)))


def drift_s(call_ms: float, chunk: int, step_s: float | None, stray: float = 0.0) -> float:
    """The idle gap before each chunk of ``chunk`` calls of ``call_ms``: of the ``ENERGY_SWEEPS`` (a share of one
    call or one step, whichever is shorter, over the minimum window), the one whose steps fall at phases of the call
    spread most evenly (the largest discrepancy over the window lengths from ``ENERGY_STEPS_MIN`` to
    ``ENERGY_STEPS_MAX`` steps; with ``stray``, its average over steps within that share of ``step_s``). A step
    unknown: one call, at most ``ENERGY_DRIFT_MAX_MS``, over the fixed window."""
    call_s = call_ms / 1e3
    if step_s is None:
        return min(call_ms, ENERGY_DRIFT_MAX_MS) / 1e3 * chunk * call_s / ENERGY_FALLBACK_WINDOW_S
    sweep_s = min(call_s, step_s) / math.ceil(ENERGY_STEPS_MIN * step_s / (chunk * call_s))

    def unevenness(gap_s: float, step: float) -> float:
        phases = step_phases(call_s, chunk, gap_s, step, ENERGY_STEPS_MAX)
        return max(discrepancy(phases[:steps]) for steps in range(ENERGY_STEPS_MIN, ENERGY_STEPS_MAX + 1))

    steps_s = [step_s * (1 + stray * k / 4) for k in range(-4, 5)] if stray else [step_s]
    best_gap_s, best = 0.0, math.inf
    for share in ENERGY_SWEEPS:
        score = sum(unevenness(share * sweep_s, step) for step in steps_s) / len(steps_s)
        if score < best - 1e-9:
            best_gap_s, best = share * sweep_s, score
    return best_gap_s


def known_step_s(device: torch.device, measured_s: float | None) -> float | None:
    """The counter's step averaged over an earlier window on this GPU, where it agrees with the one measured at this
    window's entry (within 15 %: the same counter); else None."""
    known = _counter_steps.get(str(device))
    if measured_s is None or known is None or abs(known / measured_s - 1) > 0.15:
        return None
    return known


def _energy_of(device: torch.device, timer: Any, fn: Callable[[], Any], mean_ms: float) -> dict[str, Any]:
    """One side's energy block: the probe's report, the window's rule and why it ended, the calls and the idle gaps
    among them, joules per inference."""
    call_ms = max(mean_ms, 1e-3)
    chunk = max(1, min(ENERGY_MAX_CALLS, math.ceil(ENERGY_CHUNK_MS / call_ms)))
    calls, gaps_s, notes = 0, 0.0, []
    stopped: str | None = None
    with EnergyProbe(device, align=True) as probe:
        probe.known_step_s = known_step_s(probe.device, probe.counter_step_s)
        step_s = probe.known_step_s or probe.counter_step_s
        rule = WindowRule(ENERGY_STEPS_MIN, ENERGY_STEPS_MAX, ENERGY_POWER_REL_SE,
                          longest_s=ENERGY_STEPS_MAX * step_s if step_s else ENERGY_FALLBACK_WINDOW_S)
        gap_s = drift_s(call_ms, chunk, step_s, 0.0 if probe.known_step_s else ENERGY_STEP_STRAY)
        while probe.counting:  # no counter: no calls, no GPU time
            stopped = energy_window(probe.readings(), rule)
            if stopped:
                break
            if gap_s:  # before the calls: the region ends busy, the counter's last step sampled busy
                slept = probe.elapsed_s()
                _sleep(gap_s)
                gaps_s += probe.elapsed_s() - slept
            timer.time_calls(fn, chunk)
            calls += chunk
            probe.observe()  # a step since the last read: one sample of the power
    if probe.mean_step_s is not None:
        _counter_steps[str(probe.device)] = probe.mean_step_s
    if stopped == "fixed_window":
        notes.append(f"energy counter's step unknown: a fixed window of {ENERGY_FALLBACK_WINDOW_S:g} s, not aligned "
                     "on its steps (off by up to a step at each end)")
    elif stopped == "time_limit":
        notes.append(f"energy counter stopped stepping: the window ended after {probe.steps} steps")
    note = "; ".join(filter(None, [probe.report.get("note"), *notes])) or None
    spread = {}
    if probe.samples < ENERGY_STEPS_MIN:  # too few to say (calls of several steps: reads of whole calls, alike)
        spread = {"power_rel_se": None, "power_rel_ci95": None}
    return {**probe.report, **spread, "note": note, "steps_min": ENERGY_STEPS_MIN, "steps_max": ENERGY_STEPS_MAX,
            "power_rel_se_target": ENERGY_POWER_REL_SE, "window_stopped_by": stopped, "calls": calls,
            "idle_gaps_s": gaps_s if calls else None,
            "joules_per_inference": _joules_per_inference(probe.report, calls, gaps_s)}


def _joules_per_inference(report: dict[str, Any], calls: int, gaps_s: float) -> float | None:
    """The region's energy per call (mean power times the region's time), less the idle gaps' energy at the idle
    power measured before the window, where it was (the gaps are not the calls')."""
    joules = per_inference(report, calls) if calls else None
    if joules is None or report.get("idle_power_w") is None:
        return joules
    return joules - report["idle_power_w"] * gaps_s / calls
