"""The memory a cell takes after its timed runs."""

import pytest
import torch

from bench_utils.study.cell import after_timing


def _counted(fn):
    calls = []

    def counted():
        calls.append(1)
        return fn()
    return counted, calls


def test_a_cpu_cells_memory_adds_one_profiled_call_after_the_probes_region():
    from types import SimpleNamespace

    from bench_utils.study.cell.time_by_phase import Phases

    weight, x = torch.randn(256, 4096), torch.randn(4096, 256)
    forward, calls = _counted(lambda: (x @ weight).sum(dim=1))  # a 64 MiB intermediate
    phases = Phases()
    with torch.no_grad():
        forward()  # warm-up, as the cell's timed runs are
        memory = after_timing.memory_of(forward, torch.device("cpu"), SimpleNamespace(model=torch.nn.Linear(2, 2)),
                                        {"x": x}, phases)
    assert len(calls) == 1 + after_timing.MEMORY_CALLS + 1
    assert memory["rss_peak_method"].startswith("sampled") and memory["input_bytes"] == x.numel() * 4
    assert memory["cpu_activation_method"] == "torch.profiler profile_memory"
    assert memory["cpu_activation_peak_bytes"] == pytest.approx(64 * 2**20, rel=0.1)
    assert phases.seconds["memory"] > 0


def test_a_cuda_cells_memory_runs_no_profiler(monkeypatch):
    from contextlib import nullcontext
    from types import SimpleNamespace

    from bench_utils.study.cell.time_by_phase import Phases

    probe = SimpleNamespace(report={"cuda_peak_reserved_increase_bytes": 5})
    monkeypatch.setattr(after_timing, "MemoryProbe", lambda *args, **kwargs: nullcontext(probe))
    forward, calls = _counted(lambda: None)
    memory = after_timing.memory_of(forward, torch.device("cuda", 0), SimpleNamespace(model=None), {}, Phases())
    assert len(calls) == after_timing.MEMORY_CALLS  # the allocator's own figures measure it
    assert memory["cuda_peak_reserved_increase_bytes"] == 5
    assert memory["cpu_activation_peak_bytes"] is None and memory["cpu_activation_method"] is None
