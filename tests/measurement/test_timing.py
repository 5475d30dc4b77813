import time

import pytest
import torch

from bench_utils import Measurement, measure
from bench_utils.measurement.timing import CudaEventTimer, HostTimer

# real clocks: timed on an idle machine, after the parallel tests (make test's serial pass)
pytestmark = pytest.mark.serial


def busy_wait(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_measure_counts_calls_and_times_each_run():
    calls = []
    m = measure(lambda: calls.append(1), warmup=5, runs=40, device="cpu")
    assert len(calls) == 5 + 40
    assert len(m.times_ms) == 40 and m.runs == 40
    assert m.timer == "perf_counter_ns" and m.device == "cpu" and m.warmup == 5


def test_warmup_zero_still_keeps_first_call_out_of_the_runs():
    calls = []
    m = measure(lambda: calls.append(1), warmup=0, runs=3, device="cpu")
    assert len(calls) == 1 + 3 and m.runs == 3


class RecordingTimer:
    """A timer that notes which call numbers it timed (each timed call 'takes' 1 ms)."""

    name = "recording"

    def __init__(self, counter):
        self.counter, self.timed = counter, []

    def time_calls(self, fn, runs):
        times = []
        for _ in range(runs):
            fn()
            self.timed.append(self.counter["n"])
            times.append(1.0)
        return times


def test_first_call_is_kept_apart():
    counter = {"n": 0}

    def fn():  # the first call "compiles" for 60 ms
        counter["n"] += 1
        if counter["n"] == 1:
            busy_wait(0.06)

    timer = RecordingTimer(counter)
    m = measure(fn, warmup=3, runs=5, device="cpu", timer=timer)
    assert m.first_call_ms >= 60.0  # a busy-wait cannot finish early
    assert timer.timed == [4, 5, 6, 7, 8]  # calls 1-3 were the first call and the warm-up
    assert m.times_ms == [1.0] * 5


def test_measured_times_track_known_cost():
    # Lower bounds only: a busy-wait never ends early, but a loaded machine may stall it.
    m = measure(lambda: busy_wait(0.002), warmup=2, runs=30, device="cpu")
    assert m.min_ms >= 2.0
    assert m.median_ms < 20.0  # a units slip (seconds, microseconds) would be 1000x off


def test_statistics_and_throughput():
    m = Measurement(times_ms=[1.0, 2.0, 3.0, 4.0], first_call_ms=10.0)
    assert m.mean_ms == pytest.approx(2.5)
    assert m.median_ms == pytest.approx(2.5)
    assert m.stdev_ms == pytest.approx(1.118033988749895)
    assert m.cv == pytest.approx(1.118033988749895 / 2.5)
    assert (m.min_ms, m.max_ms) == (1.0, 4.0)
    assert m.p90_ms == pytest.approx(3.7)
    assert m.throughput(4) == pytest.approx(4 * 1000 / 2.5)
    low, high = m.ci95_mean_ms
    assert 1.0 <= low < 2.5 < high <= 4.0
    with pytest.raises(ValueError):
        m.throughput(0)


def test_a_measurement_is_serialized_once_as_its_records_latency_block_in_seconds():
    from bench_utils.records.build import latency_block

    m = measure(lambda: None, warmup=1, runs=10, device="cpu")
    block = latency_block(m)
    assert block["values"] == pytest.approx([t / 1e3 for t in m.times_ms]) and block["count"] == 10
    for key, ms in (("mean", m.mean_ms), ("median", m.median_ms), ("stdev", m.stdev_ms), ("p99", m.p99_ms),
                    ("min", m.min_ms), ("max", m.max_ms)):
        assert block[key] == pytest.approx(ms / 1e3)
    assert block["ci95"] == pytest.approx([bound / 1e3 for bound in m.ci95_mean_ms])
    assert (block["warmup"], block["sync"], block["timer"]) == (1, m.sync, m.timer)


@pytest.mark.parametrize("kwargs, message", [
    ({"runs": 0}, "runs"), ({"runs": -3}, "runs"), ({"runs": 2.5}, "runs"), ({"runs": True}, "runs"),
    ({"warmup": -1}, "warmup"), ({"warmup": 1.5}, "warmup"),
])
def test_bad_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        measure(lambda: None, device="cpu", **kwargs)


def test_non_callable_raises_value_error():
    with pytest.raises(ValueError, match="callable"):
        measure(42, device="cpu")


def test_unavailable_device_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="this machine has no CUDA GPU"):
        measure(lambda: None, runs=1, device="cuda")
    with pytest.raises(ValueError, match="not supported"):
        measure(lambda: None, runs=1, device="meta")


class FakeEvent:
    """Stands in for torch.cuda.Event: stamps the host clock when recorded."""

    def __init__(self, log):
        self.log, self.stamp = log, None

    def record(self):
        self.log.append("record")
        self.stamp = time.perf_counter()

    def elapsed_time(self, end):
        assert self.log[-1] == "synchronize", "elapsed_time read before synchronizing"
        return (end.stamp - self.stamp) * 1000.0


class FakeCudaBackend:
    def __init__(self):
        self.log, self.events = [], 0

    def event(self):
        self.events += 1
        return FakeEvent(self.log)

    def synchronize(self):
        self.log.append("synchronize")

    def device_context(self):
        import contextlib
        return contextlib.nullcontext()


