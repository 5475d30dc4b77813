"""A stand-in for the pynvml module: two GPUs, this process using 1 GiB on GPU 1, and a MIG instance of GPU 1;
and a GPU whose energy counter steps as A100's and H100's do."""

import bisect
import os
import types

NVML_CLOCK_SM = 1
# NVML's UUIDs: torch's (cudaDeviceProp.uuid) are the same without the prefix.
UUIDS = {0: "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", 1: "GPU-f9e8d7c6-b5a4-9382-7160-5f4e3d2c1b0a",
         2: "MIG-5c89a2b8-1d2e-5f60-a1b2-c3d4e5f60718"}  # handle 2: a MIG instance of GPU 1


def make_fake_pynvml(fail_init=False):
    nvml = types.ModuleType("pynvml")
    memory = {0: (80 * 2**30, 3 * 2**30), 1: (80 * 2**30, 5 * 2**30), 2: (10 * 2**30, 2**30)}  # total, used

    def nvmlInit():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    nvml.nvmlInit = nvmlInit
    nvml.NVML_CLOCK_SM = NVML_CLOCK_SM
    nvml.nvmlSystemGetDriverVersion = lambda: "580.65.06"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 13000
    nvml.nvmlDeviceGetCount = lambda: 2
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlDeviceGetUUID = lambda handle: UUIDS[handle]

    def handle_by_uuid(uuid):
        for handle, known in UUIDS.items():
            if known == uuid:
                return handle
        raise RuntimeError("NVML error 6: Not Found")  # NVML_ERROR_NOT_FOUND

    nvml.nvmlDeviceGetHandleByUUID = handle_by_uuid
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


class SteppedEnergyGpu:
    """A GPU whose NVML energy counter behaves as A100's and H100's (arXiv:2312.02741): it steps
    every ``step_s`` (from ``phase_s`` on), and each step adds the mean power of only the last
    ``duty`` of its period, times the period. The true power is known: ``busy_w(t, phase)`` while
    a call runs (``phase`` in [0, 1) through the call), ``idle_w`` between. Its clock (``now``,
    ``sleep``) is the only one the probe sees; ``run_calls`` is the work, back to back.
    ``step_factor``, called once a step, multiplies what that step adds: noise in the sampled power
    (``1 + sd * gauss()``), or given factors (``iter([...]).__next__``)."""

    def __init__(self, busy_w, *, idle_w=70.0, step_s=0.1, duty=0.25, phase_s=0.0, dt=1e-4, step_factor=None):
        self.busy_w, self.idle_w, self.step_s, self.duty, self.dt = busy_w, idle_w, step_s, duty, dt
        self.step_factor = step_factor
        self.time = 0.0
        self.runs, self.starts = [], []   # (start, calls, call_s) of each run, in time order; its start
        self.next_step = phase_s + step_s
        self.counter_j = 1_000.0    # a board that ran before

    def now(self):
        return self.time

    def sleep(self, seconds):
        self.time += seconds

    def run_calls(self, calls, call_s):
        self.runs.append((self.time, calls, call_s))
        self.starts.append(self.time)
        self.time += calls * call_s

    def power(self, t):
        run = bisect.bisect_right(self.starts, t) - 1
        if run >= 0:
            start, calls, call_s = self.runs[run]
            if t < start + calls * call_s:
                return self.busy_w(t, (t - start) / call_s % 1.0)
        return self.idle_w

    def true_joules_per_call(self):
        """What the calls run so far used, each: the integral of the true power over them."""
        return (sum(self.energy_j(start, start + calls * call_s) for start, calls, call_s in self.runs)
                / sum(calls for _, calls, _ in self.runs))

    def energy_j(self, start, end):
        """The true energy over [start, end] (midpoint rule)."""
        steps = max(1, round((end - start) / self.dt))
        width = (end - start) / steps
        return sum(self.power(start + (i + 0.5) * width) for i in range(steps)) * width

    def energy_mj(self):
        """The counter now: every step up to now, each from its sampled part only."""
        while self.next_step <= self.time:
            sampled_s = self.duty * self.step_s
            added = self.energy_j(self.next_step - sampled_s, self.next_step) / sampled_s * self.step_s
            self.counter_j += added * (self.step_factor() if self.step_factor else 1.0)
            self.next_step += self.step_s
        return int(self.counter_j * 1000)

    def nvml(self):
        """This GPU as GPU 0 of the project's fake pynvml, with the energy counter and clocks."""
        nvml = make_fake_pynvml()
        nvml.NVML_TEMPERATURE_GPU = 0
        nvml.nvmlDeviceGetTotalEnergyConsumption = lambda handle: self.energy_mj()
        nvml.nvmlDeviceGetClockInfo = lambda handle, clock: 1980
        nvml.nvmlDeviceGetTemperature = lambda handle, sensor: 50
        nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: 0
        return nvml
