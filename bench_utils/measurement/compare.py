"""Speed-up of one callable over another, measured in random-order pairs of blocks (docs/measurement.md).

Interleaved, so that drift hits both sides alike, each pair's order drawn from a recorded seed so that an order
effect cannot favour one; the statistics come from the pairs (``paired``). ``compare_many`` times one baseline in the
same rounds as several candidates (``round_orders``), so a row has one eager figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from .devices import resolve_device
from .paired import PairedSpeedup, paired_speedup
from .timing import (SYNC_PER_CALL, Measurement, check_arguments, check_sync, gc_paused, make_timer,
                     time_first_call)

DEFAULT_PAIRS = 30
SWITCH_CALLS = 1   # calls at the start of every block kept out of the statistics (see above)


@dataclass(frozen=True)
class Comparison:
    """Two interleaved Measurements and the candidate's paired speed-up over the baseline."""

    baseline: Measurement
    candidate: Measurement
    paired: PairedSpeedup
    order_seed: int
    candidate_first: tuple[bool, ...]   # per pair: was the candidate's block timed first?
    switch_calls: int = 0               # calls at each block's start, kept out of the statistics
    switch_ms: dict[str, tuple[tuple[float, ...], ...]] = field(default_factory=dict)  # side -> per block
    block_probes: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # side -> between_blocks' per block

    def block_runs(self) -> list[int]:
        """Timed calls per block (the same on both sides), switch calls not counted."""
        return block_sizes(self.baseline.runs, self.blocks)

    blocks = property(lambda self: self.paired.pairs)
    speedup_mean = property(lambda self: self.paired.mean)
    speedup_mean_ci95 = property(lambda self: self.paired.mean_ci95)
    speedup_median = property(lambda self: self.paired.median)
    speedup_median_ci95 = property(lambda self: self.paired.median_ci95)
    pvalue = property(lambda self: self.paired.pvalue)
    excludes_one = property(lambda self: self.paired.excludes_one)
    median_excludes_one = property(lambda self: self.paired.median_excludes_one)

    @property
    def order(self) -> str:
        """The pairs in the order run, as a record keeps it: "c" where the candidate's block came first, else "b"."""
        return "".join("c" if first else "b" for first in self.candidate_first)


def block_sizes(runs: int, blocks: int) -> list[int]:
    """Split ``runs`` into ``blocks`` near-equal block sizes (the first ones larger)."""
    if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks <= runs:
        raise ValueError(f"blocks must be an integer from 1 to runs ({runs}), got {blocks!r}")
    return [len(chunk) for chunk in np.array_split(np.arange(runs), blocks)]


def pair_orders(pairs: int, seed: int) -> tuple[bool, ...]:
    """Which pairs time the candidate first: half of them (one more or less), at random."""
    rng = np.random.default_rng(seed)
    candidate_firsts = pairs // 2 + (pairs % 2) * int(rng.integers(2))  # an odd pair out: a coin
    return tuple(bool(x) for x in rng.permutation(np.arange(pairs) < candidate_firsts))


def compare(baseline_fn: Callable[[], Any], candidate_fn: Callable[[], Any], *,
            warmup: int = 10, runs: int = 300, blocks: int | None = None,
            device: str | torch.device | None = None, timer: Any | None = None,
            sync: str = SYNC_PER_CALL, order_seed: int = 0, switch_calls: int = SWITCH_CALLS,
            between_blocks: Callable[[], Any] | None = None) -> Comparison:
    """Measure both callables in ``blocks`` pairs of blocks (default: 30, or ``runs`` if fewer).

    Each side gets its first call timed apart and ``warmup`` untimed calls in all;
    then each pair times one block of ``switch_calls + runs / blocks`` calls of each side, in the
    pair's random order (``order_seed``): the first ``switch_calls`` of a block are its switch
    calls, kept apart from the ``runs`` that make the statistics. ``between_blocks()`` runs after
    each block, outside the timed calls; its results are kept per side and block.
    """
    check_arguments(baseline_fn, warmup, runs, name="baseline_fn")
    check_arguments(candidate_fn, warmup, runs, name="candidate_fn")
    check_sync(sync)
    check_switch_calls(switch_calls)
    sizes = block_sizes(runs, min(DEFAULT_PAIRS, runs) if blocks is None else blocks)
    orders = pair_orders(len(sizes), order_seed)
    resolved = resolve_device(device)
    timer = timer or make_timer(resolved, sync)

    first_ms = _first_calls({"baseline": baseline_fn, "candidate": candidate_fn}, resolved, warmup)
    sides_in_order = [("candidate", "baseline") if first else ("baseline", "candidate") for first in orders]
    times, switches, probes = _timed_rounds({"baseline": baseline_fn, "candidate": candidate_fn}, sides_in_order,
                                            sizes, timer, switch_calls, between_blocks)

    def measurement(side: str) -> Measurement:
        return _measurement(times[side], first_ms[side], resolved, timer, warmup, sync)

    return Comparison(baseline=measurement("baseline"), candidate=measurement("candidate"),
                      paired=paired_speedup(times["baseline"], times["candidate"], seed=order_seed),
                      order_seed=order_seed, candidate_first=orders, switch_calls=switch_calls,
                      switch_ms={side: tuple(blocks) for side, blocks in switches.items()},
                      block_probes={side: tuple(found) for side, found in probes.items()} if between_blocks else {})


