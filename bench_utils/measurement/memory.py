"""Memory of a measured region: ``with MemoryProbe(...) as probe: ...``, then ``probe.report``.

Fields in bytes, None (never 0) where they cannot be measured here; what each means, and why the probe empties the
allocator's cache at entry: docs/measurement.md, *Memory*.
"""

from __future__ import annotations

from collections.abc import Mapping
import os
import re
import threading
from typing import Any, overload

import psutil
import torch

from .devices import resolve_device
from .nvml_device import nvml_handle

DEFAULT_INTERVAL_S = 0.005
CUDA_FIELDS = ("cuda_allocated_entry_bytes", "cuda_reserved_entry_bytes",
               "cuda_peak_allocated_bytes", "cuda_peak_reserved_bytes",
               "cuda_peak_allocated_increase_bytes", "cuda_peak_reserved_increase_bytes",
               "cuda_graph_pool_bytes")


# --- sizes of things --------------------------------------------------------

def parameter_stats(model: torch.nn.Module) -> dict[str, int]:
    """Parameter count and bytes (parameters() without buffers), and buffer bytes."""
    params = list(model.parameters())
    return {
        "param_count": sum(p.numel() for p in params),
        "param_bytes": sum(p.numel() * p.element_size() for p in params),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in model.buffers()),
    }


def tensor_bytes(obj: Any) -> int:
    """Bytes of every distinct tensor found in ``obj`` (nested dicts, lists, tuples)."""
    seen: set[tuple[int, int]] = set()
    total = 0

    def visit(item: Any) -> None:
        nonlocal total
        if isinstance(item, torch.Tensor):
            key = (item.data_ptr(), item.numel())
            if key not in seen:
                seen.add(key)
                total += item.numel() * item.element_size()
        elif isinstance(item, Mapping):
            for value in item.values():
                visit(value)
        elif isinstance(item, (list, tuple)):
            for value in item:
                visit(value)

    visit(obj)
    return total


# --- resident memory ----------------------------------------------------------

_VMHWM = re.compile(r"^VmHWM:\s+(\d+)\s+kB", re.MULTILINE)


def _read_vmhwm() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            match = _VMHWM.search(status.read())
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def _reset_vmhwm() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return _read_vmhwm() is not None


# --- NVML -----------------------------------------------------------------------

