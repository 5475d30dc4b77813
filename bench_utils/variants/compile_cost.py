"""What compiling costs, cold and warm, and a guard against compiling inside the timed runs (docs/variants.md).

Cold: every compile cache empty; warm: after a dynamo reset, from the caches the cold compile filled. The compiling
calls are timed with the device idle on both sides, less as many eager calls. The timed runs go under
``fail_on_recompile``: a recompile, or a CUDA graph recorded or skipped, stops the cell.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
import os
from typing import Any, Callable, Iterator

import torch

from ..measurement.timing import time_first_call
from . import compile_workers, cuda_graph_checks, modes
from .cell_plan import compiling_calls  # the cell's plan counts them
from .kept_caches import KeptCold

RECOMPILE_MESSAGE = "Detected recompile when torch.compile stance is 'fail_on_recompile'"


class RecompiledDuringTiming(RuntimeError):
    """The compiled model recompiled during the timed runs: its latency is not a compiled one."""


class RerecordedDuringTiming(RecompiledDuringTiming):
    """A CUDA graph was recorded, or skipped, during the timed runs: their latencies are not replays."""


@contextmanager
def fresh_caches() -> Iterator[None]:
    """Inductor's and Triton's caches in a new empty folder for the block (deleted after it)."""
    from torch._inductor import utils

    # fresh_cache is the current name; torch releases before 2.8 call it fresh_inductor_cache
    fresh_cache = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache
    with fresh_cache():
        yield


@contextmanager
def cache_folder(folder: str | os.PathLike) -> Iterator[None]:
    """Inductor's and Triton's caches in ``folder`` for the block, kept after it: a row's mode compiles cold
    there, and again from it (``variants.row_compilation``), as ``fresh_caches`` does with a folder it deletes."""
    folder = os.fspath(folder)
    clear_in_memory_caches()
    saved = {name: os.environ.get(name) for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def clear_in_memory_caches() -> None:
    """Forget compiled code held in memory, so the next compilation reads the disk cache."""
    from torch._inductor.utils import clear_caches

    clear_caches()


@dataclass
class CompiledCell:
    """The warm compiled callable, ready for timing, and what compiling it cost."""

    forward: Callable[[], Any]
    cold_calls_ms: list[float]
    warm_calls_ms: list[float] | None   # None: not compiled warm here
    cold_stats: dict[str, Any]          # graphs, breaks, reasons of the cold compilation
    warm_stats: dict[str, Any] | None   # the same for the warm one (its cache hits, mostly)
    after_warm: dict[str, Any] = field(default_factory=dict)
    cache_note: str | None = None       # how it was compiled, where neither cold-then-warm nor cold-only
    workers: dict[str, Any] | None = None      # the compile-worker pool before the cold compilation
    cuda_graphs: bool | str | None = None      # what the timed compilation did (None: as the options say)
    timed_again: dict[str, Any] | None = None  # a row's mode compiled once more to be timed: its calls and report
    cold_measured_in: str | None = None        # the cold figures are another process's (``kept_caches``): which

    def costs(self, eager_ms: float) -> dict[str, Any]:
        """Cold and warm compile cost, given one eager call's time (ms), and what compiling found:
        the worker pool, and whether CUDA graphs were used."""
        calls = len(self.cold_calls_ms)
        warm = self.warm_calls_ms
        used = {} if self.cuda_graphs is None else {"cuda_graphs": self.cuda_graphs}
        if self.cold_measured_in is not None:
            used["cold_measured_in"] = self.cold_measured_in
        return {**used, "compile_workers": self.workers, "cold_ms": sum(self.cold_calls_ms) - calls * eager_ms,
                "warm_ms": None if warm is None else sum(warm) - calls * eager_ms,
                "cold_calls_ms": list(self.cold_calls_ms),
                "warm_calls_ms": None if warm is None else list(warm), "compiling_calls": calls,
                "cache": self.cache_note or ("cold, then warm from the cold run's cache" if warm is not None else
                                             "cold (warm measured at another batch size of this model and mode)")}


def _compile_and_time(model: torch.nn.Module, mode: str, make_forward: Callable, device: torch.device,
                      options: dict[str, Any]) -> tuple[Callable[[], Any], list[float], dict[str, Any]]:
    modes.reset()
    return compile_again(model, mode, make_forward, device, **options)


def compile_cold_then_warm(model: torch.nn.Module, mode: str, make_forward: Callable,
                           device: torch.device, *, backend: str = "inductor", fullgraph: bool = False,
                           dynamic: bool | None = None, warm: bool = True) -> CompiledCell:
    """Compile ``model`` cold, then warm (``warm`` False: cold only); ``make_forward(compiled)`` gives the
    zero-argument call. Call it inside ``fresh_caches()``, kept open for the whole cell, so that a later
    compilation never falls back to the shared cache folder."""
    options = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    clear_in_memory_caches()
    workers = compile_workers.ready(backend)  # its start is no part of the cold compile (the warm one follows)
    cold_forward, cold_ms, cold_stats = _compile_and_time(model, mode, make_forward, device, options)
    if not warm:
        return CompiledCell(forward=cold_forward, cold_calls_ms=cold_ms, warm_calls_ms=None,
                            cold_stats=cold_stats, warm_stats=None, after_warm=modes.dynamo_snapshot(),
                            workers=workers, cuda_graphs=cuda_graph_checks.used(mode, device.type, cold_stats))
    del cold_forward  # its graphs (and CUDA-graph pool) go before the warm ones are made
    clear_in_memory_caches()
    compile_workers.ready(backend)  # a long cold compile may have let it quiesce
    forward, warm_ms, warm_stats = _compile_and_time(model, mode, make_forward, device, options)
    return CompiledCell(forward=forward, cold_calls_ms=cold_ms, warm_calls_ms=warm_ms,
                        cold_stats=cold_stats, warm_stats=warm_stats,
                        after_warm=modes.dynamo_snapshot(), workers=workers,
                        cuda_graphs=cuda_graph_checks.used(mode, device.type, warm_stats))


def compile_warm(model: torch.nn.Module, mode: str, make_forward: Callable, device: torch.device, kept: KeptCold, *,
                 backend: str = "inductor", fullgraph: bool = False, dynamic: bool | None = None) -> CompiledCell:
    """``model`` compiled warm, after a dynamo reset, from the caches a cold compilation in another process kept
    (``kept_caches``; call it with them in force, ``cache_folder``): the cell's one compilation, timed as a warm
    one is; its cold figures are ``kept``'s, named by the process that measured them."""
    clear_in_memory_caches()
    workers = compile_workers.ready(backend)
    forward, warm_ms, warm_stats = _compile_and_time(model, mode, make_forward, device,
                                                     {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic})
    graphs = cuda_graph_checks.used(mode, device.type, warm_stats)
    missed = ("no FX-graph cache hit" if backend == "inductor" and not warm_stats.get("fx_graph_cache_hits") else
              f"{warm_stats.get('graphs')} graph(s) where that compile made {kept.stats.get('graphs')}"
              if warm_stats.get("graphs") != kept.stats.get("graphs") else None)
    if missed:  # not the kept compilation: this compile is the cell's own, and its figures are the cold ones
        return CompiledCell(forward=forward, cold_calls_ms=warm_ms, warm_calls_ms=None, cold_stats=warm_stats,
                            warm_stats=None, after_warm=modes.dynamo_snapshot(), workers=workers, cuda_graphs=graphs,
                            cache_note=f"compiled anew: the caches {kept.measured_in}'s cold compile kept did not "
                            f"serve ({missed}); its figures are this compile's, as a cold one's (Triton's and the C++ "
                            "compiler's caches may have served it)")
    return CompiledCell(forward=forward, cold_calls_ms=list(kept.calls_ms), warm_calls_ms=warm_ms,
                        cold_stats=dict(kept.stats), warm_stats=warm_stats, after_warm=modes.dynamo_snapshot(),
                        cache_note=f"warm from the caches {kept.measured_in}'s cold compile kept (the cold figures "
                        "are that compile's)", workers=workers, cuda_graphs=graphs, cold_measured_in=kept.measured_in)


