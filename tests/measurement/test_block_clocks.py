"""The GPU's clock after every block of a comparison: read through NVML, kept per block; nothing on a CPU."""

import pytest
import torch

from fake_nvml import make_fake_pynvml
from bench_utils import compare
from bench_utils.measurement import nvml_device
from bench_utils.measurement.block_clocks import BlockClocks


@pytest.fixture
def fake_gpu_nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml_device, "torch_uuid", lambda device: None)  # found by index, as without CUDA
    nvml = make_fake_pynvml()
    nvml.NVML_TEMPERATURE_GPU = 0
    clocks = iter([1980, 1980, 1410, 1980, 1755, 1980, 1980, 1980])
    nvml.nvmlDeviceGetClockInfo = lambda handle, clock: next(clocks)
    nvml.nvmlDeviceGetTemperature = lambda handle, sensor: 40 + handle
    nvml.shutdowns = 0
    nvml.nvmlShutdown = lambda: setattr(nvml, "shutdowns", nvml.shutdowns + 1)
    return nvml


def test_each_block_keeps_the_clock_read_after_it(fake_gpu_nvml):
    with BlockClocks(torch.device("cuda", 1), nvml=fake_gpu_nvml) as read:
        result = compare(lambda: None, lambda: None, warmup=0, runs=8, blocks=4, device="cpu",
                         order_seed=0, between_blocks=read)
    read_in_order = []  # the blocks as they ran: each pair's order from the record
    for pair, candidate_first in enumerate(result.candidate_first):
        for side in (("candidate", "baseline") if candidate_first else ("baseline", "candidate")):
            read_in_order.append(result.block_probes[side][pair]["sm_clock_mhz"])
    assert read_in_order == [1980, 1980, 1410, 1980, 1755, 1980, 1980, 1980]
    assert {probe["temperature_c"] for side in result.block_probes.values() for probe in side} == {41}
    assert fake_gpu_nvml.shutdowns == 1


def test_a_figure_nvml_refuses_is_none_not_zero(fake_gpu_nvml):
    def refuse(handle, clock):
        raise RuntimeError("NVML error 3: Not Supported")

    fake_gpu_nvml.nvmlDeviceGetClockInfo = refuse
    with BlockClocks(torch.device("cuda", 0), nvml=fake_gpu_nvml) as read:
        assert read() == {"sm_clock_mhz": None, "temperature_c": 40}


def test_no_nvml_or_a_cpu_reads_nothing_and_says_why():
    clocks = BlockClocks(torch.device("cpu"))
    with clocks as read:
        assert read is None
    assert clocks.note == "no NVML on cpu"
    failing = BlockClocks(torch.device("cuda", 0), nvml=make_fake_pynvml(fail_init=True))
    with failing as read:
        assert read is None
    assert failing.note.startswith("NVML unavailable: RuntimeError")
