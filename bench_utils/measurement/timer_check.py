"""Check our timer against independent ones on two workloads, and measure its own overhead (docs/measurement.md,
"Timer check"). Every judged ratio must be within ``TOLERANCE`` of 1.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from ..errors import UserError
from . import stats
from .compare import block_sizes
from .devices import quiet_toolchain_logs, resolve_device
from .timing import TIMER_CUDA_EVENT, TIMER_PERF_COUNTER, measure, time_first_call

# |ratio - 1| that counts as agreement, for every judged ratio: the one figure of the check (why 5 %:
# docs/measurement.md, "Timer check")
TOLERANCE = 0.05
ROUNDS = 10               # alternations of the two timers (drift cancels in the ratio)
CPU_MATMUL_SIZE = 512     # ~270 MFLOP: ~1.5 ms on two cores, like a small model
CUDA_MATMUL_SIZE = 4096   # ~137 GFLOP: milliseconds on a data-centre GPU
LAUNCH_BOUND_OPS = 300    # tiny kernels per call: a batch-1 small model's launch pattern


def matmul_workload(device: torch.device, size: int | None = None) -> tuple[Callable[[], Any], int]:
    """A fixed ``size x size`` fp32 matrix product writing into a preallocated output."""
    size = size or (CUDA_MATMUL_SIZE if device.type == "cuda" else CPU_MATMUL_SIZE)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device)
    b = torch.randn(size, size, generator=generator).to(device)
    out = torch.empty(size, size, device=device)
    return (lambda: torch.mm(a, b, out=out)), size


def launch_bound_workload(device: torch.device, ops: int = LAUNCH_BOUND_OPS) -> Callable[[], Any]:
    """``ops`` dependent element-wise operations on 64 floats: each one a kernel launch on CUDA."""
    x = torch.ones(64, device=device)

    def fn():
        y = x
        for _ in range(ops):
            y = y * 1.0001
        return y
    return fn


def launch_bound_check(device: torch.device, runs: int, rounds: int,
                       ops: int = LAUNCH_BOUND_OPS) -> dict[str, Any]:
    """``measure`` (per-call) against a synchronized host clock, alternating in ``rounds``."""
    fn = launch_bound_workload(device, ops)
    ours_ms: list[float] = []
    host_ms: list[float] = []
    for chunk in block_sizes(runs, rounds):
        ours_ms += measure(fn, warmup=3, runs=chunk, device=device).times_ms
        host_ms += [time_first_call(fn, device) for _ in range(chunk)]
    ours, host = float(np.median(ours_ms)), float(np.median(host_ms))
    result: dict[str, Any] = {"workload": f"{ops} element-wise ops on 64 floats",
                              "measure_median_ms": ours, "host_synced_median_ms": host,
                              "ratio_host_synced": ours / host,
                              "pipelined_median_ms": None, "do_bench_median_ms": None, "ratio_do_bench": None}
    if device.type == "cuda":
        # pipelined, the host runs ahead: shown, not judged
        result["pipelined_median_ms"] = measure(fn, warmup=3, runs=runs, device=device,
                                                sync="pipelined").median_ms
        bench = do_bench_from_idle_ms(fn, device)
        if bench:
            result["do_bench_median_ms"], result["ratio_do_bench"] = bench, ours / bench
    return result


def torch_timer(fn: Callable[[], Any], min_run_time: float):
    """One ``blocked_autorange`` of torch.utils.benchmark (times in seconds)."""
    quiet_toolchain_logs()  # torch.utils.benchmark imports cpp_extension
    import torch.utils.benchmark as torch_benchmark

    # num_threads must match ours: Timer defaults to one thread.
    timer = torch_benchmark.Timer(stmt="fn()", globals={"fn": fn},
                                  num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time)


def do_bench_median_ms(fn: Callable[[], Any]) -> float | None:
    """triton's do_bench median in ms; None where triton cannot run here."""
    try:
        from triton.testing import do_bench
    except Exception:
        return None
    try:
        return float(do_bench(fn, warmup=25, rep=200, return_mode="median"))
    except TypeError:  # older triton: no return_mode
        return float(do_bench(fn, warmup=25, rep=200, quantiles=[0.5]))


def do_bench_from_idle_ms(fn: Callable[[], Any], device: torch.device) -> float | None:
    """do_bench's median of ``fn`` called from an idle device, as ``measure``'s per-call mode calls it: else a
    launch-bound call's first launches queue behind do_bench's L2 flush (docs/measurement.md, "Timer check")."""
    def from_idle():
        torch.cuda.synchronize(device)
        return fn()

    with torch.cuda.device(device):
        return do_bench_median_ms(from_idle)


