"""Several torch.compile modes of one model at one batch size, callable at once: a row timed in one span.

Each mode compiles as a cell of its own does (``compilation.ColdThenWarm``), in a cache folder of its own. A reset
drops the modes compiled before it, so once every mode has compiled, each but the one still callable compiles once
more from its own folder with no reset (``compile_cost.compile_again``): that compilation is the one timed, its calls
and CUDA-graph report the cell's ``timed_again`` (docs/measurement.md, "One eager series per row").
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path
import tempfile
from typing import Callable, ContextManager, Iterator, Mapping, Sequence

import torch

from ..settings import Settings
from . import cuda_graph_checks, modes
from .compilation import ColdThenWarm, Inputs, forward_call
from .compile_cost import CompiledCell, cache_folder, compile_again, fresh_caches
from .kept_caches import KeptCell


class RowCompilation:
    """The compilations of a row's modes (``modes``, in order), their cache folders, and which mode is callable."""

    def __init__(self, row_modes: Sequence[str], batch_size: int, settings: Settings, device: torch.device, *,
                 keep_cache: Mapping[str, bool] | None = None, kept: Mapping[str, KeptCell] | None = None) -> None:
        self.settings, self.device = settings, device
        self.compilations = {mode: ColdThenWarm(mode, batch_size, settings, device,
                                                keep_cache=bool((keep_cache or {}).get(mode)),
                                                kept=(kept or {}).get(mode))
                             for mode in row_modes}
        self.callable_mode: str | None = None   # the one mode whose compilation no reset has dropped since
        self._root: Path | None = None

    @contextmanager
    def around_row(self) -> Iterator[None]:
        """What the row runs inside, from its references to its last figure: no graph of an earlier model or cell,
        the modes' cache folders (deleted after it), and a fresh cache for anything compiled outside them."""
        modes.reset()
        try:
            with tempfile.TemporaryDirectory(prefix="row-") as root, fresh_caches():
                self._root = Path(root)
                yield
        finally:
            self._root = None
            self.callable_mode = None
            modes.reset()

    def _folder(self, mode: str) -> Path:
        kept = self.compilations[mode].kept
        if kept is not None:  # kept between processes: it compiles there (``ColdThenWarm``), and again from there
            return kept.folder
        if self._root is None:
            raise RuntimeError("a row's modes compile inside around_row, in its folders")
        return self._root / mode

    def compile(self, mode: str, model: torch.nn.Module, inputs: Inputs, *, warm: bool) -> CompiledCell:
        """``mode`` compiled cold (then warm) in its folder: every other mode's compilation is dropped."""
        self.callable_mode = None  # its first step is a dynamo reset
        try:
            with cache_folder(self._folder(mode)):
                compiled = self.compilations[mode].compile(model, inputs, warm=warm)
        except BaseException:
            modes.reset()  # nothing half made (a graph half recorded, say) for the next mode to inherit
            raise
        self.callable_mode = mode
        return compiled

    def compile_again(self, mode: str, model: torch.nn.Module, inputs: Inputs, compiled: CompiledCell) -> None:
        """``mode`` compiled once more from its folder, no reset (a mode compiled since dropped it): ``compiled``'s
        forward becomes that compilation, its calls and report ``timed_again``, CUDA graphs as it did them."""
        settings = self.settings
        with cache_folder(self._folder(mode)):
            forward, calls_ms, report = compile_again(
                model, mode, lambda compiled_model: forward_call(compiled_model, inputs, mode), self.device,
                backend=settings.backend, fullgraph=settings.fullgraph, dynamic=settings.dynamic)
        compiled.forward = forward
        compiled.timed_again = {"calls_ms": calls_ms, **report}
        compiled.cuda_graphs = cuda_graph_checks.used(mode, self.device.type, report)

    def make_callable(self, model: torch.nn.Module, inputs: Inputs, compiled: Mapping[str, CompiledCell],
                      again: Callable[[str], ContextManager[object]] | None = None) -> None:
        """Every mode in ``compiled`` callable at once: each but ``callable_mode`` compiled again (``again(mode)``,
        if given, is the context each of those compilations runs in: its time's phase). Then the dynamo counters
        every mode's recompiles are counted from."""
        for mode, cell in compiled.items():
            if mode != self.callable_mode:
                with again(mode) if again is not None else nullcontext():
                    self.compile_again(mode, model, inputs, cell)
        snapshot = modes.dynamo_snapshot()
        for cell in compiled.values():
            cell.after_warm = snapshot
