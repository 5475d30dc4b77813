"""What a task notebook does: measure its cells and write their records (docs/study.md, *The task notebooks*).

Every cell gets exactly one record, appended as soon as it is measured: ``ok``, ``oom`` or ``error``. Under the grid
runner, records are written only while its lease is this run's.

Tests reach the failure paths through ``BENCH_UTILS_INJECT_FAULT``, ``kind:model:batch_size`` entries separated by
``;`` (kind: ``oom``, ``error``, ``crash``: the kernel aborts as on a segfault, ``hang``: blocks for ever after
touching the file named by ``BENCH_UTILS_HANG_MARKER``, ``hang-once``: only while that file does not exist yet).
"""

from __future__ import annotations

from contextlib import ExitStack, nullcontext
from dataclasses import replace
import logging
import os
import threading
import time
from pathlib import Path
import traceback
from typing import Any, Iterable, Mapping, Sequence

import torch

from ...errors import UserError
from ...measurement.memory_cap import gpu_memory_cap
from ...environment.capture import capture_environment
from ...paths import PROJECT_ROOT
from ...records.key import cell_file_name
from ...records.build import JsonBlock, failure_record, measurement_settings, skipped_after_oom, with_phases
from ...records.results_file import append_record
from ...variants import compile_workers, modes as compile_module
from ...variants.precision import configure_fp32_math, parse_dtype
from ...variants.batch_shapes import SharedCompilation
from ...variants.cell_plan import timed_in_rows
from ...variants.kept_caches import KeptCaches, KeptCell, all_claimed, default_root, kept_cell
from ...zoo.loading import LoadedModel, load
from .after_timing import release
from .measured_cell import CellResult, run_cell
from .measured_row import run_row
from .cell_record import cell_record
from .kernel_start import Kernel, long_lived_frozen, process_age_s, ready_the_compiler
from ..grid.kernel_groups import execution_order
from ...parameters import positive_int_list, text_list
from .progress_bar import CellsBar
from .time_by_phase import Phases, now_doing, told_to
from ..progress_file import write_progress
from ..lease import lease_is_current, start_watchdog
from ...settings import Settings
from ...vocabulary import CompileMode, InductorConfig, Shapes, Status

TRACES = "traces"  # keep_traces: a study folder's profiled calls, one trace per side of a compiled cell

FAULT_ENV = "BENCH_UTILS_INJECT_FAULT"
HANG_MARKER_ENV = "BENCH_UTILS_HANG_MARKER"
TRACEBACK_LINES = 30


def no_cuda_runtime_note(record: logging.LogRecord) -> bool:
    """A logging filter: torch's record that it found no CUDA runtime is dropped."""
    return "No CUDA runtime is found" not in record.getMessage()


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, or an allocator's or CUDA library's allocation failure in any other error."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc).lower()
    # cuBLAS and cuDNN report a failed workspace allocation in their own words
    return any(sign in text for sign in ("out of memory", "can't allocate memory",
                                         "cublas_status_alloc_failed", "cudnn_status_alloc_failed"))


def _inject_fault(model: str, batch_size: int) -> None:
    for entry in filter(None, os.environ.get(FAULT_ENV, "").split(";")):
        kind, _, rest = entry.partition(":")
        fault_model, _, fault_batch = rest.rpartition(":")
        if fault_model != model or fault_batch != str(batch_size):
            continue
        if kind == "oom":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB "
                                              "(injected fault)")
        if kind == "error":
            raise RuntimeError("injected fault")
        if kind == "crash":
            os.abort()
        if kind in ("hang", "hang-once"):  # a stuck cell; the marker file tells a test it is stuck now
            marker = os.environ.get(HANG_MARKER_ENV)
            if kind == "hang-once" and (not marker or Path(marker).exists()):
                continue
            if marker:
                Path(marker).touch()
            threading.Event().wait()


def _error_text(exc: BaseException) -> str:
    lines = traceback.format_exception(exc)
    return "".join(lines[-TRACEBACK_LINES:]).strip()


