"""Which device a measurement runs on (``cpu`` or ``cuda``: anything else is refused, not timed wrongly), and how
to wait for it."""

from __future__ import annotations

import logging
import os

import torch

from ..errors import UserError

SUPPORTED_DEVICE_TYPES = ("cpu", "cuda")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """Turn ``device`` into a ``torch.device`` that this machine can run; ``None`` means ``cuda`` when CUDA is
    available, else ``cpu`` (pass the device explicitly for CPU work on a GPU host)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UserError(
            f"unknown device {device!r}: use one of {', '.join(SUPPORTED_DEVICE_TYPES)} "
            f"(optionally with an index, such as 'cuda:1'); {this_machine_has()}"
        ) from exc
    if resolved.type not in SUPPORTED_DEVICE_TYPES:
        raise UserError(
            f"device {str(resolved)!r} is not supported: use one of "
            f"{', '.join(SUPPORTED_DEVICE_TYPES)}; {this_machine_has()}"
        )
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"device {str(resolved)!r}: this machine has no CUDA GPU that torch can use "
                            f"(torch.cuda.is_available() is False); {this_machine_has()}")
        count = torch.cuda.device_count()
        index = resolved.index if resolved.index is not None else torch.cuda.current_device()
        if not 0 <= index < count:
            raise UserError(f"device {str(resolved)!r} does not exist; {this_machine_has()}")
        resolved = torch.device("cuda", index)
    return resolved


def this_machine_has() -> str:
    """The devices a measurement can use here, said in words: "this machine has: cpu, cuda:0 (NVIDIA H200)"."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{index} ({torch.cuda.get_device_name(index)})" for index in range(torch.cuda.device_count())]
    return "this machine has: " + ", ".join(found)


def indexed(device: str | torch.device) -> torch.device:
    """``device`` with its index: ``cuda`` is the current GPU, ``cuda:0``. Some CUDA calls refuse a device
    without one (torch 2.11's ``set_per_process_memory_fraction``: "Expected a torch.device with a specified
    index"), so every CUDA call that takes a device gets this."""
    resolved = torch.device(device)
    if resolved.type == "cuda" and resolved.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return resolved


def synchronize(device: torch.device) -> None:
    """Wait until all queued work on ``device`` has finished (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def quiet_profiler() -> None:
    """Silence kineto's start and stop lines on stderr; it reads KINETO_LOG_LEVEL once, at the process's first
    profile, so every caller that profiles sets it just before (docs/measurement.md, "Memory")."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def quiet_toolchain_logs() -> None:
    """On CPU-only hosts torch's C++ toolchain logs "No CUDA runtime is found": noise."""
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
