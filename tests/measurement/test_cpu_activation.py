import os
import subprocess
import sys
import textwrap

import pytest
import torch

from bench_utils.measurement.cpu_activation import METHOD, cpu_activation_peak, peak_live_bytes

MiB = 2**20


class KnownIntermediate(torch.nn.Module):
    """A forward pass whose only large buffer is a 64 MiB matmul output, in eager and compiled alike
    (a matmul is an extern kernel: Inductor must materialize its output; the sum reads it)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(256, 4096))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight).sum(dim=1)  # (4096, 4096) float32: 64 MiB


def test_the_peak_counts_blocks_allocated_in_the_call_only():
    # a: 100 B, b: 50 B live with it (peak 150), a freed, c: 30 B (80 live); a free of a block
    # from before the call (address 9) is not counted, nor pulls the figure down
    events = [(1, 100), (2, 50), (9, -1000), (1, -100), (3, 30), (2, -50), (3, -30)]
    assert peak_live_bytes(events) == 150
    assert peak_live_bytes([]) == 0
    # an address allocated again before its free was seen (freed on another thread): replaced, not added
    assert peak_live_bytes([(1, 100), (1, 100)]) == 100


def test_eager_activation_of_a_known_64_mib_intermediate():
    model, x = KnownIntermediate(), torch.randn(4096, 256)
    with torch.no_grad():
        model(x)  # warm-up: resident memory would no longer see the intermediate
        report = cpu_activation_peak(lambda: model(x))
    assert report["cpu_activation_method"] == METHOD and report["cpu_activation_note"] is None
    assert report["cpu_activation_peak_bytes"] == pytest.approx(64 * MiB, rel=0.1)
    assert report["cpu_activation_allocations"] >= 2  # the intermediate and the output


def test_compiled_activation_of_a_known_64_mib_intermediate_without_recompiling():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    model, x = KnownIntermediate(), torch.randn(4096, 256)
    compiled = torch.compile(model)  # Inductor: generated C++ kernels, buffers from its wrapper
    with torch.no_grad():
        compiled(x)
        compiled(x)
        graphs = counters["stats"]["unique_graphs"]
        report = cpu_activation_peak(lambda: compiled(x))
    assert report["cpu_activation_peak_bytes"] == pytest.approx(64 * MiB, rel=0.1)
    assert counters["stats"]["unique_graphs"] == graphs  # profiling the call compiled nothing new
    torch._dynamo.reset()


def test_without_a_figure_the_field_is_none_with_the_reason():
    def fails():
        raise RuntimeError("out of memory\nmore")

    failed = cpu_activation_peak(fails)
    assert failed["cpu_activation_peak_bytes"] is None
    assert failed["cpu_activation_note"] == "torch.profiler failed: RuntimeError: out of memory"
    nothing = cpu_activation_peak(lambda: None)  # no allocation: not 0, not measured
    assert nothing["cpu_activation_peak_bytes"] is None and nothing["cpu_activation_allocations"] == 0
    assert "no allocation" in nothing["cpu_activation_note"]


def test_kinetos_start_and_stop_lines_stay_off_stderr_from_the_first_profile_on():
    # kineto reads its log level once, at a process's first profile: only a fresh process shows it is set in time
    script = textwrap.dedent("""
        import torch
        from bench_utils.measurement.cpu_activation import cpu_activation_peak
        for _ in range(2):
            assert cpu_activation_peak(lambda: torch.ones(4096) + 1)["cpu_activation_peak_bytes"]
    """)
    environment = {name: value for name, value in os.environ.items() if name != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "profiler_start" not in done.stderr and "profiler_stop" not in done.stderr, done.stderr[-2000:]