def run(*, study: str, task: str, models: Iterable[str], batch_sizes: Iterable[int],
        compile_modes: Iterable[str], dtypes: Iterable[str] = ("float32",), device: str = "cpu",
        results_path: str | os.PathLike, settings: Settings | Mapping[str, Any] | None = None,
        only_cells: Iterable[Sequence] | None = None, progress_file: str | os.PathLike | None = None,
        runner_pid: int | None = None, run_id: str | None = None, keep_compiles: bool = False,
        compile_caches: str | os.PathLike | None = None, **setting_values: Any) -> list[dict[str, Any]]:
    """Measure every cell of models x dtypes x modes x batch sizes; return their records.

    ``settings``: a ``Settings`` or a mapping of its fields; a setting given by name (``runs=20``) wins.
    ``only_cells``: the ``(compile_mode, batch_size)`` pairs to measure instead of every mode x batch size, either
    way in ``kernel_groups.execution_order``. ``progress_file`` names the cell being begun (the runner reads it).
    ``keep_compiles``: cold compiles kept for the next replicates (``variants.kept_caches``), under
    ``compile_caches`` where given.
    """
    started = time.perf_counter()
    # torch's note, as Inductor first builds C++ on a host without a CUDA runtime, that it found none: no one's to act
    # on (the record says the device), yet a red box in a notebook; that note only, its other warnings kept
    logging.getLogger("torch.utils.cpp_extension").addFilter(no_cuda_runtime_note)  # once: logging keeps no copies
    base = settings.to_parameters() if isinstance(settings, Settings) else dict(settings or {})
    settings = Settings.from_parameters({**base, **setting_values})
    models, compile_modes, dtypes = (text_list(name, value) for name, value in (
        ("models", models), ("compile_modes", compile_modes), ("dtypes", dtypes)))
    batch_sizes = positive_int_list("batch_sizes", batch_sizes)
    results_path = _absolute(results_path)  # the same default from JupyterLab and the runner
    if progress_file:
        progress_file = _absolute(progress_file)
    guard = None
    if runner_pid:  # under the grid runner: never outlive it, never write for a stale run
        start_watchdog(int(runner_pid), results_path.parent, str(run_id))
        guard = lambda: lease_is_current(results_path.parent, str(run_id))  # noqa: E731
    pairs = execution_order(_cell_pairs(only_cells) if only_cells else
                            [(mode, batch) for mode in compile_modes for batch in batch_sizes],
                            by_batch=settings.shapes == Shapes.STATIC.value)
    # Set once for the whole run (global torch state); every record carries the settings.
    startup_s = process_age_s() - (time.perf_counter() - started)  # at the task's start: boot and imports
    config = {**measurement_settings(settings), "heap_frozen": True,  # every cell's here (``long_lived_frozen``)
              **configure_fp32_math(settings.tf32)}  # the policy's name, and what it set
    compiles = any(mode != CompileMode.EAGER for mode, _ in pairs)
    caches = _absolute(compile_caches) if compile_caches else default_root(results_path.parent)
    kept_caches = KeptCaches(caches) if keep_compiles else None
    warm_only = compiles and _compiles_warm_only(kept_caches, task, models, dtypes, pairs, settings, device)
    if warm_only:  # torch's own switch, read as Inductor is imported: a kernel that compiles nothing cold starts no pool
        os.environ.setdefault(compile_workers.THREADS_ENV, "1")
    if compiles:  # launched first: its sidecar boots while the first model is built (``kernel_start``)
        compile_workers.start(settings.backend)
    config.update(gpu_memory_cap(settings.gpu_memory_gib, device))  # before anything is on the GPU
    kernel = Kernel(environment=capture_environment(), kept_caches=kept_caches)

    def model_cells(model_key: str, dtype: str) -> _ModelCells:
        return _ModelCells(study=study, task=task, model=model_key, dtype=parse_dtype(dtype)[0], device=device,
                           settings=settings, config=config, kernel=kernel, pairs=pairs,
                           trace_dir=results_path.parent / TRACES)

    order = [(model_key, dtype) for model_key in models for dtype in dtypes]
    # a bar over the cells for a person (tqdm's widget in JupyterLab); none under the grid runner, which has its own
    bar = CellsBar(len(order) * len(pairs), disable=bool(runner_pid))
    with ExitStack() as stack:
        stack.callback(bar.bar.close)
        stack.enter_context(told_to(bar.doing) if not runner_pid else nullcontext())
        first = model_cells(*order[0]) if order else None
        built_s = first.build() if first is not None else 0.0
        if compiles:  # no compile pays the pool's start or the process's first compile
            now_doing("ready")
            ready_the_compiler(settings.backend, device, warm_only)
        ready_s = time.perf_counter() - started - built_s
        written = []
        for index, (model_key, dtype) in enumerate(order):
            cells = first if index == 0 and first is not None else model_cells(model_key, dtype)
            first = None  # each model freed once its cells are measured
            if index:  # built before the freeze, which takes it in (the first was, before the compiler's readying)
                cells.build()
            with long_lived_frozen() as freeze_s:  # thawed after each model: what it leaves can go
                if runner_pid and index == 0:
                    kernel.start_phases = {"startup_s": max(0.0, startup_s), "ready_s": ready_s, "freeze_s": freeze_s}
                for mode, batch_size in pairs:
                    if progress_file:  # the runner learns which cell a dying kernel was on
                        write_progress(Path(progress_file), mode, batch_size)
                    bar.cell(f"{model_key} {cells.dtype} {mode} batch {batch_size}")
                    record = cells.record(mode, batch_size)
                    append_record(results_path, record, guard=guard)
                    written.append(record)
                    bar.done()
    return written