def test_cuda_event_timer_waits_for_the_device_after_each_call_by_default():
    backend = FakeCudaBackend()
    timer = CudaEventTimer(torch.device("cpu"), backend=backend)
    calls = []
    times = timer.time_calls(lambda: (calls.append(1), busy_wait(0.001)), runs=25)
    assert len(times) == 25 and len(calls) == 25
    assert backend.events == 50
    # every event recorded once (CUDA creates events lazily, on their first record), an idle
    # device; then each call is bracketed by its events and followed by a wait, outside the
    # interval: start, end, synchronize
    assert backend.log == ["record"] * 50 + ["synchronize"] + ["record", "record", "synchronize"] * 25
    assert all(t >= 1.0 for t in times)  # each event pair brackets its 1 ms call


def test_pipelined_timer_synchronizes_once_after_the_loop():
    backend = FakeCudaBackend()
    timer = CudaEventTimer(torch.device("cpu"), backend=backend, sync="pipelined")
    times = timer.time_calls(lambda: None, runs=10)
    assert len(times) == 10
    assert backend.log == ["record"] * 20 + ["synchronize"] + ["record"] * 20 + ["synchronize"]


class SimulatedGpu:
    """An asynchronous device on a virtual clock: the host spends ``launch_ms`` to enqueue a
    kernel of ``kernel_ms``; the device runs queued work in order; events stamp the device time
    at which the stream reaches them."""

    def __init__(self, launch_ms, kernel_ms):
        self.launch_ms, self.kernel_ms = launch_ms, kernel_ms
        self.host, self.busy_until = 0.0, 0.0

    def call(self):  # one forward pass: host launch work, then a kernel queued behind the rest
        self.host += self.launch_ms
        self.busy_until = max(self.host, self.busy_until) + self.kernel_ms

    def event(self):
        gpu = self

        class Event:
            def record(self):
                self.stamp = max(gpu.host, gpu.busy_until)  # reached when the queue drains to it
                gpu.busy_until = self.stamp

            def elapsed_time(self, end):
                return end.stamp - self.stamp

        return Event()

    def synchronize(self):
        self.host = max(self.host, self.busy_until)

    def device_context(self):
        import contextlib
        return contextlib.nullcontext()


@pytest.mark.parametrize("launch_ms, kernel_ms", [(0.3, 1.0), (1.0, 0.3)])
def test_per_call_latency_includes_launch_overhead_that_pipelining_hides(launch_ms, kernel_ms):
    per_call = CudaEventTimer(torch.device("cpu"), backend=(gpu := SimulatedGpu(launch_ms, kernel_ms)))
    latencies = per_call.time_calls(gpu.call, runs=50)
    # A request from an idle device waits for its launch, then for its kernel.
    assert latencies == pytest.approx([launch_ms + kernel_ms] * 50)
    pipelined = CudaEventTimer(torch.device("cpu"), backend=(gpu := SimulatedGpu(launch_ms, kernel_ms)),
                               sync="pipelined")
    steady = pipelined.time_calls(gpu.call, runs=50)[5:]
    # The host runs ahead: each interval is the slower of the two, never their sum.
    assert steady == pytest.approx([max(launch_ms, kernel_ms)] * 45)


def test_measure_records_its_sync_mode_and_refuses_unknown_ones():
    m = measure(lambda: None, warmup=1, runs=3, device="cpu", sync="pipelined")
    assert m.sync == "pipelined"
    assert measure(lambda: None, warmup=1, runs=3, device="cpu").sync == "per-call"
    with pytest.raises(ValueError, match="sync"):
        measure(lambda: None, runs=3, device="cpu", sync="each")


def test_measure_accepts_a_timer_and_reports_its_name():
    m = measure(lambda: None, warmup=1, runs=5, device="cpu",
                timer=CudaEventTimer(torch.device("cpu"), backend=FakeCudaBackend()))
    assert m.timer == "cuda_event" and m.runs == 5


def test_host_timer_times_in_milliseconds():
    times = HostTimer(torch.device("cpu")).time_calls(lambda: busy_wait(0.003), 5)
    assert len(times) == 5 and all(t >= 3.0 for t in times)
    assert sorted(times)[2] < 30.0  # milliseconds, not seconds or microseconds


@pytest.mark.cuda
def test_measure_on_cuda_uses_events():
    a = torch.randn(2048, 2048, device="cuda")
    m = measure(lambda: a @ a, warmup=5, runs=50, device="cuda")
    assert m.timer == "cuda_event" and m.device.startswith("cuda")
    assert m.runs == 50 and m.min_ms > 0


@pytest.mark.cuda
def test_cuda_events_see_gpu_time_not_launch_time():
    # A host clock around an asynchronous launch sees microseconds; events see the kernel.
    a = torch.randn(4096, 4096, device="cuda")
    m = measure(lambda: a @ a, warmup=5, runs=20, device="cuda")
    flops = 2 * 4096 ** 3
    assert m.median_ms > flops / 2e15 * 1000  # slower than 2 PFLOP/s: a real kernel time


@pytest.mark.cuda
def test_on_cuda_per_call_latency_includes_the_launches_that_pipelining_hides():
    x, a = torch.ones(64, device="cuda"), torch.randn(4096, 4096, device="cuda")

    def launches_then_a_long_kernel():  # as a model: many small launches, then real GPU work
        y = x
        for _ in range(200):
            y = y * 1.0001
        return a @ a

    # pipelined, the next call's launches hide behind this call's matmul; per call, they cannot
    per_call = measure(launches_then_a_long_kernel, warmup=5, runs=50, device="cuda")
    pipelined = measure(launches_then_a_long_kernel, warmup=5, runs=50, device="cuda", sync="pipelined")
    assert per_call.sync == "per-call" and pipelined.sync == "pipelined"
    assert per_call.median_ms > pipelined.median_ms
