"""What a record's energy block says beside its figures: the pace of each energy window, and the throttle reasons
the GPU reported while a figure was measured (``records.schema.EnergyBlock``; no torch).

The joules come from a series of calls of their own (``measurement.energy_per_inference``), which need not run at
the timed calls' pace, and a figure measured under a throttle reason was measured with the clock held down
(docs/report.md gives the H200's cases): both are said beside the figure, never hidden.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..records.schema import EnergyBlock, EnergySide

# Where a window's time per call and the timed latency lie further apart than this ratio (either way), the energy
# figure is of another pace than the latency beside it, and the page gives both.
PACE_RATIO = 1.25
# Reasons that hold no clock down: the device idle (expected at a window's end, after its synchronize).
NOT_THROTTLES = frozenset({"GpuIdle"})


def window_ms(side: EnergySide | None) -> float:
    """The energy window's time per call (ms): its calls' time over their count; NaN where not recorded."""
    if side is None or side.region_s is None or not side.calls:
        return math.nan
    return side.region_s / side.calls * 1e3


def pace_differs(window: float, timed_ms: float) -> bool:
    """Whether a window's time per call lies more than ``PACE_RATIO`` from the timed latency, either way."""
    if math.isnan(window) or timed_ms is None or math.isnan(timed_ms) or timed_ms <= 0 or window <= 0:
        return False
    return max(window / timed_ms, timed_ms / window) > PACE_RATIO


def throttles(*reason_lists: Iterable[str] | None) -> tuple[str, ...]:
    """The throttle reasons among ``reason_lists`` (start and end readings), once each, sorted; GpuIdle aside."""
    found = {str(reason) for reasons in reason_lists if isinstance(reasons, (list, tuple))  # a record's JSON
             for reason in reasons if str(reason) not in NOT_THROTTLES}
    return tuple(sorted(found))


def energy_columns(energy: EnergyBlock | None, eager_cell: bool) -> dict[str, Any]:
    """The frame's columns of a record's energy block: each side's joules per inference and window pace (``joules``,
    ``window_ms``: the row's own side, eager's for an eager cell), the throttle reasons in each side's window and in
    the timed runs (``throttled``)."""
    eager = energy.eager if energy else None
    own = eager if eager_cell else (energy.compiled if energy else None)
    timed = (energy.timed_runs or {}) if energy else {}
    return {"joules": own.joules_per_inference if own else None,
            "eager_joules": eager.joules_per_inference if eager else None,
            "window_ms": window_ms(own), "eager_window_ms": window_ms(eager),
            "energy_throttled": _side_throttles(own), "eager_energy_throttled": _side_throttles(eager),
            "throttled": throttles(timed.get("throttle_reasons_start"), timed.get("throttle_reasons_end"))}


def _side_throttles(side: EnergySide | None) -> tuple[str, ...]:
    return throttles(side.throttle_reasons_start, side.throttle_reasons_end) if side else ()

