"""The benchmarks' tests' synthetic grids and records, and a benchmark script loaded as a module."""

import importlib.util
from pathlib import Path
import sys

from bench_utils.measurement.timing import Measurement
from bench_utils.records.build import make_record
from bench_utils.records.schema import Record
from bench_utils.study.grid.grid_file import parse_grid

ROOT = Path(__file__).resolve().parents[2]


def benchmark(name):
    """``benchmarks/<name>.py`` as a module (registered, so that its dataclasses find it)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


H100_ENV = {"torch_version": "2.9.0", "cpu_model": "Test CPU",
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}
CPU_ENV = {"torch_version": "2.9.0", "cpu_model": "Test CPU", "gpus": []}

# This run: resnet at batch 1 and 2, eager and default, 10 runs after 2 warm-up calls, on the CPU.
RUN_GRID = parse_grid({"study": "bench", "runs": 10, "warmup": 2, "devices": ["cpu"],
                       "grids": [{"models": ["resnet"], "batch_sizes": [1, 2],
                                  "compile_modes": ["eager", "default"]}]})
# A small guide-like grid on CUDA: resnet eager and compiled at 1 and 4 (the eager cells share
# the compiled cells' pairs), and vit eager alone at 1 (nothing to share): 5 cells, 2 kernels.
GUIDE = parse_grid({"study": "guide", "runs": 300, "warmup": 10, "devices": ["cuda"], "replicates": 1,
                    "grids": [{"models": ["resnet"], "batch_sizes": [1, 4],
                               "compile_modes": ["eager", "default"]},
                              {"models": ["vit"], "batch_sizes": [1], "compile_modes": ["eager"]}]})


def run_cell(mode, batch):
    return next(c for c in RUN_GRID.cells if (c.compile_mode, c.batch_size) == (mode, batch))


def guide_cell(model, mode, batch):
    return next(c for c in GUIDE.cells if (c.model, c.compile_mode, c.batch_size) == (model, mode, batch))


def record(cell, *, phases=None, device=None, study=None, status="ok", times_ms=(9.0, 10.0, 11.0),
           runs=10, warmup=2, compile=None, eager_mean_ms=None, environment=CPU_ENV):
    """A record of ``cell`` (mean latency 10 ms by default), with phases and figures as given, as a reader reads it."""
    extra = {}
    if phases is not None:
        extra["phases"] = phases
    if eager_mean_ms is not None:
        extra["speedup"] = {"mean": 2.0, "eager_mean_ms": eager_mean_ms}
    ok = status == "ok"
    return Record.from_json(make_record(dict(study=study or cell.study, task=cell.task, model=cell.model,
                            batch_size=cell.batch_size, compile_mode=cell.compile_mode, dtype=cell.dtype,
                            device=device or cell.device), status=status,
                       measurement=Measurement(times_ms=list(times_ms), first_call_ms=1.0) if ok else None,
                       error=None if ok else "CUDA out of memory", compile=compile,
                       config={"runs": runs, "warmup": warmup}, environment=environment,
                       extra=extra or None))


FULL_PHASES = {"startup_s": 1.5, "load_s": 1.0, "cell_s": 7.0, "timed_s": 2.0, "warmup_s": 0.5,
               "compile_s": 3.0, "parity_s": 0.25, "memory_s": 0.25, "flops_s": 0.5, "energy_s": 0.5}
