"""What work beside a timing process does to its figures: the same cells timed with that work paused and running.

The interference check (``study.runner.interference_check``) times one cell, eager and compiled, in rounds; each
round times it once with the compile processes beside paused and once with them compiling, in a random order. A
round is a pair: its ratio (compiling over paused) cancels what drifts slowly, and the rounds are the independent
units, as the pairs of blocks are for a speed-up (``paired``). For eager, compiled and the speed-up alike: the
geometric mean of the rounds' ratios, with Student's t over the rounds (r - 1 degrees of freedom) on their logs.

The judgement is against a limit (2 %: the issue's): ``within`` where the whole interval lies inside it (the
rounds show the effect is smaller), ``beyond`` where the estimate itself lies outside, ``unclear`` otherwise (too
few or too noisy rounds to tell). The check passes only where all three are ``within``: a host that cannot show
its compile processes harmless pauses them (``study.runner.compile_ahead``).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Sequence

from scipy import stats as scipy_stats

LIMIT = 0.02                                  # the largest effect on eager, compiled or the speed-up let pass
SIDES = ("eager", "compiled", "speedup")
WITHIN, BEYOND, UNCLEAR = "within", "beyond", "unclear"


@dataclass(frozen=True)
class Effect:
    """Compiling over paused for one side: the geometric mean of the rounds' ratios, its 95 % interval and
    the judgement against ``limit``."""

    ratio: float
    ci95: tuple[float, float]
    judged: str
    rounds: int

    def to_dict(self) -> dict[str, object]:
        return {"ratio": round(self.ratio, 5), "ci95": [round(self.ci95[0], 5), round(self.ci95[1], 5)],
                "judged": self.judged, "rounds": self.rounds}


def effect(compiling: Sequence[float], paused: Sequence[float], limit: float = LIMIT) -> Effect:
    """The effect of compiling beside on one figure, from its value in each round under both conditions (the
    same index is the same round)."""
    if len(compiling) != len(paused) or len(compiling) < 2:
        raise ValueError(f"an effect needs two rounds or more, each with both conditions; got {len(compiling)} "
                         f"and {len(paused)}")
    logs = [math.log(c / p) for c, p in zip(compiling, paused)]
    count = len(logs)
    mean = sum(logs) / count
    spread = math.sqrt(sum((value - mean) ** 2 for value in logs) / (count - 1))
    half = float(scipy_stats.t.ppf(0.975, count - 1)) * spread / math.sqrt(count)
    low, ratio, high = math.exp(mean - half), math.exp(mean), math.exp(mean + half)
    bounds = (1 - limit, 1 + limit)
    if bounds[0] <= low and high <= bounds[1]:
        judged = WITHIN
    elif not bounds[0] <= ratio <= bounds[1]:
        judged = BEYOND
    else:
        judged = UNCLEAR
    return Effect(ratio, (low, high), judged, count)


def effects(rounds: Sequence[dict[str, dict[str, float]]], limit: float = LIMIT) -> dict[str, Effect]:
    """Each side's effect from rounds of ``{"paused": {side: value}, "compiling": {side: value}}``."""
    return {side: effect([r["compiling"][side] for r in rounds], [r["paused"][side] for r in rounds], limit)
            for side in SIDES}


def passed(found: dict[str, Effect]) -> bool:
    """Whether compiling beside moved none of the figures by the limit, as the rounds can show."""
    return all(found[side].judged == WITHIN for side in SIDES)
