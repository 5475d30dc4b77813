import time

import numpy as np
import pytest
import torch

from bench_utils import MemoryProbe
from bench_utils.measurement.memory import parameter_stats, tensor_bytes


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
    for key in ("cuda_peak_allocated_bytes", "cuda_peak_reserved_bytes", "activation_bytes",
                "cuda_allocated_entry_bytes", "nvml_device_used_peak_bytes",
                "nvml_process_used_peak_bytes", "nvml_device_total_bytes"):
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


@pytest.mark.cuda
def test_probe_on_cuda_reports_allocator_peaks_and_activation():
    model = torch.nn.Linear(1024, 1024).cuda()
    x = torch.randn(256, 1024, device="cuda")
    with MemoryProbe("cuda", model=model, inputs=x) as probe:
        big = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")  # 64 MiB
        model(x)
        del big
    r = probe.report
    assert r["cuda_peak_allocated_bytes"] >= r["cuda_allocated_entry_bytes"] + 64 * 2**20
    assert r["cuda_peak_reserved_bytes"] >= r["cuda_peak_allocated_bytes"]
    assert r["activation_bytes"] == r["cuda_peak_allocated_bytes"] - r["param_bytes"] - r["input_bytes"]
    assert r["nvml_device_total_bytes"] is None or r["nvml_device_total_bytes"] > 2**30


# --- NVML paths, with a fake pynvml (no NVML library on CPU machines) ---------

from fake_nvml import make_fake_pynvml  # noqa: E402

from bench_utils.measurement.memory import _Nvml, _nvml_index  # noqa: E402


def test_nvml_reads_device_memory_and_this_process(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    nvml = _Nvml(torch.device("cuda", 0))  # cuda:0 of this process is GPU 1 of the machine
    assert nvml.device_total() == 80 * 2**30
    assert nvml.device_used() == 5 * 2**30
    assert nvml.process_used() == 2**30  # our PID's entry, not the other process's


def test_nvml_absent_or_cpu_gives_none(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_fake_pynvml(fail_init=True))
    nvml = _Nvml(torch.device("cuda", 0))
    assert nvml.device_used() is None and nvml.process_used() is None
    cpu = _Nvml(torch.device("cpu"))
    assert cpu.device_total() is None


def test_nvml_index_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert _nvml_index(torch.device("cuda", 1)) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234abcd")  # UUIDs: no mapping possible
    assert _nvml_index(torch.device("cuda", 0)) == 0
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _nvml_index(torch.device("cuda", 1)) == 1
