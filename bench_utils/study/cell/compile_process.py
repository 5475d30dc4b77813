"""A compile process: cells compiled cold ahead of the kernel that will measure them, into their kept caches.

While the measuring kernel times one cell, a compile process (started by ``study.runner.compile_ahead`` on cores
of its own) builds the model of the next kernel group as its kernel will (the same weights, seed, dtype, layout,
float32 math and Inductor configuration) and compiles each of its cells cold, exactly as the kernel would have
(``variants.compile_cost.compile_cold_then_warm``, cold only, after a dynamo reset), into the cell's kept folder
(``variants.kept_caches``). Its cold figures go into ``cold.json``, named by the process that measured them; the
kernel then finds them and compiles the cell warm (its record: ``compile.cold_measured_in``).

The GPU is shared by a token (``measurement.gpu_token``): this process holds it through the running parts of its compiler
warm-up, the model's and inputs' move to the device (the model built on the host first, without it), an eager call,
and its compiling calls (the compiled code's runs, the eager
code between graph breaks, Triton's autotuning, a CUDA graph's recording), letting it go from the start to the end
of each of dynamo's compilations (tracing, code generation: most of a compile, the CPU's work), in which Inductor's
GPU benchmarks take it themselves (torch's hook for a harness's GPU lock,
``torch._inductor.runtime.benchmarking.set_gpu_benchmark_lock_context``). Before it lets go it waits for the CUDA work
it queued and empties its allocator's cache. The time it waited for the token inside a compiling call is taken out
of it (``compile_cost``): a wait is no compile cost.

A cell the kernel (or another compile process) has claimed, or whose cold compile is kept already, is skipped.
One JSON line a cell goes to the job's log: ``kept``, ``skipped`` or ``failed`` (with the error), and the seconds.

Run as ``python -m bench_utils.study.cell.compile_process JOB.json`` (the job: ``study.compile_job.CompileJob``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, ContextManager

from ...measurement import gpu_token
from ..compile_job import CompileJob


def _compiling_calls() -> ContextManager[None]:
    """The compiling calls under the token, let go while dynamo compiles."""
    return gpu_token.window_between_compiles("compiling calls")


def compile_cells(job: CompileJob, say: Callable[[dict[str, Any]], None]) -> None:
    """Compile the job's cells cold into their kept folders, saying how each went (``say``, one dict a cell)."""
    import torch

    from ...settings import Settings
    from ...variants import modes
    from ...variants.compilation import forward_call
    from ...variants.compile_cost import cache_folder, compile_cold_then_warm
    from ...variants.compiler_warmup import warm_up_compiler
    from ...variants.inductor_config import inductor_configuration
    from ...variants.kept_caches import KeptCaches, kept_cell
    from ...variants.precision import configure_fp32_math
    from ...zoo.loading import built_on_host, placed

    settings = Settings.from_parameters(job.settings).checked()
    configure_fp32_math(settings.tf32)  # part of the cache key: as the kernel sets it
    device = torch.device(job.device)
    gpu_token.compile_beside(job.token, job.device)
    caches = KeptCaches(job.caches)
    # this process's one-off costs, out of its first cell's figure; the token only while it runs code (the first
    # pipelined H200 lease: held through the whole warm-up, it kept the measuring kernel waiting)
    with gpu_token.window_between_compiles("compiler warm-up"):
        warm_up_compiler(device, settings.backend)
    # built on the host without the token (the CPU's work: seconds for a large model), then placed under it
    host = built_on_host(job.model, weights=settings.weights, dtype=job.dtype, device=job.device, task=job.task,
                         seed=settings.seed, memory_format=settings.memory_format)
    with gpu_token.window("model placement"):
        loaded = placed(host)
    for mode, batch_size in job.cells:
        kept = kept_cell(caches, job.task, job.model, int(batch_size), mode, settings, job.dtype, job.device)
        started = time.perf_counter()
        line: dict[str, Any] = {"mode": mode, "batch_size": batch_size, "folder": kept.folder.name}
        with kept.claimed(wait=False) as ours:
            if not ours or kept.cold() is not None:
                say({**line, "status": "skipped", "why": "claimed" if not ours else "kept already"})
                continue
            try:
                with gpu_token.window("inputs and an eager call"), torch.no_grad():
                    inputs = loaded.inputs(int(batch_size))
                    # as the kernel's references do before it compiles: a model's first call may import lazily
                    # (transformers' Segformer: dynamo traced into the import's lock, 2 graphs and 11 breaks
                    # where the kernel's compile made 1 graph, so the kernel missed the kept cache)
                    forward_call(loaded.model, inputs, "eager")()
                options: dict[str, Any] = {"backend": settings.backend, "fullgraph": settings.fullgraph,
                                           "dynamic": settings.dynamic}
                with torch.no_grad(), inductor_configuration(settings.inductor), kept.emptied() as folder, \
                        cache_folder(folder):
                    compiled = compile_cold_then_warm(loaded.model, mode, lambda fn: forward_call(fn, inputs, mode),
                                                      device, warm=False, around_calls=_compiling_calls, **options)
                # the record's compile block says it, and how (``report.frame``: the page marks such a cold compile)
                kept.keep(compiled.cold_calls_ms, {**compiled.cold_stats, "compiled_ahead": job.beside},
                          job.measured_in)
                say({**line, "status": "kept", "cold_calls_ms": compiled.cold_calls_ms,
                     "seconds": round(time.perf_counter() - started, 3)})
            except Exception as exc:  # the kernel then compiles this cell cold itself
                say({**line, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]})
            finally:
                modes.reset()  # its graphs (and a CUDA-graph pool) go before the next cell's
                if device.type == "cuda":
                    torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench_utils.study.cell.compile_process JOB.json", file=sys.stderr)
        return 2
    job = CompileJob.read(args[0])

    def say(line: dict[str, Any]) -> None:
        text = json.dumps({**line, "model": job.model, "pid": os.getpid()})
        if job.log:
            with open(job.log, "a", encoding="utf-8") as log:
                log.write(text + "\n")
        else:
            print(text, flush=True)

    compile_cells(job, say)
    return 0


if __name__ == "__main__":
    sys.exit(main())
