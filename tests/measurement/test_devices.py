import pytest
import torch

from bench_utils.measurement.devices import resolve_device, synchronize


def test_cpu_and_default():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    synchronize(torch.device("cpu"))  # a no-op, must not fail


@pytest.mark.parametrize("bad, message", [("gpu", "unknown device"), ("meta", "not supported"),
                                          ("cuda:99", "cuda")])
def test_bad_devices(bad, message):
    with pytest.raises(ValueError, match=message) as raised:
        resolve_device(bad)
    assert "this machine has: cpu" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.cuda
def test_cuda_device_gets_an_index():
    assert resolve_device("cuda").index is not None
