"""Why a call takes the time it does: a few calls under torch's profiler, reduced to a small block.

Per call, on each side of a cell: kernels (GPU) or operator calls (CPU), how busy the device was, and where that time
went by kind of work (``vocabulary.WorkKind``); what each counts: docs/measurement.md, *Profiles*. The profiler slows
what it watches, so this never runs inside a timed region.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
import os
import re
import time
from typing import Any

from ..vocabulary import WorkKind

CALLS, WARMUP = 3, 1
ANNOTATION = "bench_utils::profiled_call"
METHOD = "torch.profiler"
COMPILED_GRAPH = re.compile(r"^## Call CompiledFxGraph")
COMPILED_REGION = re.compile(r"^Torch-Compiled Region")
# an operator of a library (aten::, torchvision::, quantized::...), not a framework range or a runtime call
OPERATOR = re.compile(r"^\w+::\w")

# first match wins: order matters (matmul before mul, softmax before the element-wise max...)
OPERATOR_KINDS: Sequence[tuple[WorkKind, re.Pattern]] = [
    (WorkKind.ATTENTION, re.compile(r"scaled_dot_product|flash_attention|efficient_attention|_sdp|softmax")),
    (WorkKind.MATMUL_CONV, re.compile(r"(^|_)(a?dd)?b?mm$|addmm|matmul|linear|conv|einsum|_int_mm|baddbmm")),
    (WorkKind.NORMALIZATION, re.compile(r"(layer|batch|group|instance|rms)_?norm")),
    (WorkKind.COPY_LAYOUT, re.compile(r"copy|clone|contiguous|^to$|^cat$|stack|permute|transpose|reshape|view|expand|"
                                      r"as_strided|^empty|zeros|ones|fill_|zero_|pad|slice|select|squeeze|flatten|"
                                      r"split|chunk|narrow|^t$|unfold|repeat|roll|flip|^detach|^alias|resolve_")),
    (WorkKind.ELEMENTWISE, re.compile(r".")),  # the rest of aten: element-wise operators, reductions, pooling
]
KERNEL_KINDS: Sequence[tuple[WorkKind, re.Pattern]] = [
    (WorkKind.MATMUL_CONV, re.compile(r"^triton_tem")),  # Inductor's GEMM and convolution templates
    (WorkKind.FUSED, re.compile(r"^triton_")),            # Inductor's generated kernels
    (WorkKind.ATTENTION, re.compile(r"flash|fmha|attention|attn|softmax|sdpa", re.IGNORECASE)),
    (WorkKind.MATMUL_CONV, re.compile(r"gemm|cutlass|cublas|xmma|conv|implicit|wgrad|dgrad|nvjet|sm\d\d_",
                                      re.IGNORECASE)),
    (WorkKind.NORMALIZATION, re.compile(r"norm|bn_fw|bn_bw", re.IGNORECASE)),
    (WorkKind.COPY_LAYOUT, re.compile(r"memcpy|memset|copy|nchwtonhwc|nhwctonchw|transpose|permute|catarray|"
                                      r"convert", re.IGNORECASE)),
    (WorkKind.ELEMENTWISE, re.compile(r"elementwise|reduce|pool|upsample|index|gather|scatter|where", re.IGNORECASE)),
]


def operator_kind(name: str) -> WorkKind:
    """The kind of work of a CPU operator event (``aten::addmm``), a compiled graph's call being fused work."""
    if COMPILED_GRAPH.match(name):
        return WorkKind.FUSED
    bare = name.split("::", 1)[-1]
    return next((kind for kind, pattern in OPERATOR_KINDS if pattern.search(bare)), WorkKind.OTHER)


def kernel_kind(name: str) -> WorkKind:
    """The kind of work of a GPU kernel or copy, from its name."""
    return next((kind for kind, pattern in KERNEL_KINDS if pattern.search(name)), WorkKind.OTHER)


def _is_work(name: str) -> bool:
    return name != ANNOTATION and bool(OPERATOR.match(name) or COMPILED_GRAPH.match(name))


def _union_us(intervals: Iterable[tuple[float, float]]) -> float:
    """The time the intervals cover, overlaps counted once."""
    covered, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            covered += stop - max(start, end)
            end = stop
    return covered


def _windows(events: Iterable[Any]) -> list[tuple[float, float]]:
    return [(event.time_range.start, event.time_range.end) for event in events
            if event.name == ANNOTATION and _on_cpu(event)]


def _on_cpu(event: Any) -> bool:
    return getattr(event.device_type, "name", str(event.device_type)).upper().endswith("CPU")


def _side(calls: int, wall_us: float, busy_us: float, work_calls: int, regions: int, unit: str,
          kinds_us: Counter) -> dict[str, Any]:
    return {"calls": calls, "wall_ms": wall_us / calls / 1e3, "busy_ms": busy_us / calls / 1e3,
            "busy_fraction": busy_us / wall_us if wall_us > 0 else None, "work_calls": work_calls / calls,
            "work_unit": unit, "compiled_regions": regions / calls,
            "kinds_ms": {kind.value: kinds_us.get(kind, 0.0) / calls / 1e3 for kind in WorkKind}}