def _compiles_warm_only(caches: KeptCaches | None, task: str, models: list[str], dtypes: list[str],
                       pairs: list[tuple[str, int]], settings: Settings, device: str) -> bool:
    """Every compiled cell of the kernel compiles warm from an earlier replicate's kept cold compilation: no
    compile-worker pool is needed (its start: 7-9 s a kernel on the H200)."""
    kept = [kept_for(caches, task, model, parse_dtype(dtype)[0], device, mode, batch, settings)
            for model in models for dtype in dtypes for mode, batch in pairs if mode != CompileMode.EAGER]
    return all(cell is not None and cell.cold() is not None for cell in kept)


def kept_for(caches: KeptCaches | None, task: str, model: str, dtype: str, device: str, mode: str, batch_size: int,
             settings: Settings) -> KeptCell | None:
    """A static torch.compile cell's caches kept between processes, where the kernel keeps them; else None."""
    if caches is None or not timed_in_rows(mode, settings.shapes):
        return None
    return kept_cell(caches, task, model, batch_size, mode, settings, dtype, device)


def _cell_pairs(only_cells: Iterable[Sequence]) -> list[tuple[str, int]]:
    pairs = []
    for item in only_cells:
        if isinstance(item, str) or len(item) != 2:
            raise UserError(f"only_cells: each item is [compile_mode, batch_size], got {item!r}")
        pairs.append((str(item[0]), int(item[1])))
    return pairs


def _absolute(path: str | os.PathLike) -> Path:
    """``path``, relative to the project root where it is relative (the kernel's working folder)."""
    return Path(path) if Path(path).is_absolute() else PROJECT_ROOT / path