class _Nvml:
    """NVML handle for one GPU, or nothing where NVML or the GPU is absent."""

    def __init__(self, device: torch.device) -> None:
        self.handle = None
        self.lookup: str | None = None  # how the device was found (nvml_device.nvml_handle)
        if device.type != "cuda":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            self.handle, self.lookup = nvml_handle(pynvml, device)
        except Exception:  # NVML missing or refusing, or no such device: the fields stay None
            self.handle = None

    def _query(self, getter):
        """``getter(pynvml, handle)``, or None where NVML is absent or refuses."""
        if self.handle is None:
            return None
        try:
            return getter(self._pynvml, self.handle)
        except Exception:
            return None

    def device_used(self) -> int | None:
        return self._query(lambda nvml, handle: int(nvml.nvmlDeviceGetMemoryInfo(handle).used))

    def device_total(self) -> int | None:
        return self._query(lambda nvml, handle: int(nvml.nvmlDeviceGetMemoryInfo(handle).total))

    def process_used(self) -> int | None:
        """This process's GPU memory; None where NVML cannot see it (PID namespaces)."""
        processes = self._query(lambda nvml, handle: nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        for process in processes or []:
            if process.pid == os.getpid() and process.usedGpuMemory is not None:
                return int(process.usedGpuMemory)
        return None


@overload
def _max(current: int, value: int | None) -> int: ...
@overload
def _max(current: int | None, value: int | None) -> int | None: ...
def _max(current: int | None, value: int | None) -> int | None:
    if value is None:
        return current
    return value if current is None else max(current, value)


# --- CUDA allocator ---------------------------------------------------------------

class CudaMemoryBackend:
    """The CUDA allocator calls the probe makes; replaceable in tests."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def reset_peak_memory_stats(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def memory_allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device)

    def memory_reserved(self) -> int:
        return torch.cuda.memory_reserved(self.device)

    def max_memory_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device)

    def max_memory_reserved(self) -> int:
        return torch.cuda.max_memory_reserved(self.device)

    def memory_snapshot(self) -> list[dict[str, Any]]:
        return torch.cuda.memory_snapshot()  # the allocator's segments, on every device


# --- the probe ------------------------------------------------------------------

class MemoryProbe:
    """``with MemoryProbe(device, model=m, inputs=x) as probe: ...``; then ``probe.report``."""

    def __init__(self, device: str | torch.device | None = None, *,
                 model: torch.nn.Module | None = None, inputs: Any = None,
                 interval_s: float = DEFAULT_INTERVAL_S, cuda_backend: Any | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.device = resolve_device(device)
        self.model = model
        self.inputs = inputs
        self.interval_s = interval_s
        # None: not a CUDA device
        self.cuda_backend = ((cuda_backend or CudaMemoryBackend(self.device)) if self.device.type == "cuda"
                             else None)
        self.report: dict[str, Any] = {}
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rss_peak = 0  # of the samples, the first at entry
        self._nvml_device_peak: int | None = None
        self._nvml_process_peak: int | None = None
        self._samples = 0

    def _sample(self) -> None:
        self._rss_peak = _max(self._rss_peak, self._process.memory_info().rss)
        self._nvml_device_peak = _max(self._nvml_device_peak, self._nvml.device_used())
        self._nvml_process_peak = _max(self._nvml_process_peak, self._nvml.process_used())
        self._samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> "MemoryProbe":
        self._nvml = _Nvml(self.device)
        cuda = self.cuda_backend
        if cuda is not None:
            cuda.synchronize()
            cuda.empty_cache()  # reserved at entry is then what is in use, not a stale cache
            cuda.reset_peak_memory_stats()
            self._cuda_entry = (cuda.memory_allocated(), cuda.memory_reserved())
        self._rss_entry = self._process.memory_info().rss
        self._vmhwm_ok = _reset_vmhwm()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="memory-probe", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.cuda_backend is not None:
            self.cuda_backend.synchronize()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        self.report = self._build_report()

    def _read_cuda(self, cuda: CudaMemoryBackend) -> dict[str, Any]:
        allocated, reserved = self._cuda_entry
        peak_allocated, peak_reserved = cuda.max_memory_allocated(), cuda.max_memory_reserved()
        index = self.device.index or 0
        try:  # segments of this device's private pools (a (0, 0) pool id is the default pool)
            pool: int | None = sum(int(seg["total_size"]) for seg in cuda.memory_snapshot()
                                   if seg.get("device", index) == index
                                   and tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0))
        except Exception:  # a snapshot this torch cannot give: not measured
            pool = None
        increase = peak_allocated - allocated
        return {"cuda_allocated_entry_bytes": allocated, "cuda_reserved_entry_bytes": reserved,
                "cuda_peak_allocated_bytes": peak_allocated,
                "cuda_peak_reserved_bytes": peak_reserved,
                "cuda_peak_allocated_increase_bytes": increase,
                "cuda_peak_reserved_increase_bytes": peak_reserved - reserved,
                "cuda_graph_pool_bytes": pool}

    def _build_report(self) -> dict[str, Any]:
        rss_peak = self._rss_peak
        method = "sampled"
        if self._vmhwm_ok:
            rss_peak = _max(rss_peak, _read_vmhwm())
            method = "sampled+vmhwm"
        report: dict[str, Any] = {
            "device": str(self.device),
            "param_count": None, "param_bytes": None, "buffer_bytes": None,
            "input_bytes": tensor_bytes(self.inputs) if self.inputs is not None else None,
            "rss_entry_bytes": self._rss_entry,
            "rss_peak_bytes": rss_peak,
            "rss_peak_increase_bytes": rss_peak - self._rss_entry,
            "rss_peak_method": method,
            "rss_samples": self._samples,
            **dict.fromkeys(CUDA_FIELDS),
            "nvml_device_total_bytes": self._nvml.device_total(),
            "nvml_device_used_peak_bytes": self._nvml_device_peak,
            "nvml_process_used_peak_bytes": self._nvml_process_peak,
            "nvml_device": self._nvml.lookup if self._nvml.handle is not None else None,
        }
        if self.model is not None:
            report.update(parameter_stats(self.model))
        if self.cuda_backend is not None:
            report.update(self._read_cuda(self.cuda_backend))
        return report
