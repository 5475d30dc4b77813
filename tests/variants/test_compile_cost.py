import os

import pytest
import torch

from bench_utils.variants import compile_cost, modes
from bench_utils.variants.compile_cost import RecompiledDuringTiming


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()


def test_cold_compile_writes_a_fresh_cache_and_the_warm_one_hits_it():
    model, x = tiny_model(), torch.randn(2, 32)
    outside = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with torch.no_grad(), compile_cost.fresh_caches():
        cache_dir = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        assert cache_dir != outside and os.listdir(cache_dir) == []  # nothing from earlier cells
        compiled = compile_cost.compile_cold_then_warm(model, "default", lambda f: (lambda: f(x)),
                                                       torch.device("cpu"))
        assert os.listdir(cache_dir)  # the cold compilation filled it
        assert compiled.cold_stats["fx_graph_cache_hits"] == 0 and compiled.cold_stats["graphs"] == 1
        assert compiled.warm_stats["fx_graph_cache_hits"] >= 1  # read back, not compiled again
        torch.testing.assert_close(compiled.forward(), model(x))
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != cache_dir and not os.path.exists(cache_dir)
    costs = compiled.costs(eager_ms=0.5)
    assert costs["cold_ms"] == pytest.approx(compiled.cold_calls_ms[0] - 0.5)
    assert costs["warm_ms"] == pytest.approx(compiled.warm_calls_ms[0] - 0.5)
    assert costs["cold_ms"] > costs["warm_ms"] > 0  # codegen and a C++ build vs a cache read


def test_cuda_graph_modes_count_the_recording_call_as_compilation():
    assert compile_cost.compiling_calls("reduce-overhead") == 2
    assert compile_cost.compiling_calls("max-autotune") == 2
    assert compile_cost.compiling_calls("default") == 1
    calls = []
    with torch.no_grad():
        compiled = compile_cost.compile_cold_then_warm(
            tiny_model(), "default", lambda f: (lambda: calls.append(1)), torch.device("cpu"),
            backend="eager")
    assert len(calls) == 2 and len(compiled.cold_calls_ms) == 1  # one compiling call per compile
    compiled.cold_calls_ms, compiled.warm_calls_ms = [10.0, 4.0], [3.0, 2.0]
    assert compiled.costs(eager_ms=1.0)["cold_ms"] == pytest.approx(12.0)  # two calls, two eager
    assert compiled.costs(eager_ms=1.0)["warm_ms"] == pytest.approx(3.0)


def test_without_warm_the_cold_compilation_is_the_one_timed():
    calls = []
    with torch.no_grad():
        compiled = compile_cost.compile_cold_then_warm(
            tiny_model(), "default", lambda f: (lambda: calls.append(1)), torch.device("cpu"),
            backend="eager", warm=False)
    assert len(calls) == 1 and compiled.warm_calls_ms is None and compiled.warm_stats is None
    costs = compiled.costs(eager_ms=0.0)
    assert costs["warm_ms"] is None and costs["cold_ms"] == pytest.approx(compiled.cold_calls_ms[0])
    assert "another batch size" in costs["cache"]


def test_a_recompile_inside_the_timed_runs_invalidates_the_cell():
    modes.reset()
    model = torch.compile(tiny_model(), backend="eager", dynamic=False)
    with torch.no_grad():
        model(torch.randn(2, 32))
        with compile_cost.no_recompile():
            model(torch.randn(2, 32))  # same shape: the compiled graph is reused
        with pytest.raises(RecompiledDuringTiming, match="recompiled during the timed runs"):
            with compile_cost.no_recompile():
                model(torch.randn(3, 32))  # a new shape needs a new graph


def test_other_errors_pass_through_the_guard():
    with pytest.raises(RuntimeError, match="unrelated"):
        with compile_cost.no_recompile():
            raise RuntimeError("unrelated")
