"""What a GPU's clocks do between the blocks of a comparison: read after each block, outside the timed calls.

Why (eager's latency moved with the mode it was paired with): docs/measurement.md, *What moves between blocks*.
NVML is opened once for the whole comparison; one read costs microseconds. Where NVML is missing it reads nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from .nvml_device import nvml_handle


class BlockClocks:
    """``with BlockClocks(device) as read: compare(..., between_blocks=read)``; ``read`` is None where
    NVML cannot read this device (``note`` says why)."""

    def __init__(self, device: torch.device, nvml: Any = None) -> None:
        self.device, self._nvml_given = device, nvml
        self._nvml: Any = None  # the pynvml module (or a fake), once initialized
        self._handle: Any = None
        self.note: str | None = None

    def __enter__(self):
        if self.device.type != "cuda":
            self.note = f"no NVML on {self.device.type}"
            return None
        try:
            nvml = self._nvml_given if self._nvml_given is not None else importlib.import_module("pynvml")
            nvml.nvmlInit()
            self._nvml = nvml
            self._handle, _ = nvml_handle(nvml, self.device)
        except Exception as exc:
            self.note = f"NVML unavailable: {type(exc).__name__}: {exc}"
            self.__exit__()
            return None
        return self.read

    def read(self) -> dict[str, int | None]:
        """The SM clock (MHz) and temperature (C) now; None for a figure NVML refuses."""
        nvml, handle = self._nvml, self._handle

        def query(getter):
            try:
                return int(getter())
            except Exception:
                return None

        return {"sm_clock_mhz": query(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                "temperature_c": query(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))}

    def __exit__(self, *exc_info: Any) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()  # NVML counts inits: this releases only ours
            except Exception:
                pass
        self._nvml = None
