"""Speed-up of one callable over another, measured in random-order pairs of blocks.

Like PyTorch's dynamo benchmark harness, the two are timed interleaved, so that
clock, thermal and background-load drift hit both alike; a sequential "all of A,
then all of B" measurement folds such drift into the speed-up. The timed runs are
split into many short pairs of blocks (30 by default); within each pair the order
(baseline first or candidate first) is drawn at random from a recorded seed, half
each way, so that an order effect (a cache the first block warms, a clock that
ramps) cannot favour one side. The speed-up, its 95 % interval and the p-value
come from the pairs (``paired``); the per-side statistics stay for the latency table.

Switching sides has a cost of its own that a guide-style run of 300 calls in a row never pays: on
the first GPU run (an H200) the first call of each 10-call block was 15 to 40 % slower than the
rest (ResNet-50, default mode: 2.69 against 2.28 ms), so most of a cell's outliers, and its
"noisy" flag, were the design's, not the machine's. So each block starts with ``switch_calls``
calls that are timed like the others but kept apart (``switch_ms``): the statistics and the
speed-up come from the calls after them, and the switch's cost is recorded and shown.
``between_blocks``, where given, is called after every block, outside the timed calls, and what
it returns is kept per block (a GPU's clock, say), so that what moves between blocks can be read
from the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

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
    if isinstance(switch_calls, bool) or not isinstance(switch_calls, int) or switch_calls < 0:
        raise ValueError(f"switch_calls must be an integer >= 0, got {switch_calls!r}")
    sizes = block_sizes(runs, min(DEFAULT_PAIRS, runs) if blocks is None else blocks)
    orders = pair_orders(len(sizes), order_seed)
    resolved = resolve_device(device)
    timer = timer or make_timer(resolved, sync)

    first_ms = {}
    for side, fn in (("baseline", baseline_fn), ("candidate", candidate_fn)):
        first_ms[side] = time_first_call(fn, resolved)
        for _ in range(warmup - 1):
            fn()

    fns = {"baseline": baseline_fn, "candidate": candidate_fn}
    times: dict[str, list[list[float]]] = {"baseline": [], "candidate": []}
    switches: dict[str, list[tuple[float, ...]]] = {"baseline": [], "candidate": []}
    probes: dict[str, list[Any]] = {"baseline": [], "candidate": []}
    with gc_paused():
        for size, candidate_first in zip(sizes, orders):
            for side in (("candidate", "baseline") if candidate_first else ("baseline", "candidate")):
                block = timer.time_calls(fns[side], switch_calls + size)
                switches[side].append(tuple(block[:switch_calls]))
                times[side].append(block[switch_calls:])
                if between_blocks is not None:
                    probes[side].append(between_blocks())

    def measurement(side: str) -> Measurement:
        return Measurement(times_ms=[t for block in times[side] for t in block],
                           first_call_ms=first_ms[side], device=str(resolved), timer=timer.name,
                           warmup=warmup, sync=getattr(timer, "sync", sync))

    return Comparison(baseline=measurement("baseline"), candidate=measurement("candidate"),
                      paired=paired_speedup(times["baseline"], times["candidate"], seed=order_seed),
                      order_seed=order_seed, candidate_first=orders, switch_calls=switch_calls,
                      switch_ms={side: tuple(blocks) for side, blocks in switches.items()},
                      block_probes={side: tuple(found) for side, found in probes.items()} if between_blocks else {})