def reduce_cpu(events: Sequence[Any]) -> dict[str, Any]:
    """Per call: operator calls, time in operators over wall time, and that time by kind (self times)."""
    windows = _windows(events)
    if not windows:
        raise ValueError(f"no {ANNOTATION} range among the profiler's events")
    kinds: Counter = Counter()
    busy: list[tuple[float, float]] = []
    work_calls = regions = 0
    for event in events:
        if not _on_cpu(event) or event.name == ANNOTATION or not _inside(event, windows):
            continue
        if COMPILED_REGION.match(event.name):
            regions += 1
        if not _is_work(event.name):
            continue  # dynamo's guards, the compiled region's wrappers, runtime calls: host overhead
        kinds[operator_kind(event.name)] += event.self_cpu_time_total
        outer = _work_ancestor(event)
        if outer is None:
            busy.append((event.time_range.start, event.time_range.end))
        if outer is None or COMPILED_GRAPH.match(outer.name):  # an operator a compiled graph calls out to counts
            work_calls += 1
    return _side(len(windows), sum(end - start for start, end in windows), _union_us(busy), work_calls, regions,
                 "operator calls", kinds)


def _inside(event: Any, windows: list[tuple[float, float]]) -> bool:
    return any(start <= event.time_range.start and event.time_range.end <= end for start, end in windows)


def _work_ancestor(event: Any) -> Any:
    parent = event.cpu_parent
    while parent is not None and not _is_work(parent.name):
        parent = parent.cpu_parent
    return parent


def reduce_device(events: Sequence[Any]) -> dict[str, Any]:
    """Per call: kernels, the device's busy time over the calls' wall time (each call ends with a
    synchronisation), and the kernels' time by kind."""
    windows = _windows(events)
    if not windows:
        raise ValueError(f"no {ANNOTATION} range among the profiler's events")
    first, last = windows[0][0], windows[-1][1]
    kinds: Counter = Counter()
    spans, kernels, regions = [], 0, 0
    for event in events:
        if _on_cpu(event):
            regions += bool(COMPILED_REGION.match(event.name)) and _inside(event, windows)
            continue
        if getattr(event, "is_user_annotation", False) or not (first <= event.time_range.start <= last):
            continue
        start, end = event.time_range.start, event.time_range.end
        kinds[kernel_kind(event.name)] += end - start
        spans.append((start, end))
        kernels += not re.match(r"mem(cpy|set)", event.name, re.IGNORECASE)
    return _side(len(windows), sum(end - start for start, end in windows), _union_us(spans), kernels, regions,
                 "kernels", kinds)


def profile_calls(fn: Callable[[], Any], *, cuda: bool, calls: int = CALLS, warmup: int = WARMUP,
                  trace_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``calls`` calls of ``fn`` under torch's profiler (after ``warmup`` it does not record), reduced as above;
    with ``trace_path``, one more call's full trace written there (Chrome trace JSON: Perfetto, TensorBoard)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from .devices import quiet_profiler

    quiet_profiler()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def call() -> None:
        with record_function(ANNOTATION):
            fn()
            if cuda:  # the call's wall time covers its kernels
                torch.cuda.synchronize()

    # one cycle: ``warmup`` calls run under the profiler but are dropped (its own start-up), then ``calls`` recorded;
    # acc_events keeps them readable once the cycle has ended
    with profile(activities=activities, schedule=schedule(wait=0, warmup=warmup, active=calls, repeat=1),
                 acc_events=True) as profiler:
        for _ in range(warmup + calls):
            call()
            profiler.step()
    events = profiler.events()
    side = reduce_device(events) if cuda else reduce_cpu(events)
    if trace_path is not None:
        with profile(activities=activities) as single:
            call()
        single.export_chrome_trace(str(trace_path))
    return side


def profile_block(eager_fn: Callable[[], Any], compiled_fn: Callable[[], Any], *, cuda: bool,
                  trace_prefix: str | os.PathLike | None = None) -> dict[str, Any]:
    """The record's ``profile`` block: both sides profiled (``profile_calls``), what it cost, and the names of the
    traces kept (``<trace_prefix>.eager.json`` and ``.compiled.json``) where a prefix is given."""
    start = time.perf_counter()
    block: dict[str, Any] = {"method": f"{METHOD}: {CALLS} calls per side after {WARMUP} not recorded, after the "
                                       "timed runs", "activities": "cpu+cuda" if cuda else "cpu", "traces": None}
    traces = {}
    for side, fn in (("eager", eager_fn), ("compiled", compiled_fn)):
        path = f"{os.fspath(trace_prefix)}.{side}.json" if trace_prefix is not None else None
        block[side] = profile_calls(fn, cuda=cuda, trace_path=path)
        if path is not None:
            traces[side] = os.path.basename(path)
    block["traces"] = traces or None
    block["seconds"] = time.perf_counter() - start
    return block