def validate_timer(device: str | torch.device | None = None, *, size: int | None = None,
                   runs: int = 300, rounds: int = ROUNDS, min_run_time: float = 2.0,
                   noop_runs: int = 10_000, launch_ops: int = LAUNCH_BOUND_OPS) -> dict[str, Any]:
    """Time the workload with every timer, alternating over ``rounds`` rounds so that machine drift hits both;
    return medians, ratios, overheads."""
    resolved = resolve_device(device)
    fn, size = matmul_workload(resolved, size)
    if not 1 <= rounds <= runs:
        raise UserError(f"rounds must be from 1 to runs ({runs}), got {rounds}")
    ours_ms: list[float] = []
    timer_medians_ms: list[float] = []
    timer_means_ms: list[float] = []
    round_ratios: list[float] = []
    for chunk in block_sizes(runs, rounds):
        ours = measure(fn, warmup=3, runs=chunk, device=resolved)
        reference = torch_timer(fn, min_run_time / rounds)
        ours_ms += ours.times_ms
        timer_medians_ms.append(reference.median * 1000.0)
        timer_means_ms.append(reference.mean * 1000.0)
        round_ratios.append(ours.median_ms / timer_medians_ms[-1])
    ours_summary = stats.summarize(ours_ms)
    timer_median = float(np.median(timer_medians_ms))
    timer_mean = float(np.mean(timer_means_ms))
    result: dict[str, Any] = {
        "device": str(resolved),
        "timer": TIMER_CUDA_EVENT if resolved.type == "cuda" else TIMER_PERF_COUNTER,
        "workload": f"torch.mm fp32 {size}x{size}",
        "runs": runs,
        "rounds": rounds,
        "torch_threads": torch.get_num_threads(),
        "measure_median_ms": ours_summary["median"],
        "measure_mean_ms": ours_summary["mean"],
        "measure_cv": ours_summary["cv"],
        "torch_timer_median_ms": timer_median,
        "torch_timer_mean_ms": timer_mean,
        "ratio_torch_timer": ours_summary["median"] / timer_median,
        "ratio_torch_timer_mean": ours_summary["mean"] / timer_mean,
        "round_ratio_min": min(round_ratios),
        "round_ratio_max": max(round_ratios),
        "do_bench_median_ms": None,
        "ratio_do_bench": None,
    }
    if resolved.type == "cuda":
        with torch.cuda.device(resolved):
            bench = do_bench_median_ms(fn)
        if bench:
            result["do_bench_median_ms"] = bench
            result["ratio_do_bench"] = ours_summary["median"] / bench
    noop = measure(lambda: None, warmup=100, runs=noop_runs, device=resolved)
    result["noop_overhead_median_us"] = noop.median_ms * 1000.0
    result["noop_overhead_mean_us"] = noop.mean_ms * 1000.0
    if resolved.type == "cuda":  # the host clock's overhead too, for comparison
        host = measure(lambda: None, warmup=100, runs=noop_runs, device="cpu")
        result["host_noop_overhead_median_us"] = host.median_ms * 1000.0
    # Timer's median is of block means, so our mean compares with it; do_bench times single calls: medians compare
    result["launch_bound"] = launch_bound_check(resolved, runs, rounds, launch_ops)
    launch = result["launch_bound"]
    ratios = [r for r in (result["ratio_torch_timer_mean"], result["ratio_do_bench"],
                          launch["ratio_host_synced"], launch.get("ratio_do_bench")) if r is not None]
    result["within_tolerance"] = all(abs(r - 1.0) <= TOLERANCE for r in ratios)
    result["verdict_basis"] = ("mean vs Timer (block means); median vs do_bench (single calls); "
                               "launch-bound median vs a synchronized host clock and do_bench from an idle device")
    result["tolerance"] = TOLERANCE
    return result


def format_timer_check(result: dict[str, Any]) -> str:
    lines = [
        f"workload            {result['workload']} on {result['device']} "
        f"({result['torch_threads']} torch threads, timer {result['timer']})",
        f"measure median      {result['measure_median_ms']:.4f} ms "
        f"(mean {result['measure_mean_ms']:.4f} ms, cv {result['measure_cv']:.3f}, {result['runs']} runs)",
        f"torch Timer median  {result['torch_timer_median_ms']:.4f} ms   "
        f"ratio measure/Timer {result['ratio_torch_timer']:.3f} "
        f"(means: {result['ratio_torch_timer_mean']:.3f}; per round "
        f"{result['round_ratio_min']:.3f} to {result['round_ratio_max']:.3f}, {result['rounds']} rounds)",
    ]
    if result.get("do_bench_median_ms") is not None:
        lines.append(f"do_bench median     {result['do_bench_median_ms']:.4f} ms   "
                     f"ratio measure/do_bench {result['ratio_do_bench']:.3f}")
    lines.append(f"no-op overhead      {result['noop_overhead_median_us']:.2f} us per iteration "
                 f"(median; mean {result['noop_overhead_mean_us']:.2f} us)")
    launch = result.get("launch_bound")
    if launch:
        line = (f"launch-bound        {launch['workload']}: measure median {launch['measure_median_ms']:.4f} ms, "
                f"synchronized host clock {launch['host_synced_median_ms']:.4f} ms "
                f"(ratio {launch['ratio_host_synced']:.3f})")
        if launch.get("pipelined_median_ms") is not None:
            line += f"; pipelined {launch['pipelined_median_ms']:.4f} ms (host runs ahead: not judged)"
        if launch.get("do_bench_median_ms") is not None:
            line += (f"; do_bench from an idle device {launch['do_bench_median_ms']:.4f} ms "
                     f"(ratio {launch['ratio_do_bench']:.3f})")
        lines.append(line)
    if "host_noop_overhead_median_us" in result:
        lines.append(f"host-clock overhead {result['host_noop_overhead_median_us']:.2f} us per iteration")
    verdict = "OK" if result["within_tolerance"] else "WARNING"
    lines.append(f"verdict             {verdict}: ratios {'within' if result['within_tolerance'] else 'outside'} "
                 f"{result['tolerance']:.0%} of 1.0 ({result['verdict_basis']})")
    return "\n".join(lines)
