"""Activation memory of one CPU call, from torch's profiler: the most bytes its allocations held at once.

Resident memory cannot see a warm CPU forward pass's activations (the allocator reuses the blocks the last call
freed); the profiler records each allocation and free of torch's CPU allocator. What is not counted, and the
figures: docs/measurement.md, *Activation memory on a CPU*. Fields: ``FIELDS``; the peak is None where not measured,
never 0, and ``cpu_activation_note`` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from .devices import quiet_profiler

METHOD = "torch.profiler profile_memory"
FIELDS = ("cpu_activation_peak_bytes", "cpu_activation_allocations", "cpu_activation_method",
          "cpu_activation_note")


def peak_live_bytes(events: Iterable[tuple[int, int]]) -> int:
    """The most bytes live at once among the blocks allocated in ``events``: (address, size) in time
    order, a positive size an allocation and a negative one a free. A free of a block allocated before
    the events is skipped, because that block was alive at the start, which the peak is counted above."""
    live: dict[int, int] = {}
    current = peak = 0
    for address, size in events:
        if size > 0:
            current += size - live.get(address, 0)  # an address whose free another thread made: replaced
            live[address] = size
            peak = max(peak, current)
        elif address in live:
            current -= live.pop(address)
    return peak


def allocation_events(result: Any) -> list[tuple[int, int]]:
    """(address, size) of the CPU allocator's events in a profiler's result, in time order."""
    allocation = torch._C._profiler._EventType.Allocation
    found = []
    pending = list(result.experimental_event_tree())  # memory events hang under the operator that made them
    while pending:
        event = pending.pop()
        pending.extend(event.children)
        fields = event.extra_fields
        if event.tag == allocation and fields.device.type == "cpu":
            found.append((event.start_time_ns, fields.ptr, fields.alloc_size))
    found.sort(key=lambda item: item[0])
    return [(address, size) for _, address, size in found]


def cpu_activation_peak(fn: Callable[[], Any]) -> dict[str, Any]:
    """One call of ``fn`` under torch's profiler, and the fields above. The profiler slows the call, so
    this never runs inside a timed region. A failure leaves the figure None and says why in the note."""
    quiet_profiler()  # at use: every process that profiles passes here or in work_profile first
    report: dict[str, Any] = {**dict.fromkeys(FIELDS), "cpu_activation_method": METHOD}
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            # the output is not kept: freed inside the profile. torch's reporter keeps the size of a block
            # freed while no profile runs, and reports it again for a later block at that address
            fn()
        events = allocation_events(profiler.profiler.kineto_results)
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        report["cpu_activation_note"] = f"torch.profiler failed: {type(exc).__name__}: {first_line}"[:300]
        return report
    allocations = sum(1 for _, size in events if size > 0)
    report["cpu_activation_allocations"] = allocations
    if allocations:
        report["cpu_activation_peak_bytes"] = peak_live_bytes(events)
    else:
        report["cpu_activation_note"] = "no allocation reached torch's CPU allocator on the calling thread"
    return report
