import pytest
import torch

from bench_utils.measurement.timer_check import (format_timer_check, launch_bound_check, launch_bound_workload,
                                                 matmul_workload, validate_timer)

SMALL = dict(size=64, runs=20, rounds=2, min_run_time=0.2, noop_runs=500)


def test_workload_is_a_fixed_matrix_product():
    fn, size = matmul_workload(torch.device("cpu"), 32)
    first = fn().clone()
    assert size == 32 and first.shape == (32, 32)
    assert torch.equal(first, matmul_workload(torch.device("cpu"), 32)[0]())  # same seed, same data


class FakeBlockedAutorange:
    """What torch.utils.benchmark's blocked_autorange returns: times in seconds."""

    def __init__(self, seconds):
        self.median = self.mean = seconds


def test_ratios_and_units_with_timers_of_known_speed(monkeypatch):
    # Our timer sees 2.0 ms per call; torch's Timer reports 0.0025 s (2.5 ms).
    from bench_utils.measurement import timer_check
    from bench_utils.measurement.timing import Measurement

    seen = []

    def fake_measure(fn, *, warmup, runs, device):
        seen.append(runs)
        return Measurement(times_ms=[2.0] * runs, first_call_ms=5.0, device=str(device))

    monkeypatch.setattr(timer_check, "measure", fake_measure)
    monkeypatch.setattr(timer_check, "time_first_call", lambda fn, device: 2.0)  # the host clock agrees
    monkeypatch.setattr(timer_check, "torch_timer", lambda fn, t: FakeBlockedAutorange(0.0025))
    result = validate_timer("cpu", size=8, runs=30, rounds=3, min_run_time=0.1, noop_runs=10)
    # three rounds of 10 runs (matmul), the no-op, three rounds of the launch-bound workload
    assert seen == [10, 10, 10, 10, 10, 10, 10]
    assert result["measure_median_ms"] == 2.0 and result["torch_timer_median_ms"] == 2.5
    assert result["ratio_torch_timer"] == pytest.approx(0.8)
    assert result["ratio_torch_timer_mean"] == pytest.approx(0.8)
    assert result["round_ratio_min"] == result["round_ratio_max"] == pytest.approx(0.8)
    assert result["noop_overhead_median_us"] == pytest.approx(2000.0)
    assert result["within_tolerance"] is False  # 20 % off
    assert "WARNING" in format_timer_check(result)
    monkeypatch.setattr(timer_check, "torch_timer", lambda fn, t: FakeBlockedAutorange(0.00201))
    assert validate_timer("cpu", size=8, runs=30, rounds=3, min_run_time=0.1,
                          noop_runs=10)["within_tolerance"] is True