class _ModelCells:
    """One model's cells in one kernel: the model built once, and what its cells share (an OOM's
    batch size per mode, the warm compiles measured, eager sides to reuse, a dynamic compilation)."""

    def __init__(self, *, study: str, task: str, model: str, dtype: str, device: str, settings: Settings,
                 config: dict[str, Any], kernel: Kernel, pairs: Sequence[tuple[str, int]] = (),
                 trace_dir: Path | None = None):
        self.study, self.task, self.model, self.dtype, self.device = study, task, model, dtype, device
        self.settings, self.config, self.kernel, self.trace_dir = settings, config, kernel, trace_dir
        self.pairs = list(pairs)                     # the kernel's cells, in order: a batch size's row is among them
        self.row_results: dict[tuple[str, int], CellResult | Exception | None] = {}  # None: time it on its own
        self.row_failed: dict[int, str] = {}         # per batch size: why its row's joint timing failed
        self.loaded: LoadedModel | None = None
        self.load_error: Exception | None = None
        self.oom_at: dict[str, int] = {}             # per mode: the batch size that ran out of memory
        self.warm_measured: set[str] = set()         # modes whose warm compile this kernel has measured
        self.shared_eager: dict[int, CellResult] = {}
        self.compilation: SharedCompilation | None = None   # shapes "dynamic": the mode's one compilation so far
        self.built_s: float | None = None            # ``build``'s seconds, until its first record reports them

    def build(self) -> float:
        """Build the model now, ahead of its first cell and its freeze (``kernel_start``); its seconds.
        A failure is left to each cell to record."""
        started = time.perf_counter()
        try:
            self._load()
        except Exception:
            pass  # ``load_error`` holds it
        self.built_s = time.perf_counter() - started
        return self.built_s

    def record(self, mode: str, batch_size: int) -> dict[str, Any]:
        """The cell's record: measured, shared from a compiled cell's eager side, skipped, or failed."""
        if self.compilation is not None and self.compilation.mode != mode:  # that mode is done
            self.compilation = None
            compile_module.reset()
        # eager compiles nothing
        settings = (replace(self.settings, shapes=Shapes.STATIC.value, inductor=InductorConfig.DEFAULT.value)
                    if mode == CompileMode.EAGER else self.settings)
        cell: JsonBlock = {"study": self.study, "task": self.task, "model": self.model, "batch_size": batch_size,
                           "compile_mode": mode, "dtype": self.dtype, "device": self.device,
                           **settings.variant_fields()}
        phases, load_s = Phases(), self.built_s or 0.0
        self.built_s = None
        shared = self.shared_eager.pop(batch_size, None) if mode == CompileMode.EAGER else None
        if mode in self.oom_at and shared is None:
            record = skipped_after_oom(cell, self.oom_at[mode], self._failure_config(),
                                       environment=self.kernel.environment)
        else:
            try:
                _inject_fault(self.model, batch_size)
                loaded = self.loaded
                if loaded is None:
                    try:
                        loaded = self._load()
                    finally:  # the load's seconds (a failed early build's too) apart from the cell's phases
                        load_s, phases = load_s + time.perf_counter() - phases.started, Phases()
                result = (replace(shared, phases=phases) if shared is not None
                          else self._measure(loaded, mode, batch_size, settings, phases))
                phases = result.phases  # a row's mode: its own share of the row's time
                record = cell_record(result, loaded, study=self.study, config=self.config,
                                     compile_options=compile_module.options(mode, settings.backend, settings.fullgraph,
                                                                            settings.dynamic),
                                     environment=self.kernel.environment, variant=settings.variant_fields())
            except Exception as exc:
                status = Status.OOM if is_out_of_memory(exc) else Status.ERROR
                if status == Status.OOM:  # batches ascend within a mode: the rest of it is larger
                    self.oom_at[mode] = batch_size
                record = failure_record(cell, status=status, config=self._failure_config(),
                                        error=_error_text(exc), environment=self.kernel.environment)
                release(torch.device(self.device))
        return with_phases(record, self.kernel.phases(phases.to_dict(), load_s))

    def _load(self) -> LoadedModel:
        """Build the model, once: a failure fails every cell of it."""
        if self.load_error is not None:
            raise self.load_error
        now_doing("load")
        try:
            settings = self.settings
            self.loaded = load(self.model, weights=settings.weights, dtype=self.dtype, device=self.device,
                               task=self.task, seed=settings.seed, memory_format=settings.memory_format)
        except Exception as exc:
            self.load_error = exc
            raise
        return self.loaded

    def _measure(self, loaded: LoadedModel, mode: str, batch_size: int, settings: Settings,
                 phases: Phases) -> CellResult:
        row = self._row_modes(mode, batch_size, settings)
        if row:
            return self._from_row(loaded, row, mode, batch_size, settings, phases)
        return self._measure_alone(loaded, mode, batch_size, settings, phases)

    def _row_modes(self, mode: str, batch_size: int, settings: Settings) -> list[str]:
        """The compile modes timed in one row with ``mode`` at ``batch_size`` (``measured_row``): two or more, or
        none (a mode alone times its own pairs, the same design)."""
        if not timed_in_rows(mode, settings.shapes):
            return []
        row = [other for other, batch in self.pairs if batch == batch_size and other not in self.oom_at
               and timed_in_rows(other, settings.shapes)]
        return row if len(row) > 1 and mode in row else []

    def _from_row(self, loaded: LoadedModel, row: list[str], mode: str, batch_size: int, settings: Settings,
                  phases: Phases) -> CellResult:
        """``mode``'s result from its batch size's row, measured at the row's first cell; where the row's joint
        timing failed, ``mode`` timed on its own, with a note saying why."""
        if (mode, batch_size) not in self.row_results:
            pending = [other for other in row if (other, batch_size) not in self.row_results]
            try:
                kept = {other: cell for other in pending if (cell := self._kept(other, batch_size, settings))}
                with all_claimed(kept.values()) as claimed:  # one another kernel holds: compiled here, not kept
                    kept = {other: cell for other, cell in kept.items() if cell in claimed}
                    results: dict[str, CellResult | Exception] = run_row(
                        loaded, batch_size, pending, settings, math_settings=self.config,
                        warm_modes=[other for other in pending if other not in self.warm_measured],
                        trace_prefixes={other: self._trace_prefix(other, batch_size, settings) for other in pending},
                        kept=kept)
            except Exception as exc:
                if not _device_usable(self.device):
                    raise  # a lasting device error (an illegal address, say): each mode alone would fail on it
                self.row_failed[batch_size] = ("timed on its own, beside an eager series of its own: the row's "
                                               f"joint timing failed ({_error_text(exc).splitlines()[-1]})")
                release(torch.device(self.device))
                results = {}
            self.row_results.update({(other, batch_size): results.get(other) for other in pending})
        result = self.row_results.pop((mode, batch_size))
        if result is None:
            alone = self._measure_alone(loaded, mode, batch_size, settings, phases)
            alone.notes.append(self.row_failed[batch_size])
            return alone
        if isinstance(result, Exception):
            raise result
        self.warm_measured.add(mode)
        if result.shared_eager is not None:
            self.shared_eager.setdefault(batch_size, result.shared_eager)
        return result

    def _measure_alone(self, loaded: LoadedModel, mode: str, batch_size: int, settings: Settings,
                       phases: Phases) -> CellResult:
        # the first batch size of a mode also compiles warm, and times a portable cache (the cell's plan)
        kept = self._kept(mode, batch_size, settings)
        with ExitStack() as claims:  # one another kernel holds: compiled here, not kept
            kept = next(iter(claims.enter_context(all_claimed([kept] if kept else []))), None)
            result = run_cell(loaded, batch_size=batch_size, mode=mode, settings=settings, math_settings=self.config,
                              warm_compile=mode not in self.warm_measured, phases=phases,
                              compilation=self.compilation, trace_prefix=self._trace_prefix(mode, batch_size, settings),
                              kept=kept)
        self.compilation = result.compilation
        if mode != CompileMode.EAGER:  # only a measured cell's compile and pairs count
            self.warm_measured.add(mode)
            if result.shared_eager is not None:
                self.shared_eager.setdefault(batch_size, result.shared_eager)
        return result

    def _kept(self, mode: str, batch_size: int, settings: Settings) -> KeptCell | None:
        return kept_for(self.kernel.kept_caches, self.task, self.model, self.dtype, self.device, mode, batch_size,
                        settings)

    def _trace_prefix(self, mode: str, batch_size: int, settings: Settings) -> str | None:
        """``keep_traces``: the study folder's ``traces/<cell>``, named as the cell's notebook and log are."""
        if not settings.keep_traces or self.trace_dir is None or mode == CompileMode.EAGER:
            return None
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        return str(self.trace_dir / cell_file_name(self.task, self.model, batch_size, mode, settings.variant(),
                                                   self.dtype, self.device.split(":")[0]))

    def _failure_config(self) -> dict[str, Any]:
        """A failed cell's settings: the weights of the model if it was built, else none measured."""
        return {**self.config, "weights": self.loaded.weights if self.loaded is not None else None}


def _device_usable(device: str) -> bool:
    """Whether ``device`` still works after an error: a CUDA error that sticks fails the next synchronize."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return True
    try:
        torch.cuda.synchronize()
    except Exception:
        return False
    return True
