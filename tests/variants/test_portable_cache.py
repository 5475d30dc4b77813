"""The portable compile cache: artifacts recorded per block, and a fresh process that starts from them."""

import tempfile

import pytest
import torch

from bench_utils.environment.capture import fp32_math_in_force
from bench_utils.variants import portable_cache
from bench_utils.variants.precision import configure_fp32_math


def tiny_net(channels: int = 8) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, channels, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(channels, 4)).eval()


INPUTS = {"input": torch.randn(1, 3, 16, 16)}  # nn.Sequential's forward names its argument "input"


def compiled_artifacts(model: torch.nn.Module) -> bytes | None:
    torch._dynamo.reset()  # compile for real (a hit on this machine's disk cache records too)
    with portable_cache.recording():
        with torch.no_grad():
            torch.compile(model)(**INPUTS)
    return portable_cache.saved_artifacts()


@pytest.fixture(scope="module")
def artifacts() -> bytes:
    saved = compiled_artifacts(tiny_net())
    assert isinstance(saved, bytes) and saved
    assert portable_cache.saved_artifacts() == saved  # saves are cumulative until the next recording()
    return saved


def test_artifacts_are_those_compiled_inside_the_block(artifacts):
    assert len(artifacts) > 1000  # a compiled graph, not an empty header
    with portable_cache.recording():
        pass
    assert portable_cache.saved_artifacts() is None  # nothing compiled in the block: nothing to save


def test_a_fresh_process_with_empty_caches_hits_the_cache_through_the_artifacts(artifacts, tmp_path, monkeypatch):
    # its own temp folder: another test's fresh process, running beside it under make test, makes one of its own
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    start = portable_cache.startup_from_artifacts(tiny_net(), INPUTS, artifacts, mode="default")
    assert start["fx_graph_cache_hits"] >= 1 and start["fx_graph_cache_misses"] == 0, start
    assert len(start["first_calls_s"]) == 1
    assert all(start[key] > 0 for key in ("import_s", "model_load_s", "load_artifacts_s", "first_answer_s"))
    assert start["first_answer_s"] == pytest.approx(start["load_artifacts_s"] + sum(start["first_calls_s"]))
    assert start["artifact_bytes"] == len(artifacts)
    assert not list(tmp_path.glob("portable_cache-*"))  # its folder is removed
    print("fresh process from artifacts:", start)


@pytest.mark.slow  # two compiles and a fresh process, 35-50 s: make bench runs it
def test_artifacts_of_another_model_do_not_help_and_the_measurement_shows_it(artifacts):
    # recorded after the 8-channel net's artifacts: were they kept, the fresh process would hit
    other = compiled_artifacts(tiny_net(channels=16))
    assert other != artifacts
    start = portable_cache.startup_from_artifacts(tiny_net(), INPUTS, other, mode="default")
    assert start["fx_graph_cache_hits"] == 0 and start["fx_graph_cache_misses"] >= 1, start
    print("fresh process from another model's artifacts:", start)


def test_a_failing_fresh_process_raises_with_its_reason():
    with pytest.raises(RuntimeError, match="could not read the artifacts"):
        portable_cache.startup_from_artifacts(tiny_net(), INPUTS, b"not cache artifacts", mode="default")


def test_arguments_without_a_compile_cache_are_refused_before_any_process():
    with pytest.raises(ValueError, match="no artifacts"):
        portable_cache.startup_from_artifacts(tiny_net(), INPUTS, b"", mode="default")
    with pytest.raises(ValueError, match="not compiled by torch.compile"):
        portable_cache.startup_from_artifacts(tiny_net(), INPUTS, b"x", mode="eager")


def test_the_fresh_process_sets_the_float32_math_the_compiling_one_set():
    # the legacy flags set the per-backend settings too ("ieee" where a new process has "none"), which
    # changes the cache key; a fresh process that does not do the same misses every artifact
    backends = (torch.backends.cuda.matmul, torch.backends.mkldnn.matmul)
    before = [backend.fp32_precision for backend in backends]
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        model = tiny_net(6)
        fresh = portable_cache.startup_from_artifacts(model, INPUTS, compiled_artifacts(model), mode="default")
    finally:
        for backend, value in zip(backends, before):
            backend.fp32_precision = value
    assert fresh["fx_graph_cache_hits"] >= 1 and fresh["fx_graph_cache_misses"] == 0


def test_a_fresh_process_under_the_tf32_policy_sets_it_without_mixing_the_apis():
    # there, setting cuda.matmul's per-backend precision then reading the legacy getter raised
    try:
        configure_fp32_math("on")
        model = tiny_net(5)
        fresh = portable_cache.startup_from_artifacts(model, INPUTS, compiled_artifacts(model), mode="default")
    finally:
        configure_fp32_math()
    assert fresh["fx_graph_cache_hits"] >= 1 and fresh["fx_graph_cache_misses"] == 0


def test_this_process_math_is_read_without_the_legacy_getters():
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # the per-backend API alone: legacy getters raise
        math = fp32_math_in_force()
    finally:
        configure_fp32_math()
    assert math["tf32_matmul"] is True and math["fp32_precision"]["cuda.matmul"] == "tf32"
