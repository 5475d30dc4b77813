"""Inductor's compile-worker pool, up before every timed compilation, so no cold compile pays its start.

Inductor's backend starts its pool of Triton compile workers at a process's first compilation and compiles in the
main process until they answer; by default the pool quiesces after 60 s idle (``quiesce_async_compile_time``) and
restarts its workers on the next job: the pool started here does not, as on torch 2.11 a sidecar whose workers were
restarted by fork hung for its whole 300 s shutdown wait at exit (docs/variants.md).

``start()`` launches the pool without waiting (the kernel calls it first, while it builds its model); ``ready()``
starts it where it is not yet and waits until a no-op job has gone through a worker (before the compiler warm-up
and each timed compilation, whose record says what it found). With one compile thread or no Triton there is no pool.
"""

from __future__ import annotations

from contextlib import nullcontext
import time
from typing import Any

# torch's documented override of Inductor's compile threads, read once as Inductor's config is imported; 1: no pool
THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
# in all, for one call: a sidecar interpreter imports torch before it answers (seconds; more on a loaded host)
READY_TIMEOUT_S = 120.0

_measured_start: tuple[Any, float] | None = None  # (the pool, its start in ms) where start() or ready() started it
_launched: tuple[Any, float, dict[str, float]] | None = None  # start()'s pool, its launch, when it first answered
_failed: str | None = None  # why the pool did not answer: later calls do not wait for it again


def _async_compile():
    from torch._inductor import async_compile

    return async_compile


def in_use() -> bool:
    """Inductor would compile in a pool of worker processes here (several compile threads, Triton)."""
    from torch.utils._triton import has_triton_package

    async_compile = _async_compile()
    allowed = getattr(async_compile, "_process_pool_allowed", lambda: True)()  # torch 2.12+: not in daemons
    return async_compile.get_compile_threads() > 1 and has_triton_package() and allowed


def is_up() -> bool:
    """The pool exists, has answered once, and is not quiesced (its workers are alive)."""
    compile_class = _async_compile().AsyncCompile
    if compile_class.process_pool.cache_info().currsize == 0:  # lru_cache(1): created on first access
        return False
    ready = compile_class._ready_future
    if ready is None or not ready.done() or ready.exception() is not None:
        return False
    # a SubprocPool marks a quiesce it asked for; its next job restarts the workers
    return getattr(compile_class.process_pool(), "quiesce_waitcounter", None) is None


def _no_quiesce(config: Any, created: bool):
    """Inductor's config with quiescing off while the pool is created (read once, then): inductor's config is part
    of every FX-graph cache key, and a fresh process started from the cache (``portable_cache``) has the default."""
    if created or not hasattr(config, "quiesce_async_compile_pool"):
        return nullcontext()
    return config.patch(quiesce_async_compile_pool=False)


def start(backend: str = "inductor") -> None:
    """Launch the pool where inductor would use one and nothing has yet, without waiting for it (``ready`` waits,
    and reports its start: from the launch to the workers' first answer)."""
    global _launched, _failed
    if backend != "inductor" or not in_use() or _failed is not None:
        return
    async_compile = _async_compile()
    compile_class = async_compile.AsyncCompile
    if compile_class.process_pool.cache_info().currsize > 0:
        return
    launched = time.perf_counter()
    answered: dict[str, float] = {}
    try:
        with _no_quiesce(async_compile.config, created=False):
            compile_class.warm_pool()
        compile_class.wakeup()  # the readiness job: its answer dates the pool's start
    except Exception as exc:  # inductor then compiles in this process, as it does while its pool starts
        _failed = f"the pool did not start: {type(exc).__name__}: {exc}"[:300]
        return
    if compile_class._ready_future is not None:
        compile_class._ready_future.add_done_callback(lambda _: answered.setdefault("at", time.perf_counter()))
    _launched = (compile_class.process_pool(), launched, answered)


def ready(backend: str = "inductor", timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any] | None:
    """Start the pool if inductor would use one, and wait until a worker answers; what was found
    (None for a backend other than inductor: it has no pool).

    ``already_up``: the pool was up before this call; ``wait_ms``: this call's wait (outside any
    timed compilation); ``start_ms``: the pool's start where this module launched it (``start()``'s launch to the
    workers' first answer, or the wait that created it), None where something else created it.
    """
    global _measured_start, _failed
    if backend != "inductor":
        return None
    async_compile = _async_compile()
    config = async_compile.config
    block: dict[str, Any] = {"pool": in_use(), "workers": async_compile.get_compile_threads(),
                             "start_method": config.worker_start_method}
    if not block["pool"]:
        return {**block, "already_up": None, "wait_ms": None, "start_ms": None,
                "note": "no worker pool: inductor compiles in this process (one compile thread, or no Triton)"}
    if _failed is not None:  # a broken pool costs one wait per process, not one per compilation
        return {**block, "already_up": False, "wait_ms": None, "start_ms": None, "note": _failed}
    compile_class = async_compile.AsyncCompile
    already_up = is_up()
    created = compile_class.process_pool.cache_info().currsize > 0
    start = time.perf_counter()
    try:
        with _no_quiesce(config, created):
            compile_class.warm_pool()  # the pool object (a SubprocPool starts its sidecar here)
        compile_class.wakeup()        # submits the readiness job; a SubprocPool's sidecar starts its workers
        if compile_class._ready_future is not None:
            compile_class._ready_future.result(timeout=timeout_s)
        # one more job through a worker: after a quiesce the readiness job above had long answered
        left_s = max(1.0, timeout_s - (time.perf_counter() - start))
        compile_class.process_pool().submit(compile_class._get_ready).result(timeout=left_s)
    except Exception as exc:  # inductor then compiles in this process, as it does while its pool starts
        _failed = f"the pool did not answer within {timeout_s:.0f} s: {type(exc).__name__}: {exc}"[:300]
        return {**block, "already_up": already_up, "wait_ms": None, "start_ms": None, "note": _failed}
    wait_ms = (time.perf_counter() - start) * 1e3
    pool = compile_class.process_pool()
    block["quiesces"] = getattr(pool, "timer", None) is not None
    if not created:
        _measured_start = (pool, wait_ms)
    elif _measured_start is None and _launched is not None and _launched[0] is pool:  # start() launched it
        _, launched, answered = _launched
        _measured_start = (pool, (answered.get("at", time.perf_counter()) - launched) * 1e3)
    ours = _measured_start if _measured_start is not None and _measured_start[0] is pool else None  # started here
    return {**block, "already_up": already_up, "wait_ms": wait_ms,
            "start_ms": ours[1] if ours is not None else None}