def test_verdict_compares_our_mean_with_timers_block_statistics(monkeypatch):
    # A skewed sample: median 2.0 ms, mean 2.5 ms; Timer (block means) says 2.5 ms.
    from bench_utils.measurement import timer_check
    from bench_utils.measurement.timing import Measurement

    def skewed(fn, *, warmup, runs, device):
        return Measurement(times_ms=[2.0, 2.0, 3.5][: max(runs, 1)] * (runs // 3 or 1), first_call_ms=1.0)

    monkeypatch.setattr(timer_check, "measure", skewed)
    monkeypatch.setattr(timer_check, "launch_bound_check",
                        lambda device, runs, rounds, ops: {"ratio_host_synced": 1.0, "workload": "w",
                                                           "measure_median_ms": 1.0,
                                                           "host_synced_median_ms": 1.0})
    monkeypatch.setattr(timer_check, "torch_timer", lambda fn, t: FakeBlockedAutorange(0.0025))
    result = validate_timer("cpu", size=8, runs=30, rounds=3, min_run_time=0.1, noop_runs=3)
    assert result["ratio_torch_timer"] == pytest.approx(0.8)       # medians differ by the skew
    assert result["ratio_torch_timer_mean"] == pytest.approx(1.0)  # the same estimand agrees
    assert result["within_tolerance"] is True


def test_validate_timer_runs_for_real_on_cpu():
    # Structure only: agreement is judged by the check itself, not by a timed unit test.
    result = validate_timer("cpu", **SMALL)
    assert result["timer"] == "perf_counter_ns" and result["workload"] == "torch.mm fp32 64x64"
    assert result["do_bench_median_ms"] is None  # no CUDA here
    assert result["measure_median_ms"] > 0 and result["torch_timer_median_ms"] > 0
    assert result["ratio_torch_timer"] == pytest.approx(
        result["measure_median_ms"] / result["torch_timer_median_ms"])
    assert result["noop_overhead_median_us"] > 0
    text = format_timer_check(result)
    assert "ratio measure/Timer" in text and "no-op overhead" in text and "verdict" in text


def test_launch_bound_workload_is_many_small_dependent_ops():
    fn = launch_bound_workload(torch.device("cpu"), ops=10)
    assert torch.allclose(fn(), torch.full((64,), 1.0001 ** 10))


def test_launch_bound_check_judges_measure_against_a_synchronized_host_clock(monkeypatch):
    from bench_utils.measurement import timer_check

    monkeypatch.setattr(timer_check, "time_first_call", lambda fn, device: 4.0)  # the host clock: 4 ms
    result = launch_bound_check(torch.device("cpu"), runs=6, rounds=2, ops=5)
    assert result["host_synced_median_ms"] == 4.0
    assert result["ratio_host_synced"] == pytest.approx(result["measure_median_ms"] / 4.0)
    assert result["ratio_host_synced"] < 0.5  # five tiny ops take far less than 4 ms: a mismatch shows
    assert result["do_bench_median_ms"] is None and result["pipelined_median_ms"] is None  # CPU
    assert result["ratio_do_bench"] is None


def test_a_launch_bound_disagreement_fails_the_verdict(monkeypatch):
    from bench_utils.measurement import timer_check

    monkeypatch.setattr(timer_check, "launch_bound_check",
                        lambda device, runs, rounds, ops: {"ratio_host_synced": 0.7, "workload": "w",
                                                           "measure_median_ms": 0.7,
                                                           "host_synced_median_ms": 1.0})
    result = validate_timer("cpu", **SMALL)
    assert result["within_tolerance"] is False and "launch-bound" in format_timer_check(result)


class FakeCudaDevice:
    """torch.cuda.device as a context manager that needs no GPU."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_on_cuda_the_launch_bound_workload_is_judged_against_do_bench_from_an_idle_device(monkeypatch):
    # A fake CUDA device: our per-call timer sees 2.0 ms, the pipelined mode 1.0 ms, do_bench 1.6 ms.
    import sys
    import types

    from bench_utils.measurement import timer_check
    from bench_utils.measurement.timing import Measurement

    events = []

    def fake_measure(fn, *, warmup, runs, device, sync="per-call"):
        return Measurement(times_ms=[2.0 if sync == "per-call" else 1.0] * runs, first_call_ms=2.0)

    def fake_do_bench(fn, warmup, rep, return_mode):
        for _ in range(3):
            fn()
        return 1.6

    monkeypatch.setattr(timer_check, "measure", fake_measure)
    monkeypatch.setattr(timer_check, "time_first_call", lambda fn, device: 2.0)
    monkeypatch.setattr(timer_check, "launch_bound_workload", lambda device, ops: lambda: events.append("call"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("wait"))
    monkeypatch.setattr(torch.cuda, "device", FakeCudaDevice)
    monkeypatch.setitem(sys.modules, "triton.testing", types.SimpleNamespace(do_bench=fake_do_bench))
    result = launch_bound_check(torch.device("cuda"), runs=4, rounds=2, ops=3)
    assert result["do_bench_median_ms"] == 1.6 and result["ratio_do_bench"] == pytest.approx(1.25)
    assert events == ["wait", "call"] * 3  # do_bench timed each call from an idle device
    assert result["pipelined_median_ms"] == 1.0  # shown beside them


@pytest.mark.parametrize("do_bench_ms, verdict", [(0.8, False), (1.0, True)])
def test_a_launch_bound_disagreement_with_do_bench_fails_the_verdict(monkeypatch, do_bench_ms, verdict):
    # the matrix product's timers agree exactly: only the launch-bound do_bench ratio decides
    from bench_utils.measurement import timer_check
    from bench_utils.measurement.timing import Measurement

    monkeypatch.setattr(timer_check, "measure", lambda fn, *, warmup, runs, device: Measurement(
        times_ms=[2.0] * runs, first_call_ms=2.0))
    monkeypatch.setattr(timer_check, "torch_timer", lambda fn, t: FakeBlockedAutorange(0.002))
    monkeypatch.setattr(timer_check, "launch_bound_check",
                        lambda device, runs, rounds, ops: {"ratio_host_synced": 1.0, "workload": "w",
                                                           "measure_median_ms": 1.0, "host_synced_median_ms": 1.0,
                                                           "do_bench_median_ms": do_bench_ms,
                                                           "ratio_do_bench": 1.0 / do_bench_ms})
    result = validate_timer("cpu", **SMALL)
    assert result["within_tolerance"] is verdict
    assert f"do_bench from an idle device {do_bench_ms:.4f} ms" in format_timer_check(result)


def test_rounds_must_fit_the_runs():
    with pytest.raises(ValueError, match="rounds"):
        validate_timer("cpu", size=16, runs=3, rounds=5, min_run_time=0.1, noop_runs=10)


@pytest.mark.cuda
def test_validate_timer_on_cuda_compares_with_do_bench():
    result = validate_timer("cuda", size=2048, runs=100, rounds=5, min_run_time=0.5, noop_runs=1000)
    assert result["timer"] == "cuda_event"
    assert result["do_bench_median_ms"] is not None
    assert 0.5 < result["ratio_do_bench"] < 2.0
    launch = result["launch_bound"]
    assert launch["pipelined_median_ms"] > 0 and launch["do_bench_median_ms"] is not None
    assert abs(launch["ratio_host_synced"] - 1.0) < 0.2 and abs(launch["ratio_do_bench"] - 1.0) < 0.2
