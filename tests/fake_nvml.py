"""A stand-in for the pynvml module: two GPUs, this process using 1 GiB on GPU 1."""

import os
import types

NVML_CLOCK_SM = 1


def make_fake_pynvml(fail_init=False):
    nvml = types.ModuleType("pynvml")
    memory = {0: (80 * 2**30, 3 * 2**30), 1: (80 * 2**30, 5 * 2**30)}  # total, used

    def nvmlInit():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    nvml.nvmlInit = nvmlInit
    nvml.NVML_CLOCK_SM = NVML_CLOCK_SM
    nvml.nvmlSystemGetDriverVersion = lambda: "580.65.06"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 13000
    nvml.nvmlDeviceGetCount = lambda: 2
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlDeviceGetName = lambda handle: f"NVIDIA H100 80GB HBM3 #{handle}"
    nvml.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(
        total=memory[handle][0], used=memory[handle][1], free=memory[handle][0] - memory[handle][1])
    nvml.nvmlDeviceGetPowerManagementLimit = lambda handle: 700_000
    nvml.nvmlDeviceGetMaxClockInfo = lambda handle, clock: 1980
    nvml.nvmlDeviceGetPersistenceMode = lambda handle: 1

    def processes(handle):
        if handle != 1:
            return []
        return [types.SimpleNamespace(pid=os.getpid() + 1, usedGpuMemory=7 * 2**30),
                types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**30)]

    nvml.nvmlDeviceGetComputeRunningProcesses = processes
    return nvml
