"""PyTorch's portable compile cache ("mega-cache"): what it saves a fresh process (docs/variants.md).

``torch.compiler.save_cache_artifacts()`` serializes every cache entry ``torch.compile`` wrote or read, and
``load_cache_artifacts(bytes)`` hot-loads them into another process's empty cache folders. ``startup_from_artifacts``
prices that start in a new interpreter: loading the artifacts, the compiling first call(s), and the FX-graph cache
hits and misses that say whether the artifacts were used.

What torch 2.14 does (``torch/compiler/_cache.py``, ``CacheArtifactManager``):

* the record is process-global and is never cleared by ``torch._dynamo.reset()`` (nor by
  ``torch.compiler.reset()``); ``CacheArtifactManager.clear()`` empties it, which ``recording()``
  calls at entry;
* saves are cumulative: each ``save_cache_artifacts()`` returns every artifact recorded since the
  last clear, not only those since the previous save, and artifacts already recorded are
  de-duplicated (so a cold compile then a warm one save the same artifacts once);
* a compile that HITS the local on-disk cache records the entries it read too (FX graph and
  AOTAutograd lookups record the hit's bytes), so a warm-cache compile alone still gives complete
  artifacts; only a call that reuses code already compiled in this process (no dynamo reset)
  records nothing;
* on CPU the FX-graph artifact holds the kernels' C++ source, not the built library: a fresh
  process hits the cache yet still runs the C++ compiler (on 2 cores, a tiny conv net's first call
  took ~10 s from artifacts, ~3.5 s once the library was on disk). On CUDA, triton kernels are
  bundled into the artifact (``bundle_triton_into_fx_graph_cache``, on by default).
"""

from __future__ import annotations

from contextlib import contextmanager
import json
import os
from pathlib import Path
import tempfile
from typing import Any, Iterator

import torch

from . import modes, precision
from .fresh_process import run_script
from ..vocabulary import CompileMode

# The fresh process: as a new serving machine, with the artifacts and empty cache folders.
_STARTUP_SCRIPT = """
    folder, settings = sys.argv[1], json.loads(sys.argv[2])
    device, calls, math = settings.pop("device"), settings.pop("calls"), settings.pop("math")
    # the compiling process's float32 math (part of the cache key), set as it was set there (a few ms)
    from bench_utils.variants.precision import set_fp32_math
    set_fp32_math(math["tf32_matmul"], math["tf32_cudnn"], math["fp32_precision"])
    def synchronize():
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    model = torch.load(f"{folder}/model.pt", map_location=device, weights_only=False)
    inputs = torch.load(f"{folder}/inputs.pt", map_location=device)
    synchronize()
    built = time.perf_counter()
    with open(f"{folder}/artifacts.bin", "rb") as file:
        info = torch.compiler.load_cache_artifacts(file.read())
    if info is None:  # torch only logs a warning for bytes it cannot read: the run would just compile
        raise SystemExit("torch.compiler.load_cache_artifacts could not read the artifacts")
    hot = time.perf_counter()
    # torch.compile is lazy (it imports dynamo, then compiles on call): counted in the first call
    compiled = torch.compile(model, **settings)
    ends = []
    with torch.no_grad():
        for _ in range(calls):
            if calls > 1:  # CUDA-graph modes: a new step, so the warm-up call's outputs may be overwritten
                torch.compiler.cudagraph_mark_step_begin()
            compiled(**inputs)
            synchronize()
            ends.append(time.perf_counter())
    from torch._dynamo.utils import counters
    print(json.dumps({"import_s": imported - started, "model_load_s": built - imported,
                      "load_artifacts_s": hot - built,
                      "first_calls_s": [end - start for start, end in zip([hot] + ends, ends)],
                      "fx_graph_cache_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
                      "fx_graph_cache_misses": int(counters["inductor"]["fxgraph_cache_miss"])}))
"""


@contextmanager
def recording() -> Iterator[None]:
    """Artifacts saved after this block are those compiled inside it (clears torch's cache-artifact record at entry).

    Only compilations that happen count (cold, or hitting the on-disk cache): reset dynamo first
    if the model was already compiled in this process."""
    from torch.compiler._cache import CacheArtifactManager

    # the record is global and survives dynamo resets: earlier models' artifacts would ride along
    CacheArtifactManager.clear()
    yield


def saved_artifacts() -> bytes | None:
    """torch.compiler.save_cache_artifacts()'s bytes, or None when nothing was recorded."""
    saved = torch.compiler.save_cache_artifacts()
    return None if saved is None else saved[0]


def loaded(artifacts: bytes | None) -> None:
    """``artifacts`` hot-loaded into the cache folders in force (``torch.compiler.load_cache_artifacts``), where
    given; torch only warns of bytes it cannot read, and the compile that follows then misses and says so."""
    if artifacts:
        torch.compiler.load_cache_artifacts(artifacts)


def startup_from_artifacts(model: torch.nn.Module, inputs: dict[str, torch.Tensor], artifacts: bytes, *,
                           mode: str, backend: str = "inductor", fullgraph: bool = False,
                           dynamic: bool | None = None, device: str = "cpu", timeout_s: float = 600) -> dict[str, Any]:
    """What a new process with the artifacts pays before its first answer (seconds), measured in a new interpreter
    with new, empty cache folders: its imports, loading the model and inputs onto ``device``, hot-loading
    ``artifacts``, and the compiling first call(s) of ``torch.compile(model, ...)(**inputs)`` (two for CUDA-graph
    modes), with their FX-graph cache hits and misses. ``first_answer_s`` is hot-load + first calls. The model is
    pickled whole: its class must be importable there. A failing process raises RuntimeError with its stderr's end."""
    if not artifacts:
        raise ValueError("no artifacts: saved_artifacts() found nothing recorded")
    modes.check_mode(mode)
    if mode == CompileMode.EAGER or mode in modes.AOT_MODES:
        raise ValueError(f"mode {mode!r} is not compiled by torch.compile: it has no compile cache")
    settings: dict[str, Any] = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    if backend in modes.BACKENDS_WITH_MODES:
        settings["mode"] = mode
    calls = 2 if settings.get("mode") in modes.CUDA_GRAPH_MODES else 1
    with tempfile.TemporaryDirectory(prefix="portable_cache-") as folder:
        # the model's state is saved as it is: the caller puts it in eval mode
        torch.save(model, Path(folder) / "model.pt")
        torch.save({name: tensor.detach().cpu() for name, tensor in inputs.items()}, Path(folder) / "inputs.pt")
        (Path(folder) / "artifacts.bin").write_bytes(artifacts)
        env = dict(os.environ)
        for variable, name in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
            # new and empty, as on another machine: any hit comes from the artifacts
            (Path(folder) / name).mkdir()
            env[variable] = str(Path(folder) / name)
        # this process's float32 math: set otherwise (even through the legacy flags), cache keys differ and miss
        result = run_script(_STARTUP_SCRIPT, [folder, json.dumps({**settings, "device": device, "calls": calls,
                                                                   "math": precision.fp32_math_in_force()})],
                            what="starting from cache artifacts", timeout_s=timeout_s, env=env)
    result["first_answer_s"] = result["load_artifacts_s"] + sum(result["first_calls_s"])
    result["artifact_bytes"] = len(artifacts)
    return result
