"""A smaller GPU on a larger one: PyTorch's CUDA allocator capped at a card's memory.

A grid's ``gpu_memory_gib: 16`` measures on an H100 what a 16 GB card would let through (a cell that needs more is
``oom``), with ``torch.cuda.set_per_process_memory_fraction``, once per kernel before it allocates anything on the
GPU. What it does not emulate (memory outside the allocator, the card's speed): docs/measurement.md.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError

GIB = 2**30


def check_gpu_memory_gib(value: object) -> None:
    """UserError unless ``value`` is a positive number of GiB (a grid's check and the kernel's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise UserError(f"must be a positive number of GiB (a 16 GB card: 16), got {value!r}")


def gpu_memory_cap(gpu_memory_gib: float | None, device: str) -> dict[str, Any]:
    """Cap ``device``'s allocator at ``gpu_memory_gib`` GiB; return what a record's config keeps.

    None: no cap (``{}``). A cap at or above the GPU's own memory changes nothing, and says so
    (``gpu_memory_fraction`` 1.0). UserError for a CPU device or a cap that is not a positive number
    (``check_gpu_memory_gib``).
    """
    if gpu_memory_gib is None:
        return {}
    try:
        check_gpu_memory_gib(gpu_memory_gib)
    except UserError as exc:
        raise UserError(f"gpu_memory_gib {exc}") from None
    if not str(device).startswith("cuda"):
        raise UserError(f"gpu_memory_gib caps a GPU's memory: it applies to CUDA cells, not {device}")
    import torch

    from .devices import indexed

    cuda_device = indexed(device)  # torch 2.11 refuses "cuda" without an index here
    total = int(torch.cuda.get_device_properties(cuda_device).total_memory)
    fraction = min(1.0, gpu_memory_gib * GIB / total)
    if fraction < 1.0:
        torch.cuda.set_per_process_memory_fraction(fraction, cuda_device)
    return {"gpu_memory_fraction": round(fraction, 6), "gpu_total_memory_bytes": total}
