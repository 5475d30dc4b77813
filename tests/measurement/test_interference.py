"""The effect of compiling beside timing, judged against 2 % (``measurement.interference``), tested on
simulated rounds whose true effect is known."""

import math
import random

import pytest

from bench_utils.measurement.interference import BEYOND, UNCLEAR, WITHIN, effect, effects, passed


def _rounds(true_effect: float, noise: float, rounds: int, rng: random.Random) -> tuple[list[float], list[float]]:
    """Each round: a level that drifts (shared by both conditions), each condition's own noise, and the effect on
    the compiling one."""
    paused, compiling = [], []
    for _ in range(rounds):
        level = 2.0 * math.exp(rng.gauss(0, 0.05))
        paused.append(level * math.exp(rng.gauss(0, noise)))
        compiling.append(level * (1 + true_effect) * math.exp(rng.gauss(0, noise)))
    return compiling, paused


def test_its_interval_covers_the_true_effect_about_95_percent_of_the_time():
    rng = random.Random(1)
    covered = 0
    for _ in range(1000):
        found = effect(*_rounds(0.015, 0.01, 6, rng))
        covered += found.ci95[0] <= 1.015 <= found.ci95[1]
    assert 930 <= covered <= 970


def test_a_host_where_compiling_moves_nothing_passes_and_one_where_it_moves_5_percent_fails():
    rng = random.Random(2)
    harmless = [effect(*_rounds(0.0, 0.003, 6, rng)).judged for _ in range(200)]
    assert harmless.count(WITHIN) >= 190  # quiet rounds show it
    harmful = [effect(*_rounds(0.05, 0.003, 6, rng)).judged for _ in range(200)]
    assert harmful.count(BEYOND) == 200


def test_rounds_too_noisy_to_tell_are_mostly_unclear_and_seldom_a_pass():
    rng = random.Random(3)
    judged = [effect(*_rounds(0.0, 0.02, 4, rng)).judged for _ in range(200)]
    # the true effect is nil, but 4 rounds of 2 % noise cannot show it within 2 %: a pass only where a draw's
    # spread came out small by chance (the t interval's own 2.5 % or so)
    assert judged.count(UNCLEAR) >= 140 and judged.count(WITHIN) <= 10


def test_the_check_passes_only_where_every_side_is_within():
    rounds = [{"paused": {"eager": 2.0, "compiled": 1.0, "speedup": 2.0},
               "compiling": {"eager": 2.0 * f, "compiled": 1.0, "speedup": 2.0 * f}} for f in (1.001, 0.999, 1.0)]
    assert passed(effects(rounds))
    slower = [{**r, "compiling": {"eager": 2.2, "compiled": 1.0, "speedup": 2.2}} for r in rounds]
    found = effects(slower)
    assert not passed(found) and found["eager"].judged == BEYOND and found["compiled"].judged == WITHIN


def test_one_round_is_not_an_effect():
    with pytest.raises(ValueError, match="two rounds"):
        effect([1.0], [1.0])
