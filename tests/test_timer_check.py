import pytest
import torch

from bench_utils.timer_check import format_timer_check, matmul_workload, validate_timer

SMALL = dict(size=64, runs=20, rounds=2, min_run_time=0.2, noop_runs=500)


def test_workload_is_a_fixed_matrix_product():
    fn, size = matmul_workload(torch.device("cpu"), 32)
    first = fn().clone()
    assert size == 32 and first.shape == (32, 32)
    assert torch.equal(first, matmul_workload(torch.device("cpu"), 32)[0]())  # same seed, same data


def test_validate_timer_on_cpu_agrees_with_torch_timer():
    result = validate_timer("cpu", **SMALL)
    assert result["timer"] == "perf_counter_ns" and result["workload"] == "torch.mm fp32 64x64"
    assert result["do_bench_median_ms"] is None  # no CUDA here
    # the same workload timed two ways: the same order of magnitude (a units slip would be 1000x)
    assert 0.3 < result["ratio_torch_timer"] < 3.0
    assert result["ratio_torch_timer"] == pytest.approx(
        result["measure_median_ms"] / result["torch_timer_median_ms"])
    assert 0 < result["noop_overhead_median_us"] < 1000
    assert isinstance(result["within_tolerance"], bool)
    text = format_timer_check(result)
    assert "ratio measure/Timer" in text and "no-op overhead" in text and "verdict" in text


def test_rounds_must_fit_the_runs():
    with pytest.raises(ValueError, match="rounds"):
        validate_timer("cpu", size=16, runs=3, rounds=5, min_run_time=0.1, noop_runs=10)


@pytest.mark.cuda
def test_validate_timer_on_cuda_compares_with_do_bench():
    result = validate_timer("cuda", size=2048, runs=100, rounds=5, min_run_time=0.5, noop_runs=1000)
    assert result["timer"] == "cuda_event"
    assert result["do_bench_median_ms"] is not None
    assert 0.5 < result["ratio_do_bench"] < 2.0
