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


def _pool_answered() -> bool:
    """Inductor's own state: its compile-worker pool exists and has answered its readiness job."""
    from torch._inductor.async_compile import AsyncCompile

    ready = AsyncCompile._ready_future
    return AsyncCompile.process_pool.cache_info().currsize > 0 and ready is not None and ready.done()


def test_the_same_cell_compiled_twice_in_one_kernel_times_no_pool_start(monkeypatch):
    # Without a pool up, inductor's backend starts it inside the first timed compile of a kernel (here:
    # seconds of a sidecar interpreter importing torch), later compiles find it up: batch 1's cold_ms
    # would be inflated against the others. Not a timing comparison (noisy on a shared machine): the
    # pool must have answered before each compile's timing begins, and the record must say so.
    from torch._inductor import config
    from torch._inductor.async_compile import shutdown_compile_workers

    from bench_utils.variants import compile_workers

    pool_up_when_timing = []
    time_first_call = compile_cost.time_first_call

    def timed(forward, device):
        pool_up_when_timing.append(_pool_answered())
        return time_first_call(forward, device)

    monkeypatch.setattr(compile_cost, "time_first_call", timed)
    model, x = tiny_model(), torch.randn(2, 32)
    with config.patch(compile_threads=2), torch.no_grad():  # a pool even where torch would pick one thread
        if not compile_workers.in_use():
            pytest.skip("inductor uses no worker pool here (no Triton)")
        shutdown_compile_workers()  # this process as a fresh kernel: no pool yet
        cells = []
        for _ in range(2):  # the same cell twice, as batch sizes 1 and 4 of one kernel
            with compile_cost.fresh_caches():
                cells.append(compile_cost.compile_cold_then_warm(model, "default", lambda f: (lambda: f(x)),
                                                                 torch.device("cpu"), warm=False))
    assert pool_up_when_timing == [True, True]
    first, second = (cell.costs(eager_ms=0.0)["compile_workers"] for cell in cells)
    assert first["pool"] and first["workers"] == 2
    assert first["already_up"] is False and first["wait_ms"] > 0 and first["start_ms"] == first["wait_ms"]
    assert second["already_up"] is True and second["start_ms"] == first["start_ms"]


def _skipping_backend(gm, example_inputs):
    """A backend that skips CUDA graphs as inductor does, through its own counter and logger."""
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances). Found from :\n"
                                        "   File \"model.py\", line 3, in forward")
    return gm.forward


SKIPPING_BACKEND = "bench_utils_test_cudagraph_skips"
if SKIPPING_BACKEND not in torch._dynamo.list_backends(exclude_tags=()):
    torch._dynamo.register_backend(_skipping_backend, name=SKIPPING_BACKEND)


def test_cuda_graph_skips_and_their_reasons_are_recorded_with_the_compilation():
    with torch.no_grad():
        compiled = compile_cost.compile_cold_then_warm(
            tiny_model(), "default", lambda f: (lambda: f(torch.randn(2, 32))), torch.device("cpu"),
            backend=SKIPPING_BACKEND)
    reason = "skipping cudagraphs due to mutated inputs (1 instances). Found from :"
    for stats in (compiled.cold_stats, compiled.warm_stats):
        assert stats["cudagraph_skips"] == 1 and stats["cudagraph_skip_reasons"] == {reason: 1}
    assert compiled.costs(eager_ms=0.0)["cuda_graphs"] is False  # default mode: none asked, none used


class _FakeCudaGraphCompile:
    """Stands in for a reduce-overhead compilation on a GPU: its first call compiles (skipping the
    graphs of ``skipped`` of its graphs, through inductor's counter and log), its second records the
    others as cudagraph trees do (inside the CUDAGRAPH_RECORDING callbacks)."""

    def __init__(self, graphs: int, skipped: int):
        self.graphs, self.skipped, self.calls = graphs, skipped, 0

    def __call__(self, model, mode, **options):
        return self

    def forward(self):
        from torch._dynamo.callback import CallbackTrigger, callback_handler
        from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

        self.calls += 1
        if self.calls == 1:
            for _ in range(self.skipped):
                log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to cpu device (arg1_1)")
        elif self.calls == 2:
            for graph in range(self.graphs - self.skipped):
                with callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, f"0/{graph}"):
                    pass


@pytest.mark.parametrize("graphs, skipped, used", [(2, 0, True), (2, 1, "partial"), (1, 1, False)])
def test_cuda_graphs_says_what_inductor_did_not_what_the_mode_asked(monkeypatch, graphs, skipped, used):
    fake = _FakeCudaGraphCompile(graphs, skipped)
    monkeypatch.setattr(modes, "compile_model", fake)
    monkeypatch.setattr(compile_cost, "time_first_call", lambda forward, device: forward() or 1.0)
    compiled = compile_cost.compile_cold_then_warm(torch.nn.Identity(), "reduce-overhead",
                                                   lambda model: model.forward, torch.device("cuda"),
                                                   backend="eager", warm=False)
    costs = compiled.costs(eager_ms=0.0)
    assert costs["cuda_graphs"] == used
    assert compiled.cold_stats["cudagraph_skips"] == skipped
    assert compiled.cold_stats["cudagraph_recordings"] == graphs - skipped
    assert modes.options("reduce-overhead")["cuda_graphs_requested"] is True


def test_a_cuda_graph_recorded_inside_the_timed_runs_invalidates_the_cell():
    from torch._dynamo.callback import CallbackTrigger, callback_handler
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    with compile_cost.no_recompile():  # a compilation's own callbacks are no recording
        with callback_handler.install_callbacks(CallbackTrigger.DYNAMO, "0/0"):
            pass
    with pytest.raises(compile_cost.RerecordedDuringTiming, match="1 CUDA graph.* recorded and 0 skipped"):
        with compile_cost.no_recompile():  # as CUDAGraphTreeManager.record_function re-records
            with callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"):
                pass
    with pytest.raises(RecompiledDuringTiming, match="exceeding max re-recording limit"):
        with compile_cost.no_recompile():  # a fall back to eager in the middle of the replays
            log_cudagraph_skip_and_bump_counter("skipping cudagraph due to function 0 exceeding max re-recording "
                                                "limit (=50) on cudagraph node 0 due to static input data pointer "
                                                "changed.")