def compile_again(model: torch.nn.Module, mode: str, make_forward: Callable, device: torch.device, *,
                  backend: str = "inductor", fullgraph: bool = False,
                  dynamic: bool | None = None) -> tuple[Callable[[], Any], list[float], dict[str, Any]]:
    """``model`` compiled once more, with no dynamo reset (other modes' compilations stay callable), from the
    caches in force (``cache_folder``): the forward, its compiling calls' times and the compilation's report."""
    return _first_calls(lambda: make_forward(modes.compile_model(model, mode, backend=backend, fullgraph=fullgraph,
                                                                  dynamic=dynamic)), mode, device)


def _first_calls(make: Callable[[], Callable[[], Any]], mode: str,
                 device: torch.device) -> tuple[Callable[[], Any], list[float], dict[str, Any]]:
    """The forward ``make()`` gives, its compiling calls' times, and what dynamo and inductor did in them."""
    at_start = modes.dynamo_snapshot()
    forward = make()
    with cuda_graph_checks.watch() as graphs:
        times = [time_first_call(forward, device) for _ in range(compiling_calls(mode))]
    after = modes.dynamo_snapshot()
    return forward, times, {**modes.compile_report(at_start, after, after), **graphs.report()}


def reuse_compiled(compiled_model: Any, mode: str, make_forward: Callable, device: torch.device,
                   compiled_at: int, backend: str = "inductor") -> CompiledCell:
    """A model compiled earlier (one compilation for all batch sizes, at batch size ``compiled_at``)
    called at new inputs: its first calls are timed as a cold compilation's are, and
    ``cold_stats["graphs"]`` counts the graphs they compiled (0: the compilation served)."""
    workers = compile_workers.ready(backend)  # new shapes may compile new graphs
    forward, times, stats = _first_calls(lambda: make_forward(compiled_model), mode, device)
    return CompiledCell(forward=forward, cold_calls_ms=times, warm_calls_ms=None, cold_stats=stats, warm_stats=None,
                        after_warm=modes.dynamo_snapshot(), cache_note=f"compiled once at batch size {compiled_at} "
                        "with the batch dimension dynamic; first calls at this batch size", workers=workers,
                        cuda_graphs=cuda_graph_checks.used(mode, device.type, stats))


@contextmanager
def no_recompile() -> Iterator[None]:
    """Raise ``RecompiledDuringTiming`` if anything compiles again inside the block, and
    ``RerecordedDuringTiming`` if a CUDA graph is recorded or skipped there."""
    try:
        with torch.compiler.set_stance("fail_on_recompile"), cuda_graph_checks.watch() as graphs:
            yield
    except RuntimeError as exc:
        if RECOMPILE_MESSAGE in str(exc):
            raise RecompiledDuringTiming(
                "recompiled during the timed runs, so the latencies would include compilation: "
                "the cell is not valid (" + str(exc).splitlines()[0] + ")") from exc
        raise
    changed = cuda_graph_checks.changed_during(graphs)
    if changed:
        raise RerecordedDuringTiming(changed + ", so the latencies mix recordings or eager fallbacks with "
                                     "replays: the cell is not valid")
