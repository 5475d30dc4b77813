"""NVML's handle of a torch CUDA device, found by UUID so that any CUDA_VISIBLE_DEVICES mask maps to the right GPU
(docs/measurement.md, "Which GPU NVML reads"): NVML numbers every GPU in PCI bus order, CUDA only the visible ones.
"""

from __future__ import annotations

import os
from typing import Any

import torch

UUID_PREFIXES = ("GPU-", "MIG-")  # a whole GPU, or a MIG instance


def torch_uuid(device: torch.device) -> str | None:
    """``device``'s UUID as CUDA gives it (no prefix); None without CUDA or without the property."""
    try:
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
    except Exception:  # no CUDA driver or device here
        return None
    return uuid or None


def _visible_entry(index: int) -> str | None:
    """The CUDA_VISIBLE_DEVICES entry that names CUDA device ``index``; None without a mask."""
    entries = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return entries[index] if index < len(entries) else None


def nvml_handle(nvml: Any, device: torch.device) -> tuple[Any, str]:
    """NVML's handle of ``device``, and how it was found: ``"uuid GPU-..."`` (or ``MIG-...``), or
    ``"index N"`` where no UUID is known. Raises (LookupError or NVML's error) rather than
    give another GPU's handle."""
    uuid = torch_uuid(device)
    if uuid is not None:
        candidates = [prefix + uuid for prefix in UUID_PREFIXES]
    else:  # no UUID from torch: one from the mask, where it names devices by UUID
        entry = _visible_entry(device.index or 0)
        candidates = [entry] if entry is not None and entry.startswith(UUID_PREFIXES) else []
        if entry is not None and not candidates and not entry.isdigit():
            raise LookupError(f"cannot map CUDA_VISIBLE_DEVICES entry {entry!r} to an NVML device")
        if not candidates:  # an index mask, or none
            index = int(entry) if entry is not None else device.index or 0
            return nvml.nvmlDeviceGetHandleByIndex(index), f"index {index}"
    errors = []
    for candidate in candidates:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(candidate), f"uuid {candidate}"
        except Exception as exc:  # not a device of that kind: try the other prefix
            errors.append(f"{candidate}: {type(exc).__name__}: {exc}")
    raise LookupError("NVML has no device with this UUID: " + "; ".join(errors))
