import pytest
from torch._inductor import config
from torch._inductor.async_compile import AsyncCompile

from bench_utils.variants import compile_workers


def test_without_several_compile_threads_or_inductor_there_is_no_pool_to_start():
    assert compile_workers.ready("aot_eager") is None  # not inductor: no pool of its own
    with config.patch(compile_threads=1):  # torch's choice on a one-core machine: compiles in-process
        block = compile_workers.ready()
    assert block["pool"] is False and block["workers"] == 1
    assert block["already_up"] is None and block["wait_ms"] is None and "no worker pool" in block["note"]


def test_the_pool_it_starts_never_quiesces_and_a_quiesced_pool_is_not_up():
    with config.patch(compile_threads=2):  # a pool even where torch would pick one thread
        if not compile_workers.in_use():
            pytest.skip("inductor uses no worker pool here (no Triton)")
        block = compile_workers.ready()
        assert block["wait_ms"] is not None, block["note"]  # the pool answered (else: why not)
        pool = AsyncCompile.process_pool()
        if not hasattr(pool, "quiesce"):
            pytest.skip(f"{type(pool).__name__} does not quiesce")
        if block["start_ms"] is not None:  # ready() created it (else another test's compilation did)
            assert getattr(pool, "timer", None) is None  # no idle timer: its workers are never stopped
        again = compile_workers.ready()
        assert again["already_up"] is True and again["start_ms"] == block["start_ms"]
        assert again["quiesces"] is (getattr(pool, "timer", None) is not None)
        pool.quiesce()  # what inductor's idle timer does to a pool something else created
        assert not compile_workers.is_up()


def test_a_pool_that_does_not_answer_is_waited_for_once_a_process(monkeypatch):
    with config.patch(compile_threads=2):
        if not compile_workers.in_use():
            pytest.skip("inductor uses no worker pool here (no Triton)")
        monkeypatch.setattr(compile_workers, "_failed", None)  # restored after the test: other tests' pools
        starts = []

        def broken_sidecar():
            starts.append(1)
            raise RuntimeError("sidecar died")

        monkeypatch.setattr(AsyncCompile, "warm_pool", staticmethod(broken_sidecar))
        first = compile_workers.ready()
        assert first["wait_ms"] is None and "did not answer" in first["note"] and "sidecar died" in first["note"]
        again = compile_workers.ready()  # every later compilation: no second wait on a broken pool
        assert again["note"] == first["note"] and again["wait_ms"] is None and starts == [1]


def test_starting_the_pool_leaves_inductors_config_as_it_was():
    # inductor's config enters every FX-graph cache key: a fresh process (the portable cache) has the default
    from torch._inductor import async_compile

    with config.patch(compile_threads=2):
        if not compile_workers.in_use():
            pytest.skip("inductor uses no worker pool here (no Triton)")
        before = config.save_config_portable()
        async_compile.shutdown_compile_workers()  # a pool of its own to start
        AsyncCompile.process_pool.cache_clear()
        block = compile_workers.ready()
        assert block["wait_ms"] is not None and block["quiesces"] is False, block.get("note")
        assert config.save_config_portable() == before


def test_a_pool_launched_without_waiting_is_waited_for_later_and_its_start_dated_by_its_first_answer():
    # a fresh process: the pool this module launches, no other test's
    script = """
import json, time
from torch._inductor import config
from bench_utils.variants import compile_workers

with config.patch(compile_threads=2):
    if not compile_workers.in_use():
        print(json.dumps(None)); raise SystemExit
    launched = time.perf_counter()
    compile_workers.start()
    returned_s = time.perf_counter() - launched
    time.sleep(0.5)  # the kernel's other work meanwhile
    block = compile_workers.ready()
    again = compile_workers.ready()
print(json.dumps({"returned_s": returned_s, "block": block, "again": again}))
"""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result is None:
        pytest.skip("inductor uses no worker pool here (no Triton)")
    block, again = result["block"], result["again"]
    assert block["pool"] is True and block["wait_ms"] is not None, block.get("note")
    assert block["quiesces"] is False  # launched with quiescing off, as ready() creates it
    # its start runs from the launch to the first answer: the 0.5 s of other work in it, not in ready()'s wait
    assert block["start_ms"] >= 500 and block["start_ms"] >= block["wait_ms"]
    assert result["returned_s"] * 1e3 < block["start_ms"]  # start() did not wait for it
    assert again["already_up"] is True and again["start_ms"] == block["start_ms"]
