"""A smaller card on a larger GPU: the allocator's cap, what the record keeps, what is refused."""

import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from bench_utils.measurement.memory_cap import GIB, gpu_memory_cap


def _fraction_of_torch_2_11(calls):
    """torch 2.11's set_per_process_memory_fraction: a device without its index is refused (the H200 run)."""
    def set_fraction(fraction, device):
        if not isinstance(device, int) and torch.device(device).index is None:
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        calls.append((fraction, str(device)))
    return set_fraction


@pytest.fixture
def fake_gpu(monkeypatch):
    """Two 80 GiB GPUs, the second current, whose fraction calls are kept."""
    calls = []
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(total_memory=80 * GIB))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", _fraction_of_torch_2_11(calls))
    return calls


def test_a_cap_below_the_card_sets_the_fraction_of_its_memory(fake_gpu):
    assert gpu_memory_cap(16, "cuda:0") == {"gpu_memory_fraction": 0.2, "gpu_total_memory_bytes": 80 * GIB}
    assert fake_gpu == [(0.2, "cuda:0")]


def test_a_device_without_an_index_caps_the_current_gpu(fake_gpu):
    # a grid's "cuda", as the runner passes it: torch 2.11 refused it unindexed on the H200
    assert gpu_memory_cap(16, "cuda")["gpu_memory_fraction"] == 0.2
    assert fake_gpu == [(0.2, "cuda:1")]


def test_a_cap_at_or_above_the_card_changes_nothing_and_says_so(fake_gpu):
    assert gpu_memory_cap(96, "cuda")["gpu_memory_fraction"] == 1.0
    assert gpu_memory_cap(80, "cuda")["gpu_memory_fraction"] == 1.0
    assert fake_gpu == []


def test_no_cap_is_no_call_and_nothing_recorded(fake_gpu):
    assert gpu_memory_cap(None, "cuda") == {} and fake_gpu == []


@pytest.mark.parametrize("gib, device, message", [
    (16, "cpu", "applies to CUDA cells, not cpu"),
    (0, "cuda", "gpu_memory_gib must be a positive number"),
    (-4, "cuda", "gpu_memory_gib must be a positive number"),
    ("16", "cuda", "gpu_memory_gib must be a positive number"),
    (True, "cuda", "gpu_memory_gib must be a positive number"),
])
def test_what_cannot_be_capped_is_refused(fake_gpu, gib, device, message):
    with pytest.raises(ValueError, match=message):
        gpu_memory_cap(gib, device)
    assert fake_gpu == []


@pytest.mark.cuda
def test_on_a_gpu_an_allocation_beyond_the_cap_is_cudas_out_of_memory():
    # in a process of its own: the cap holds for the rest of the process
    script = textwrap.dedent("""
        import torch
        from bench_utils.measurement.memory_cap import GIB, gpu_memory_cap
        from bench_utils.study.cell.task import is_out_of_memory
        kept = gpu_memory_cap(1, "cuda:0")
        assert 0 < kept["gpu_memory_fraction"] < 1, kept
        small = torch.empty(GIB // 2, dtype=torch.uint8, device="cuda")
        try:
            torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
        except Exception as exc:
            assert is_out_of_memory(exc), exc
            print("oom")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "oom"