@dataclass(frozen=True)
class RowComparison:
    """One baseline timed in the same rounds as several candidates: each candidate's ``Comparison`` against the
    one baseline series, and the rounds' order (``sides``' indices per round: 0 is the baseline)."""

    comparisons: dict[str, Comparison]
    sides: tuple[str, ...]                  # the baseline's name, then the candidates'
    round_order: tuple[tuple[int, ...], ...]

    @property
    def baseline(self) -> Measurement:
        return next(iter(self.comparisons.values())).baseline

    def order_text(self) -> list[str]:
        """Each round's order as a record keeps it: the sides' indices, "021" (0: the baseline)."""
        return ["".join(str(side) for side in order) for order in self.round_order]


def round_orders(rounds: int, sides: int, seed: int) -> tuple[tuple[int, ...], ...]:
    """The order of ``sides`` blocks in each of ``rounds`` rounds: half the rounds random permutations, the other
    half the same permutations reversed (an odd round out: one more at random), shuffled. Every two sides are
    then timed in either order equally often (to one round), so an order effect cannot favour one of them; with
    two sides it is ``pair_orders``' balance."""
    rng = np.random.default_rng(seed)
    drawn = [tuple(int(i) for i in rng.permutation(sides)) for _ in range(rounds // 2)]
    orders = drawn + [order[::-1] for order in drawn]
    if rounds % 2:
        orders.append(tuple(int(i) for i in rng.permutation(sides)))
    return tuple(orders[i] for i in rng.permutation(rounds))


def compare_many(baseline_fn: Callable[[], Any], candidates: Mapping[str, Callable[[], Any]], *,
                 baseline_name: str = "baseline", warmup: int = 10, runs: int = 300, blocks: int | None = None,
                 device: str | torch.device | None = None, timer: Any | None = None, sync: str = SYNC_PER_CALL,
                 order_seed: int = 0, switch_calls: int = SWITCH_CALLS,
                 between_blocks: Callable[[], Any] | None = None) -> RowComparison:
    """``compare`` for several candidates at once: in each of ``blocks`` rounds one block of the baseline and of
    every candidate, in the round's random order (``round_orders``), so that one baseline series is timed in the
    same span as every candidate and each candidate's speed-up is paired, round by round, with it."""
    if not candidates:
        raise ValueError("compare_many needs at least one candidate")
    names = (baseline_name, *candidates)
    if len(set(names)) != len(names):
        raise ValueError(f"the sides need distinct names, got {list(names)}")
    fns = {baseline_name: baseline_fn, **candidates}
    for name, fn in fns.items():
        check_arguments(fn, warmup, runs, name=name)
    check_sync(sync)
    check_switch_calls(switch_calls)
    sizes = block_sizes(runs, min(DEFAULT_PAIRS, runs) if blocks is None else blocks)
    orders = round_orders(len(sizes), len(names), order_seed)
    resolved = resolve_device(device)
    timer = timer or make_timer(resolved, sync)
    first_ms = _first_calls(fns, resolved, warmup)
    times, switches, probes = _timed_rounds(fns, [[names[i] for i in order] for order in orders], sizes, timer,
                                            switch_calls, between_blocks)
    baseline = _measurement(times[baseline_name], first_ms[baseline_name], resolved, timer, warmup, sync)
    comparisons = {}
    for index, name in enumerate(names[1:], start=1):
        sides = {"baseline": baseline_name, "candidate": name}
        comparisons[name] = Comparison(
            baseline=baseline, candidate=_measurement(times[name], first_ms[name], resolved, timer, warmup, sync),
            paired=paired_speedup(times[baseline_name], times[name], seed=order_seed), order_seed=order_seed,
            candidate_first=tuple(order.index(index) < order.index(0) for order in orders),
            switch_calls=switch_calls,
            switch_ms={side: tuple(switches[key]) for side, key in sides.items()},
            block_probes={side: tuple(probes[key]) for side, key in sides.items()} if between_blocks else {})
    return RowComparison(comparisons, names, orders)


def check_switch_calls(switch_calls: Any) -> None:
    if isinstance(switch_calls, bool) or not isinstance(switch_calls, int) or switch_calls < 0:
        raise ValueError(f"switch_calls must be an integer >= 0, got {switch_calls!r}")


def _first_calls(fns: Mapping[str, Callable[[], Any]], device: torch.device, warmup: int) -> dict[str, float]:
    """Each side's first call, timed apart, then the rest of its ``warmup`` untimed calls."""
    first_ms = {}
    for side, fn in fns.items():
        first_ms[side] = time_first_call(fn, device)
        for _ in range(warmup - 1):
            fn()
    return first_ms


def _timed_rounds(fns: Mapping[str, Callable[[], Any]], orders: Sequence[Sequence[str]], sizes: Sequence[int],
                  timer: Any, switch_calls: int, between_blocks: Callable[[], Any] | None
                  ) -> tuple[dict[str, list[list[float]]], dict[str, list[tuple[float, ...]]], dict[str, list[Any]]]:
    """Per round, one block of every side in the round's order: each side's timed calls per block, its switch
    calls per block, and what ``between_blocks`` returned after each of its blocks."""
    times: dict[str, list[list[float]]] = {side: [] for side in fns}
    switches: dict[str, list[tuple[float, ...]]] = {side: [] for side in fns}
    probes: dict[str, list[Any]] = {side: [] for side in fns}
    with gc_paused():
        for size, order in zip(sizes, orders):
            for side in order:
                block = timer.time_calls(fns[side], switch_calls + size)
                switches[side].append(tuple(block[:switch_calls]))
                times[side].append(block[switch_calls:])
                if between_blocks is not None:
                    probes[side].append(between_blocks())
    return times, switches, probes


def _measurement(blocks: list[list[float]], first_ms: float, device: torch.device, timer: Any, warmup: int,
                 sync: str) -> Measurement:
    return Measurement(times_ms=[t for block in blocks for t in block], first_call_ms=first_ms, device=str(device),
                       timer=timer.name, warmup=warmup, sync=getattr(timer, "sync", sync))
