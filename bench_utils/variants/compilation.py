"""How a compiled cell gets its compiled forward pass: one interface, three ways, chosen once per cell.

``compilation_for`` picks the way the cell's plan names (``cell_plan``): ``ColdThenWarm`` (``torch.compile``, cold
then warm, or warm only from kept caches), ``SharedDynamic`` (a dynamic batch's compilation made at an earlier batch
size) or ``AotPackage`` (an AOTInductor package). Each says what the whole cell runs inside and compiles; the
record's graph figures are the compilation's, or a dynamic batch's shared one's (``shared``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import ExitStack, contextmanager
import tempfile
from typing import Any, Callable, Iterator

import torch

from ..settings import Settings
from . import aot_inductor, modes, portable_cache as portable
from .batch_shapes import DYNAMIC, SharedCompilation, mark_batch_dynamic, one_graph_for_all_batch_sizes
from .cell_plan import AOT_PACKAGE, FRESH_PROCESS, SHARED, CellPlan
from .compile_cost import (CompiledCell, cache_folder, compile_cold_then_warm, compile_warm, fresh_caches,
                           reuse_compiled)
from .kept_caches import KeptCell

Inputs = dict[str, torch.Tensor]


def forward_call(model: Callable, inputs: Inputs, mode: str) -> Callable[[], Any]:
    """One forward pass; decided here, so the timed loop holds nothing but the call."""
    if mode in modes.CUDA_GRAPH_MODES:
        def call_step() -> Any:
            torch.compiler.cudagraph_mark_step_begin()  # a new inference: buffers may be reused
            return model(**inputs)
        return call_step
    return lambda: model(**inputs)


class Compilation(ABC):
    """One way a compiled cell gets its compiled forward pass, for one cell (``mode`` at ``batch_size``)."""

    shared: SharedCompilation | None = None  # a dynamic batch's one compilation, where this cell made or called it

    def __init__(self, mode: str, batch_size: int, settings: Settings, device: torch.device) -> None:
        self.mode, self.batch_size, self.settings, self.device = mode, batch_size, settings, device

    @property
    def dynamic_batch(self) -> bool:
        return self.settings.shapes == DYNAMIC

    @contextmanager
    def around_cell(self, inputs: Inputs) -> Iterator[None]:
        """What the compiled cell runs inside, from its references to its last figure: no graph of an earlier
        model or cell (a dynamo reset), compile caches of its own (open for the whole cell: nothing falls back
        to the shared cache folder); its graphs and CUDA-graph pools go with it."""
        modes.reset()
        try:
            with fresh_caches():
                yield
        finally:
            modes.reset()

    @abstractmethod
    def compile(self, model: torch.nn.Module, inputs: Inputs, *, warm: bool) -> CompiledCell:
        """The compiled forward and what compiling cost (``warm``: the warm cost measured here too)."""

    def graph_stats(self, compiled: CompiledCell) -> dict[str, Any]:
        """The record's graph figures: graphs, breaks and their reasons, as the compilation made them."""
        if self.shared is None:
            return dict(compiled.cold_stats)
        return self.shared.compile_stats(self.batch_size, compiled.cold_stats)

    def shared_on(self) -> SharedCompilation | None:
        """The compilation the mode's next batch sizes call (a dynamic batch's); None: each compiles its own."""
        return self.shared

    def fresh_process(self, model: torch.nn.Module, inputs: Inputs) -> dict[str, Any]:
        """A fresh process started from this compilation's saved cache (``portable_cache``)."""
        raise ValueError(f"a {self.mode} compilation of this kind leaves no cache to start a process from")


