"""What a GPU's clocks do between the blocks of a comparison: read after each block, outside the timed calls.

On the first GPU run eager's latency moved with the mode it was paired with (ResNet-50 at batch 1:
3.69 ms beside the default mode, 5.06 ms beside reduce-overhead) and the records could not say why.
``BlockClocks`` reads NVML's SM clock and temperature after every block (``compare``'s
``between_blocks``), so that a clock that drops with one side shows in the record. One NVML read
costs microseconds; NVML is opened once for the whole comparison. Where NVML is missing (a CPU, a
host without the library) it reads nothing and ``compare`` keeps no probe.
"""

from __future__ import annotations

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
            nvml = self._nvml_given
            if nvml is None:
                import pynvml

                nvml = pynvml
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
