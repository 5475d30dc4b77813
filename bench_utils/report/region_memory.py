"""How much memory a measured region needed, and which figure that is: the report's ``peak_bytes`` columns.

A CUDA region is the allocator's peak reserved increase (with a CUDA-graph pool where the mode asked for graphs);
a CPU region, torch's profiler's allocator peak, else (older records) resident memory's peak increase where it is
a figure at all. Read from a record's memory block (``records.schema.MemoryBlock``); no torch.
"""

from __future__ import annotations

from typing import Any

from ..records.schema import MemoryBlock

# Which figure a region's memory is (frame's ``peak_method`` columns); None: no memory was measured.
CUDA_RESERVED = "cuda_reserved"    # the CUDA allocator's peak reserved increase (+ a CUDA-graph pool)
CPU_ALLOCATOR = "cpu_allocator"    # torch's profiler: bytes the CPU allocator held at once in one call
RESIDENT = "resident"              # resident memory's peak increase (records without the profiler's figure)
NOT_MEASURABLE = "not_measurable"  # a CPU region measured, but neither figure could see its memory
# Below this, a resident increase is the probe's own pages (20-28 KiB in cpu-quick's records), not the call's:
# after warm-up the allocator reuses freed blocks and the high-water mark does not move.
RESIDENT_FLOOR_BYTES = 2**20


def region_columns(prefix: str, memory: MemoryBlock, cuda: bool, *, graphs: bool = False) -> dict[str, Any]:
    """``{prefix}peak_bytes`` and ``{prefix}peak_method`` of one side's memory block (``region_memory``)."""
    value, method = region_memory(memory, cuda, graphs=graphs)
    return {f"{prefix}peak_bytes": value, f"{prefix}peak_method": method}


def region_memory(memory: MemoryBlock, cuda: bool, *, graphs: bool = False) -> tuple[float | None, str | None]:
    """What a measured region needed on top of what was alive before it, and which figure that is.

    On CUDA, the allocator's peak reserved increase and, for a model run in CUDA graphs (``graphs``), their pool:
    a replay allocates nothing, its activations live in the pool its recording made, so without it a CUDA-graph
    mode would show near 0 beside eager's. The pool is whole segments, so it is set beside reserved memory, never
    allocated bytes (small models would look several times larger); a pool not measured leaves the figure None.
    On a CPU, the profiler's allocator peak; in older records, resident memory's peak increase where it reached
    ``RESIDENT_FLOOR_BYTES``, else ``NOT_MEASURABLE``: resident memory cannot see blocks the allocator reuses."""
    if cuda:
        increase = memory.cuda_peak_reserved_increase_bytes
        if increase is not None and graphs:
            pool = memory.cuda_graph_pool_bytes
            increase = None if pool is None else increase + pool
        return increase, None if increase is None else CUDA_RESERVED
    if memory.cpu_activation_peak_bytes is not None:
        return memory.cpu_activation_peak_bytes, CPU_ALLOCATOR
    if not memory.probed:  # the probe did not run (it failed, or the cell did)
        return None, None
    resident = memory.rss_peak_increase_bytes
    if resident is not None and resident >= RESIDENT_FLOOR_BYTES:
        return resident, RESIDENT
    return None, NOT_MEASURABLE
