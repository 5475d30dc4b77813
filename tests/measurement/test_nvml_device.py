"""NVML's device of a torch CUDA device under every form of CUDA_VISIBLE_DEVICES, with a fake pynvml and fake torch."""

import types

import pytest
import torch

from fake_nvml import UUIDS, make_fake_pynvml
from bench_utils.measurement.nvml_device import nvml_handle, torch_uuid

GPU0, GPU1, MIG = UUIDS[0], UUIDS[1], UUIDS[2]


class FakeUuid:
    """torch's _CUuuid: str() gives 8-4-4-4-12 hex, without NVML's GPU-/MIG- prefix."""

    def __init__(self, nvml_uuid):
        self.text = nvml_uuid.split("-", 1)[1]

    def __str__(self):
        return self.text


@pytest.fixture
def cuda_uuids(monkeypatch):
    """Fake torch CUDA devices: ``cuda_uuids(["GPU-...", ...])`` gives cuda:i that NVML UUID;
    ``cuda_uuids(None)``: torch cannot read properties (no CUDA here)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(uuids):
        def properties(index):
            if uuids is None:
                raise RuntimeError("Found no NVIDIA driver on your system")
            return types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", uuid=FakeUuid(uuids[index]))

        monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return install


def test_torch_uuid_is_cuda_s_without_prefix(cuda_uuids):
    cuda_uuids([GPU1, GPU0])
    assert torch_uuid(torch.device("cuda", 1)) == GPU0[len("GPU-"):]
    assert torch_uuid(torch.device("cuda")) == GPU1[len("GPU-"):]  # no index: the current device
    cuda_uuids(None)
    assert torch_uuid(torch.device("cuda", 0)) is None


def test_uuid_mask_finds_the_gpu_by_uuid(cuda_uuids, monkeypatch):
    # The old index mapping gave NVML GPU 0 for cuda:0 here: the wrong GPU.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{GPU1},{GPU0}")
    cuda_uuids([GPU1, GPU0])
    nvml = make_fake_pynvml()
    assert nvml_handle(nvml, torch.device("cuda", 0)) == (1, f"uuid {GPU1}")
    assert nvml_handle(nvml, torch.device("cuda", 1)) == (0, f"uuid {GPU0}")


def test_mig_mask_finds_the_mig_instance(cuda_uuids, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    cuda_uuids([MIG])  # under MIG, CUDA's uuid is the instance's own
    assert nvml_handle(make_fake_pynvml(), torch.device("cuda", 0)) == (2, f"uuid {MIG}")


def test_numeric_mask_is_read_through_the_uuid_too(cuda_uuids, monkeypatch):
    # CUDA's order (fastest first by default) need not be NVML's (PCI bus): the UUID says which GPU it is.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    cuda_uuids([GPU1, GPU0])
    assert nvml_handle(make_fake_pynvml(), torch.device("cuda", 0)) == (1, f"uuid {GPU1}")


def test_no_mask_with_uuid(cuda_uuids):
    cuda_uuids([GPU0, GPU1])
    assert nvml_handle(make_fake_pynvml(), torch.device("cuda", 1)) == (1, f"uuid {GPU1}")


def test_without_a_torch_uuid_the_mask_maps_the_device(cuda_uuids, monkeypatch):
    cuda_uuids(None)
    nvml = make_fake_pynvml()
    assert nvml_handle(nvml, torch.device("cuda", 1)) == (1, "index 1")  # no mask: the same index
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert nvml_handle(nvml, torch.device("cuda", 0)) == (1, "index 1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{GPU1},{GPU0}")  # a UUID in the mask is used as such
    assert nvml_handle(nvml, torch.device("cuda", 1)) == (0, f"uuid {GPU0}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    assert nvml_handle(nvml, torch.device("cuda", 0)) == (2, f"uuid {MIG}")


def test_a_device_nvml_cannot_name_is_an_error_not_another_gpu(cuda_uuids, monkeypatch):
    nvml = make_fake_pynvml()
    cuda_uuids(["GPU-00000000-0000-0000-0000-000000000000"])
    with pytest.raises(LookupError, match="no device with this UUID"):
        nvml_handle(nvml, torch.device("cuda", 0))
    cuda_uuids(None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0a1b")  # a partial UUID, which NVML cannot look up
    with pytest.raises(LookupError):
        nvml_handle(nvml, torch.device("cuda", 0))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "gpu0")
    with pytest.raises(LookupError, match="cannot map"):
        nvml_handle(nvml, torch.device("cuda", 0))
