"""The GPU shared by a token between the measuring kernel and the compile processes beside it.

While one process times a cell, others may compile the next cells (``study.runner.compile_ahead``). Compiling
touches the GPU (the first calls, Triton's autotuning, pad-mm's benchmarks), and another process's kernels on the
GPU would move the figures being taken. So the GPU has a token: the measuring kernel holds it through every window
whose figures another process's work would change (warm-up and timed runs, energy windows, memory probes, the
profile), and a compile process holds it through each of its GPU phases; neither runs its part without it.

The token is an ``flock`` on a file beside the kept caches (the kernel releases it when its holder dies). Each
holding is one JSON line in ``<token>.log``: the role, the process, what it held the token for, and its start and
end on the host's monotonic clock (``CLOCK_MONOTONIC``, one clock for every process): ``overlaps`` reads it back,
and a lease keeps it, so that it shows that no compile process's GPU phase overlapped a measuring window.

A process uses the token once it is told where (``use``); ``window`` is then the token held, and nothing
elsewhere (a kernel of a study without compile processes, a notebook run by hand). Holdings nest: an inner window
inside an outer one is the outer one's.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
import fcntl
import json
import os
from pathlib import Path
import threading
import time
from typing import Any, Callable, ContextManager, Iterable, Iterator

from .paused_beside import PausedBeside, pauses

MEASURING, COMPILING = "measuring", "compiling"   # the holders' roles
TOKEN_FILE = "gpu.token"                          # its file, in the kept caches' folder of a study
PAUSE_FOLDER = "beside"                           # the compile processes' pids, beside the token (``paused_beside``)
# a measuring kernel's windows whose figures the host's other work may move: where the compile processes pause,
# they pause through these (not through the kernel's own compiling calls and Inductor's benchmarks)
PAUSED_FOR = ("timed runs", "energy window", "memory probe", "profile")


class GpuToken:
    """The token at ``path``, held by this process in ``role``. ``before_release``: called before each release (a
    compile process's ``torch.cuda.synchronize``: CUDA work is asynchronous, and what it queued must be done before
    another process measures)."""

    def __init__(self, path: str | os.PathLike, role: str, before_release: Callable[[], None] | None = None,
                 pause: PausedBeside | None = None) -> None:
        self.path, self.role, self.before_release = Path(path), role, before_release
        self.pause = pause                  # the processes beside, stopped through each timed window (``PAUSED_FOR``)
        self.waits: list[tuple[float, float]] = []  # each wait for another process's release: start, end (monotonic)
        self._thread = threading.RLock()    # one thread of the process holds it at a time, for its whole holding
        self._local = threading.local()     # per thread: how deep in windows, and the open holding
        self._handle: Any = None
        self._holding: dict[str, Any] | None = None

    @property
    def log_path(self) -> Path:
        return self.path.with_name(self.path.name + ".log")

    @contextmanager
    def held(self, what: str) -> Iterator[None]:
        """The token held for ``what``, waited for as long as another process holds it; logged once released."""
        depth = getattr(self._local, "depth", 0)
        if depth:  # inside a window of this thread already: the outer one's holding
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        with self._thread:
            self._acquire(what)
            self._local.depth = 1
            try:
                with self.pause.paused() if self.pause is not None and what.startswith(PAUSED_FOR) else nullcontext():
                    yield
            finally:
                self._local.depth = 0
                self._release()

    @contextmanager
    def let_go(self) -> Iterator[None]:
        """Inside a window of this thread: the token released for the block and taken again after it (its wait
        counted): a compile process lets it go while it compiles (the CPU's work), keeps it while it runs code."""
        depth = getattr(self._local, "depth", 0)
        if not depth or self._holding is None:
            yield
            return
        what = self._holding["what"]
        self._release()
        self._local.depth = 0  # a window inside the block (Inductor's benchmarks) takes the token itself
        try:
            yield
        finally:
            self._acquire(what)
            self._local.depth = depth

    def _acquire(self, what: str) -> None:
        self._handle = open(self.path, "a+b")
        asked = time.monotonic()
        fcntl.flock(self._handle, fcntl.LOCK_EX)
        start = time.monotonic()
        self.waits.append((asked, start))
        self._holding = {"role": self.role, "pid": os.getpid(), "what": what, "waited_s": round(start - asked, 6),
                         "start": start}

    def _release(self) -> None:
        try:
            if self.before_release is not None:
                self.before_release()
        finally:
            holding, handle = self._holding, self._handle
            self._holding = self._handle = None
            if holding is not None:
                self._log({**holding, "end": time.monotonic()})
            if handle is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()

    def _log(self, entry: dict[str, Any]) -> None:
        # one write of one line, appended: lines of several processes never interleave
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")


_current: GpuToken | None = None


def use(path: str | os.PathLike | None, role: str, before_release: Callable[[], None] | None = None,
        pause: PausedBeside | None = None) -> None:
    """Take the token at ``path`` in ``role`` for this process's windows from now on (None: no token), Inductor's
    GPU benchmarks in this process among them (torch's hook for a harness's GPU lock): what a kernel's benchmarks
    choose is what it times, and a compile process's run on the GPU."""
    global _current
    from torch._inductor.runtime import benchmarking

    _current = GpuToken(Path(path), role, before_release, pause) if path else None
    lock_inductor_benchmarks(benchmarking, (lambda: window("inductor benchmark")) if path else None)


# what torch's benchmarker runs on the GPU: the methods a lock must hold where torch has no hook for one
BENCHMARK_METHODS = ("benchmark_gpu", "benchmark_gpu_with_cuda_graph")


def lock_inductor_benchmarks(benchmarking: Any, lock: Callable[[], ContextManager] | None) -> str:
    """Hold ``lock`` (a context manager's factory; None: none) around every GPU benchmark Inductor runs in this
    process. torch's hook for a harness's lock (``set_gpu_benchmark_lock_context``) where it has one; an older
    torch (2.11, the H200 image's) has none, and there the one ``benchmarker`` every caller imports has its GPU
    methods wrapped on the instance (its class's own calls between them stay unlocked, as the hook leaves them).
    Says which: "hook", "wrapped" or "none" (no benchmarker to wrap)."""
    if hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
        benchmarking.set_gpu_benchmark_lock_context(lock)
        return "hook"
    benchmarker = getattr(benchmarking, "benchmarker", None)
    if benchmarker is None:
        return "none"
    for name in BENCHMARK_METHODS:
        vars(benchmarker).pop(name, None)  # an earlier lock's wrapper: the class's method again
        method = getattr(benchmarker, name, None)
        if lock is not None and method is not None:
            setattr(benchmarker, name, _locked(method, lock))
    return "wrapped"


def _locked(method: Callable[..., Any], lock: Callable[[], ContextManager]) -> Callable[..., Any]:
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock():
            return method(*args, **kwargs)
    return locked


def measure_beside_compiles(path: str | os.PathLike | None, device: str, pause: bool = False) -> str | None:
    """A measuring kernel's token at ``path`` (None: none): its queued CUDA work is done before it lets go; with
    ``pause``, the compile processes registered beside the token stopped through its timed windows. What its
    records say of the processes beside (``config.beside_compiles``): "paused", "compiling", or None (none)."""
    import torch

    paused = PausedBeside(Path(path).with_name(PAUSE_FOLDER)) if path and pause else None
    use(path, MEASURING, before_release=torch.cuda.synchronize if path and device.startswith("cuda") else None,
        pause=paused)
    return None if not path else "paused" if pause else "compiling"


def compile_beside(path: str | os.PathLike | None, device: str) -> None:
    """A process compiling beside a measuring kernel (a compile process, a kernel started ahead before its gate): the
    token at ``path`` in the compiling role; before it lets go, what it queued on the GPU is done (CUDA work is
    asynchronous) and the memory its allocator keeps cached is the card's again (its model's weights stay); None: no token."""
    import torch

    def done_on_the_gpu() -> None:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    use(path, COMPILING, before_release=done_on_the_gpu if device.startswith("cuda") else None)


def let_go() -> ContextManager[None]:
    """The token released for the block where this thread holds it (``GpuToken.let_go``); nothing elsewhere."""
    return _current.let_go() if _current is not None else nullcontext()


def window(what: str) -> ContextManager[None]:
    """The token held for ``what`` where this process uses one; nothing where it does not."""
    return _current.held(what) if _current is not None else nullcontext()


@contextmanager
def window_between_compiles(what: str) -> Iterator[None]:
    """The token held for ``what`` but let go from each of dynamo's compilations' start to its end (tracing, code
    generation: the CPU's work; Inductor's GPU benchmarks in it take the token themselves), held for the rest (the
    compiled code's runs, the eager code between graph breaks, a CUDA graph's recording): how a process compiling
    beside a measuring kernel compiles. Registered inside the block's dynamo reset, not before it: a reset clears
    dynamo's callbacks (``variants.compile_cost`` runs its calls inside one)."""
    from torch._dynamo.callback import callback_handler

    open_: list[Any] = []

    def start(_: Any) -> None:
        released = let_go()
        released.__enter__()
        open_.append(released)

    def end(_: Any) -> None:
        if open_:
            open_.pop().__exit__(None, None, None)

    with window(what):
        callback_handler.register_start_callback(start)
        callback_handler.register_end_callback(end)
        try:
            yield
        finally:
            for callbacks, callback in ((callback_handler.start_callbacks, start),
                                        (callback_handler.end_callbacks, end)):
                if callback in callbacks:
                    callbacks.remove(callback)


def not_running_s(start: float, end: float) -> float:
    """Seconds of ``start``..``end`` (``time.monotonic``) in which this process could not run what it timed: waiting
    for the token, or, in the compiling role, stopped by a measuring kernel's pause (``paused_beside.pauses``): the
    union of both, so that a wait while stopped counts once. 0 where it uses no token. A compile's figure takes
    them out: neither is what the compile costs."""
    if _current is None or end <= start:
        return 0.0
    spans = list(_current.waits)
    if _current.role == COMPILING:
        spans += pauses(_current.path.with_name(PAUSE_FOLDER))
    return covered_s(spans, start, end)


def covered_s(spans: Iterable[tuple[float, float]], start: float, end: float) -> float:
    """The length of ``start``..``end`` that the union of ``spans`` covers."""
    total, reached = 0.0, start
    for span_start, span_end in sorted(spans):
        span_start, span_end = max(span_start, reached), min(span_end, end)
        if span_end > span_start:
            total += span_end - span_start
            reached = span_end
    return total


def holdings(log_path: str | os.PathLike) -> list[dict[str, Any]]:
    """The token's log, one entry per holding (an unreadable line, from a holder killed mid-write, left out)."""
    entries = []
    try:
        lines = Path(log_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def overlaps(entries: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every compile phase and measuring window that overlapped in time: none, where the token did its work."""
    entries = list(entries)
    measuring = [entry for entry in entries if entry["role"] == MEASURING]
    compiling = [entry for entry in entries if entry["role"] == COMPILING]
    return [(compile_phase, window_) for compile_phase in compiling for window_ in measuring
            if compile_phase["start"] < window_["end"] and window_["start"] < compile_phase["end"]]
