import time

import numpy as np
import pytest
import torch

from bench_utils import MemoryProbe
from bench_utils.measurement.memory import parameter_stats, tensor_bytes
from fake_nvml import make_fake_pynvml

MiB = 2**20
CUDA_FIELDS = ("cuda_allocated_entry_bytes", "cuda_reserved_entry_bytes", "cuda_peak_allocated_bytes",
               "cuda_peak_reserved_bytes", "cuda_peak_allocated_increase_bytes",
               "cuda_peak_reserved_increase_bytes", "cuda_graph_pool_bytes")


def test_parameter_stats_counts_parameters_not_buffers():
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.BatchNorm1d(20))
    stats = parameter_stats(model)
    assert stats["param_count"] == 10 * 20 + 20 + 20 + 20
    assert stats["param_bytes"] == stats["param_count"] * 4
    # running_mean, running_var (fp32) and num_batches_tracked (int64)
    assert stats["buffer_bytes"] == 20 * 4 * 2 + 8


def test_tensor_bytes_walks_nested_inputs_and_counts_shared_tensors_once():
    x = torch.zeros(4, 3, 8, 8)
    inputs = {"pixel_values": x, "extra": [torch.zeros(5, dtype=torch.int64), (x,)], "flag": True}
    assert tensor_bytes(inputs) == 4 * 3 * 8 * 8 * 4 + 5 * 8
    assert tensor_bytes(None) == 0