class ColdThenWarm(Compilation):
    """``torch.compile``, cold then warm (cold only where ``warm`` is False); with a dynamic batch, the one
    compilation the mode's larger batch sizes call (``shared_on``). With ``kept`` caches: warm only, from an
    earlier process's cold compile kept there, or else cold there, kept for the next."""

    def __init__(self, mode: str, batch_size: int, settings: Settings, device: torch.device, *,
                 keep_cache: bool = False, kept: KeptCell | None = None) -> None:
        super().__init__(mode, batch_size, settings, device)
        self.keep_cache = keep_cache             # save the compile cache's artifacts for a fresh process
        self.kept = kept                         # caches kept between processes (``kept_caches``); None: none
        self.artifacts: bytes | None = None

    @contextmanager
    def around_cell(self, inputs: Inputs) -> Iterator[None]:
        if not self.dynamic_batch:
            with super().around_cell(inputs):
                yield
            return
        modes.reset()  # its graphs outlive the cell: the next batch sizes call them
        with one_graph_for_all_batch_sizes(), fresh_caches():  # a batch of 1 not specialized
            mark_batch_dynamic(inputs)
            yield

    def compile(self, model: torch.nn.Module, inputs: Inputs, *, warm: bool) -> CompiledCell:
        made: list[Any] = []  # the compiled model the last forward calls

        def make_forward(compiled_model: Callable) -> Callable[[], Any]:
            made[:] = [compiled_model]
            return forward_call(compiled_model, inputs, self.mode)

        settings = self.settings
        options: dict[str, Any] = {"backend": settings.backend, "fullgraph": settings.fullgraph,
                                   "dynamic": settings.dynamic}
        with portable.recording():  # this compilation's cache artifacts, none older
            if self.kept is None:
                compiled = compile_cold_then_warm(model, self.mode, make_forward, self.device, warm=warm, **options)
            else:
                compiled = self._from_kept(model, make_forward, warm, options)
        if self.keep_cache:
            self.artifacts = portable.saved_artifacts()
        if self.dynamic_batch:
            self.shared = SharedCompilation(self.mode, made[0], self.batch_size, {
                key: compiled.cold_stats[key] for key in ("graphs", "graph_breaks", "break_reasons")})
        return compiled

    def _from_kept(self, model: torch.nn.Module, make_forward: Callable, warm: bool,
                   options: dict[str, Any]) -> CompiledCell:
        """Warm from the cold compilation another process kept, where one was; else cold in the kept folder (then
        warm, where ``warm``), kept for the next processes."""
        assert self.kept is not None
        cold = self.kept.cold()
        if cold is not None:
            with cache_folder(self.kept.folder):
                portable.loaded(self.kept.artifacts())  # a folder carried from another host holds no more
                return compile_warm(model, self.mode, make_forward, self.device, cold, **options)
        with self.kept.emptied() as folder, cache_folder(folder):
            compiled = compile_cold_then_warm(model, self.mode, make_forward, self.device, warm=warm, **options)
        self.kept.keep(compiled.cold_calls_ms, compiled.cold_stats, f"replicate {self.settings.replicate}",
                       portable.saved_artifacts())
        return compiled

    def fresh_process(self, model: torch.nn.Module, inputs: Inputs) -> dict[str, Any]:
        settings = self.settings
        if self.artifacts is None:
            raise ValueError(f"the {settings.backend} compilation left no cache artifacts to carry")
        return portable.startup_from_artifacts(model, inputs, self.artifacts, mode=self.mode,
                                               backend=settings.backend, fullgraph=settings.fullgraph,
                                               dynamic=settings.dynamic, device=self.device.type)


class SharedDynamic(Compilation):
    """A dynamic batch's compilation, made at an earlier batch size of the mode, called at this one: its first
    calls are timed as a cold compilation's are, and count the graphs they still compiled."""

    def __init__(self, mode: str, batch_size: int, settings: Settings, device: torch.device,
                 shared: SharedCompilation) -> None:
        super().__init__(mode, batch_size, settings, device)
        self.shared: SharedCompilation = shared

    @contextmanager
    def around_cell(self, inputs: Inputs) -> Iterator[None]:
        # no reset, before or after: the compilation's graphs serve this batch size, then the next
        with one_graph_for_all_batch_sizes(), fresh_caches():
            mark_batch_dynamic(inputs)
            yield

    def compile(self, model: torch.nn.Module, inputs: Inputs, *, warm: bool) -> CompiledCell:
        shared = self.shared
        return reuse_compiled(shared.model, self.mode, lambda compiled: forward_call(compiled, inputs, self.mode),
                              self.device, shared.compiled_at_batch_size, backend=self.settings.backend)


class AotPackage(Compilation):
    """An AOTInductor package, built in a folder of the cell's own and loaded (``aot_inductor.compiled_cell``)."""

    folder: str | None = None

    @contextmanager
    def around_cell(self, inputs: Inputs) -> Iterator[None]:
        with ExitStack() as stack:
            stack.enter_context(super().around_cell(inputs))
            self.folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="aoti-"))
            yield

    def compile(self, model: torch.nn.Module, inputs: Inputs, *, warm: bool) -> CompiledCell:
        if self.folder is None:
            raise RuntimeError("an AOTInductor package is built inside around_cell, in its folder")
        return aot_inductor.compiled_cell(model, inputs, lambda runner: forward_call(runner, inputs, self.mode),
                                          self.device, self.folder, warm=warm)


def compilation_for(plan: CellPlan, batch_size: int, settings: Settings, device: torch.device,
                    shared: SharedCompilation | None = None, kept: KeptCell | None = None) -> Compilation:
    """The way ``plan`` compiles (``plan.compilation``); ``shared``: a dynamic batch's compilation so far;
    ``kept``: the cell's caches kept between processes (a static torch.compile cell's)."""
    if plan.compilation == AOT_PACKAGE:
        return AotPackage(plan.mode, batch_size, settings, device)
    if plan.compilation == SHARED:
        if shared is None:
            raise ValueError("a plan that reuses a compilation needs the shared compilation")
        return SharedDynamic(plan.mode, batch_size, settings, device, shared)
    return ColdThenWarm(plan.mode, batch_size, settings, device, keep_cache=plan.has(FRESH_PROCESS), kept=kept)
