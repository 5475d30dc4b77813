"""AOTInductor: a model exported once (``torch.export``), compiled ahead of time into a package and loaded by a
serving process: no compilation at start-up, only a load (docs/variants.md).

Its cost is split as a deployment pays it: export and compile once (``build``), load in every fresh process
(``startup_in_fresh_process``, in a new interpreter). A model export refuses is an ``ExportFailure`` carrying the
exporter's reason, not a crash. The package is fixed to the shapes it was exported with.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path
import time
from typing import Any, Callable

import torch

from ..measurement.timing import time_first_call
from . import modes
from .compile_cost import CompiledCell
from .fresh_process import run_script

# The interpreter a serving process would be: it loads the package and calls it once.
_STARTUP_SCRIPT = """
    package, inputs_path, device = sys.argv[1], sys.argv[2], sys.argv[3]
    model = torch._inductor.aoti_load_package(package)
    loaded = time.perf_counter()
    kwargs = torch.load(inputs_path, map_location=device)
    def synchronize():
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    synchronize()
    first = time.perf_counter()
    with torch.inference_mode():
        model(**kwargs)
    synchronize()
    done = time.perf_counter()
    print(json.dumps({"import_s": imported - started, "load_s": loaded - imported,
                      "first_call_s": done - first}))
"""


@dataclass(frozen=True)
class AotPackage:
    """A compiled package on disk and what building it cost."""

    path: Path
    export_s: float
    compile_s: float
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"export_s": round(self.export_s, 4), "compile_s": round(self.compile_s, 4),
                "package_bytes": self.size_bytes}


@dataclass(frozen=True)
class ExportFailure:
    """``torch.export`` (or the AOT compile) refused the model; ``stage`` says which."""

    stage: str      # "export" or "compile"
    reason: str     # the exception's type and first line

    def to_dict(self) -> dict[str, Any]:
        return {"failed_stage": self.stage, "reason": self.reason}


def _reason(exc: BaseException, limit: int = 400) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def build(model: torch.nn.Module, example_kwargs: dict[str, torch.Tensor], package_path: str | os.PathLike,
          *, inductor_configs: dict[str, Any] | None = None,
          clock: Callable[[], float] = time.perf_counter) -> AotPackage | ExportFailure:
    """Export ``model`` called as ``model(**example_kwargs)`` and compile it into ``package_path``
    (a ``.pt2`` file), timing each stage; a refusal is returned, not raised."""
    package_path = Path(package_path)
    package_path.parent.mkdir(parents=True, exist_ok=True)
    started = clock()
    try:
        with torch.no_grad():
            exported = torch.export.export(model, args=(), kwargs=example_kwargs)
    except Exception as exc:  # noqa: BLE001 - the exporter's refusal is a result
        return ExportFailure("export", _reason(exc))
    exported_at = clock()
    from torch._inductor import config as inductor_config

    # AOTInductor writes its package metadata into the process's inductor config and leaves it there:
    # every later compilation's cache key would differ from another process's (a portable cache misses)
    before = inductor_config.get_config_copy()
    try:
        written = torch._inductor.aoti_compile_and_package(
            exported, package_path=str(package_path), inductor_configs=inductor_configs or {})
    except Exception as exc:  # noqa: BLE001
        return ExportFailure("compile", _reason(exc))
    finally:
        inductor_config.load_config(before)
    done = clock()
    path = Path(written)
    return AotPackage(path=path, export_s=exported_at - started, compile_s=done - exported_at,
                      size_bytes=path.stat().st_size)


def load(package: AotPackage | str | os.PathLike) -> Callable[..., Any]:
    """The package as a callable taking the model's keyword inputs (in this process)."""
    path = package.path if isinstance(package, AotPackage) else Path(package)
    return torch._inductor.aoti_load_package(str(path))


def startup_in_fresh_process(package: AotPackage | str | os.PathLike, example_kwargs: dict[str, torch.Tensor],
                             device: str = "cpu", timeout_s: float = 600) -> dict[str, float]:
    """What a new serving process pays before its first answer (seconds), measured in a new interpreter: its
    imports (``fresh_process``), loading the package, and the first call."""
    path = package.path if isinstance(package, AotPackage) else Path(package)
    inputs_path = path.with_suffix(".inputs.pt")
    torch.save({name: tensor.detach().cpu() for name, tensor in example_kwargs.items()}, inputs_path)
    try:
        return run_script(_STARTUP_SCRIPT, [path, inputs_path, device], what=f"loading {path.name}",
                          timeout_s=timeout_s)
    finally:
        inputs_path.unlink(missing_ok=True)


class NotExportable(RuntimeError):
    """The model could not be exported or compiled ahead of time; the message says why."""


def compiled_cell(model: torch.nn.Module, inputs: dict[str, torch.Tensor], make_forward: Callable,
                  device: torch.device, folder: str | os.PathLike, *, warm: bool = True) -> CompiledCell:
    """The study's compiled cell for AOTInductor, priced as a deployment pays it: cold, export + compile + load +
    the first call; warm (the package already built), load + first call, here; a fresh interpreter's import, load
    and first call are in ``cold_stats["aot"]["fresh_process"]``."""
    package = build(model, inputs, Path(folder) / "model.pt2")
    if isinstance(package, ExportFailure):
        raise NotExportable(f"aot-inductor: {package.stage} failed: {package.reason}")
    at_start = modes.dynamo_snapshot()

    def loaded_and_first_call() -> tuple[Callable[[], Any], float, float]:
        started = time.perf_counter()
        runner = load(package)
        load_ms = (time.perf_counter() - started) * 1e3
        forward = make_forward(runner)
        return forward, load_ms, time_first_call(forward, device)

    forward, load_ms, first_ms = loaded_and_first_call()
    build_ms = (package.export_s + package.compile_s) * 1e3
    aot = {**package.to_dict(), "load_s": round(load_ms / 1e3, 4),
           "fresh_process": startup_in_fresh_process(package, inputs, device.type) if warm else None}
    stats = {"graphs": 1, "graph_breaks": 0, "break_reasons": {}, "frames": 0, "fx_graph_cache_hits": 0,
             "aot": aot}
    warm_calls = None
    if warm:
        del forward
        forward, warm_load_ms, warm_first_ms = loaded_and_first_call()
        warm_calls = [warm_load_ms + warm_first_ms]
    return CompiledCell(forward=forward, cold_calls_ms=[build_ms + load_ms + first_ms], warm_calls_ms=warm_calls,
                        cold_stats=stats, warm_stats=None, after_warm=at_start)