def test_probe_on_cpu_reports_resident_peak_and_no_cuda_fields():
    model = torch.nn.Linear(64, 64)
    inputs = {"x": torch.zeros(8, 64)}
    with MemoryProbe("cpu", model=model, inputs=inputs) as probe:
        block = np.ones(200 * 2**20 // 8)  # 200 MiB, touched
        time.sleep(0.05)
        del block
    report = probe.report
    assert report["param_count"] == 64 * 64 + 64
    assert report["param_bytes"] == (64 * 64 + 64) * 4
    assert report["input_bytes"] == 8 * 64 * 4
    assert report["rss_peak_bytes"] >= report["rss_entry_bytes"] + 150 * 2**20
    assert report["rss_peak_increase_bytes"] >= 150 * 2**20
    assert report["rss_samples"] >= 2
    # what the CPU cannot measure is None, never 0
    for key in CUDA_FIELDS + ("nvml_device_used_peak_bytes", "nvml_process_used_peak_bytes",
                              "nvml_device_total_bytes"):
        assert report[key] is None, key


def test_probe_sampling_thread_alone_sees_a_held_allocation(monkeypatch):
    # Without the kernel's high-water mark, the sampling thread must still see it.
    monkeypatch.setattr("bench_utils.measurement.memory._reset_vmhwm", lambda: False)
    with MemoryProbe("cpu", interval_s=0.002) as probe:
        block = np.ones(120 * 2**20 // 8)
        time.sleep(0.1)
        del block
    assert probe.report["rss_peak_method"] == "sampled"
    assert probe.report["rss_peak_increase_bytes"] >= 100 * 2**20
    assert probe.report["rss_samples"] >= 10


def test_probe_without_model_leaves_parameter_fields_empty():
    with MemoryProbe("cpu") as probe:
        pass
    assert probe.report["param_count"] is None and probe.report["input_bytes"] is None


def test_bad_interval():
    with pytest.raises(ValueError, match="interval_s"):
        MemoryProbe("cpu", interval_s=0)


# --- the CUDA path, with a fake allocator (runs on CPU-only machines) -----------

class FakeAllocator:
    """A caching allocator in miniature: blocks in use, free cached blocks, private pools.

    allocated = in use + private pools (their blocks are taken); reserved = in use + cache +
    private pools; ``empty_cache`` returns the free cache to the driver but keeps the pools.
    """

    def __init__(self, in_use=0, cached=0, pools=()):
        self.log = []
        self.in_use, self.cached = in_use, cached
        self.pools = list(pools)  # (device, pool id, bytes)
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    allocated = property(lambda self: self.in_use + self._pool_bytes())
    reserved = property(lambda self: self.in_use + self.cached + self._pool_bytes())

    def _pool_bytes(self):
        return sum(size for device, _, size in self.pools if device == 0)

    def _track(self):
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def malloc(self, size):  # served from the cache first, the driver for the rest
        self.cached = max(self.cached - size, 0)
        self.in_use += size
        self._track()

    def free(self, size):  # back into the cache, not to the driver
        self.in_use -= size
        self.cached += size

    # the backend interface of MemoryProbe
    def synchronize(self):
        self.log.append("synchronize")

    def empty_cache(self):
        self.log.append("empty_cache")
        self.cached = 0

    def reset_peak_memory_stats(self):
        self.log.append("reset_peak_memory_stats")
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def memory_allocated(self):
        return self.allocated

    def memory_reserved(self):
        return self.reserved

    def max_memory_allocated(self):
        return self.peak_allocated

    def max_memory_reserved(self):
        return self.peak_reserved

    def memory_snapshot(self):
        self.log.append("memory_snapshot")
        default = [{"device": 0, "total_size": self.in_use + self.cached,
                    "segment_pool_id": (0, 0), "allocated_size": self.in_use}]
        return default + [{"device": device, "total_size": size, "segment_pool_id": pool_id,
                           "allocated_size": size} for device, pool_id, size in self.pools]


@pytest.fixture
def on_fake_cuda(monkeypatch):
    """MemoryProbe("cuda") on this machine: the device resolves, NVML is absent."""
    monkeypatch.setattr("bench_utils.measurement.memory.resolve_device",
                        lambda device: torch.device("cuda", 0))
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml(fail_init=True))


def test_cuda_figures_are_the_region_own_not_what_was_alive_at_entry(on_fake_cuda):
    # At entry: 500 MiB alive (weights, buffers, a compiled cell's kept reference outputs)
    # and 300 MiB of cache left by earlier work.
    fake = FakeAllocator(in_use=500 * MiB, cached=300 * MiB)
    model = torch.nn.Linear(64, 64)
    with MemoryProbe("cuda", model=model, inputs=torch.zeros(8, 64), cuda_backend=fake) as probe:
        fake.malloc(100 * MiB)  # activations
        fake.malloc(40 * MiB)   # a workspace
        fake.free(40 * MiB)
        fake.free(100 * MiB)
    r = probe.report
    assert r["device"] == "cuda:0"
    assert r["cuda_allocated_entry_bytes"] == 500 * MiB
    assert r["cuda_reserved_entry_bytes"] == 500 * MiB  # the stale 300 MiB cache was emptied
    assert r["cuda_peak_allocated_bytes"] == 640 * MiB
    assert r["cuda_peak_reserved_bytes"] == 640 * MiB  # not 800: cache reuse would hide growth
    assert r["cuda_peak_allocated_increase_bytes"] == 140 * MiB
    assert r["cuda_peak_allocated_increase_bytes"] == 140 * MiB  # not 640 MiB - parameter - input bytes
    assert r["cuda_peak_reserved_increase_bytes"] == 140 * MiB
    assert r["cuda_graph_pool_bytes"] == 0  # eager: no private pool
    assert r["param_bytes"] == (64 * 64 + 64) * 4 and r["input_bytes"] == 8 * 64 * 4
    assert r["nvml_device_used_peak_bytes"] is None and r["nvml_device"] is None
    assert r["rss_peak_bytes"] >= r["rss_entry_bytes"]


def test_cuda_entry_empties_the_cache_before_resetting_peaks_then_reads(on_fake_cuda):
    fake = FakeAllocator(in_use=10 * MiB, cached=90 * MiB)
    with MemoryProbe("cuda", cuda_backend=fake):
        assert fake.log == ["synchronize", "empty_cache", "reset_peak_memory_stats"]
    # at exit: wait for the device, then read the pools
    assert fake.log[3:] == ["synchronize", "memory_snapshot"]


def test_cuda_graph_replay_shows_in_the_pool_not_in_the_increase(on_fake_cuda):
    # reduce-overhead after warm-up: 200 MiB of weights, the graph's 150 MiB private pool on
    # this device (activations and outputs), another device's pool that is not ours.
    fake = FakeAllocator(in_use=200 * MiB, pools=[(0, (1, 0), 150 * MiB), (1, (2, 0), 70 * MiB)])
    with MemoryProbe("cuda", cuda_backend=fake) as probe:
        pass  # a replay allocates nothing
    r = probe.report
    assert r["cuda_graph_pool_bytes"] == 150 * MiB
    assert r["cuda_allocated_entry_bytes"] == 350 * MiB  # the pool's blocks are allocated
    assert r["cuda_reserved_entry_bytes"] == 350 * MiB   # empty_cache keeps a live pool
    assert r["cuda_peak_allocated_increase_bytes"] == 0
    assert r["cuda_peak_reserved_increase_bytes"] == 0


def test_cuda_graph_pool_measured_at_exit_includes_a_pool_made_in_the_region(on_fake_cuda):
    fake = FakeAllocator(in_use=200 * MiB)
    with MemoryProbe("cuda", cuda_backend=fake) as probe:
        fake.pools.append((0, (3, 1), 64 * MiB))  # a first call records a graph
        fake._track()
    r = probe.report
    assert r["cuda_graph_pool_bytes"] == 64 * MiB
    assert r["cuda_peak_allocated_increase_bytes"] == 64 * MiB


def test_cuda_graph_pool_is_none_when_the_snapshot_fails(on_fake_cuda):
    fake = FakeAllocator()

    def refuse():
        raise RuntimeError("no snapshot")
    fake.memory_snapshot = refuse
    with MemoryProbe("cuda", cuda_backend=fake) as probe:
        pass
    assert probe.report["cuda_graph_pool_bytes"] is None
    assert probe.report["cuda_peak_allocated_increase_bytes"] == 0


def test_cuda_memory_backend_has_the_calls_the_probe_makes():
    from bench_utils.measurement.memory import CudaMemoryBackend

    for name in ("synchronize", "empty_cache", "reset_peak_memory_stats", "memory_allocated",
                 "memory_reserved", "max_memory_allocated", "max_memory_reserved",
                 "memory_snapshot"):
        assert callable(getattr(CudaMemoryBackend, name)), name


@pytest.mark.cuda
def test_probe_on_cuda_reports_allocator_peaks_and_activation():
    model = torch.nn.Linear(1024, 1024).cuda()
    x = torch.randn(256, 1024, device="cuda")
    stale = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
    del stale  # left in the cache: emptied at entry
    with MemoryProbe("cuda", model=model, inputs=x) as probe:
        big = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        model(x)
        del big
    r = probe.report
    assert r["cuda_allocated_entry_bytes"] >= r["param_bytes"] + r["input_bytes"]
    assert r["cuda_reserved_entry_bytes"] < r["cuda_allocated_entry_bytes"] + 256 * MiB
    assert r["cuda_peak_allocated_increase_bytes"] >= 64 * MiB
    assert r["cuda_peak_allocated_increase_bytes"] == r["cuda_peak_allocated_bytes"] - r["cuda_allocated_entry_bytes"]
    assert r["cuda_peak_reserved_increase_bytes"] == (r["cuda_peak_reserved_bytes"]
                                                      - r["cuda_reserved_entry_bytes"])
    assert r["cuda_peak_reserved_bytes"] >= r["cuda_peak_allocated_bytes"]
    assert r["cuda_graph_pool_bytes"] == 0
    assert r["nvml_device_total_bytes"] is None or r["nvml_device_total_bytes"] > 2**30


@pytest.mark.cuda
def test_probe_on_cuda_sees_a_cuda_graph_pool_and_a_replay_that_allocates_nothing():
    model = torch.nn.Linear(1024, 1024).cuda()
    static_x = torch.randn(256, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        model(static_x)  # warm-up on a side stream, as capture requires
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = model(static_x)
    with MemoryProbe("cuda") as probe:
        graph.replay()
    r = probe.report
    assert r["cuda_graph_pool_bytes"] >= static_y.numel() * static_y.element_size()
    assert r["cuda_peak_allocated_increase_bytes"] < static_y.numel() * static_y.element_size()


# --- NVML paths, with a fake pynvml (no NVML library on CPU machines) ---------

from fake_nvml import UUIDS  # noqa: E402
from bench_utils.measurement import nvml_device  # noqa: E402
from bench_utils.measurement.memory import _Nvml  # noqa: E402


def test_nvml_reads_device_memory_and_this_process(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml())
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: None)  # no UUID: the mask's index
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    nvml = _Nvml(torch.device("cuda", 0))  # cuda:0 of this process is GPU 1 of the machine
    assert nvml.lookup == "index 1"
    assert nvml.device_total() == 80 * 2**30
    assert nvml.device_used() == 5 * 2**30
    assert nvml.process_used() == 2**30  # our PID's entry, not the other process's


def test_nvml_absent_or_cpu_gives_none(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml(fail_init=True))
    nvml = _Nvml(torch.device("cuda", 0))
    assert nvml.device_used() is None and nvml.process_used() is None
    cpu = _Nvml(torch.device("cpu"))
    assert cpu.device_total() is None


def test_nvml_reads_the_mig_instance_or_gpu_that_torch_uses(monkeypatch):
    # An index mapping read NVML GPU 0 under both masks: another GPU's (or the whole GPU's) memory.
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUIDS[2])
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: UUIDS[2].removeprefix("MIG-"))
    nvml = _Nvml(torch.device("cuda", 0))
    assert nvml.device_total() == 10 * 2**30 and nvml.device_used() == 2**30  # the instance's memory
    assert nvml.lookup == f"uuid {UUIDS[2]}"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUIDS[1])
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: UUIDS[1].removeprefix("GPU-"))
    nvml = _Nvml(torch.device("cuda", 0))
    assert nvml.lookup == f"uuid {UUIDS[1]}" and nvml.device_used() == 5 * 2**30
    assert nvml.process_used() == 2**30
    monkeypatch.setattr("bench_utils.measurement.memory.resolve_device", lambda device: torch.device("cuda", 0))
    with MemoryProbe("cuda", cuda_backend=FakeAllocator(in_use=0, cached=0)) as probe:
        pass
    assert probe.report["nvml_device"] == f"uuid {UUIDS[1]}"  # the record says which device NVML read
    assert probe.report["nvml_process_used_peak_bytes"] == 2**30


def test_nvml_of_a_device_it_cannot_find_gives_none(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml())
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: "00000000-0000-0000-0000-000000000000")
    nvml = _Nvml(torch.device("cuda", 0))
    assert nvml.handle is None and nvml.device_total() is None and nvml.lookup is None
