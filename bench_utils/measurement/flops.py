"""FLOPs of one model forward under ``FlopCounterMode``, and the throughput they imply at a measured latency
(docs/measurement.md, "FLOPs, peak and energy"). Element-wise work is not counted: the "model FLOPs" of MFU.

Counting runs the eager forward once (FLOPs are the same for every compile mode), outside any timed region: the
dispatch mode slows every operator down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import math
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one call, or None with ``note`` saying why they could not be counted."""

    flops: int | None
    note: str | None = None
    by_operator: dict[str, int] = field(default_factory=dict)


def _cpu_flash_sdpa_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of ``aten._scaled_dot_product_flash_attention_for_cpu``: the CUDA kernels' formula."""
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _extra_formulas() -> dict[Any, Any]:
    """Formulas torch lacks, for ``FlopCounterMode(custom_mapping=...)``; empty once torch has them. Its CPU
    flash-attention kernel has none, so attention would count on CUDA only: it gets the CUDA kernels' formula."""
    from torch.utils.flop_counter import flop_registry

    extra: dict[Any, Any] = {}
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if op is not None and op not in flop_registry:
        extra[op] = _cpu_flash_sdpa_flop
    return extra


def count_forward_flops(fn: Callable[[], Any]) -> FlopCount:
    """Run ``fn()`` once under ``FlopCounterMode`` and ``torch.no_grad()`` and count its FLOPs. Never raises: a
    failing count is ``FlopCount(None, note)``, so a study goes on without the figure."""
    counter = FlopCounterMode(display=False, custom_mapping=_extra_formulas())
    try:
        with torch.no_grad(), counter:
            fn()
    except Exception as exc:  # any model failure: report the reason, not a crash
        return FlopCount(None, f"counting failed: {type(exc).__name__}: {exc}")
    total = int(counter.get_total_flops())
    by_operator = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    if total <= 0:
        # 0 would read as "free"; it only means no operator with a formula ran.
        return FlopCount(None, "no operator with a FLOP formula ran (no matmul, conv or attention)")
    return FlopCount(total, None, by_operator)


def achieved_tflops(flops: int | float | None, latency_ms: float | None) -> float | None:
    """TFLOP/s that ``flops`` per call imply at ``latency_ms`` per call; None when either is missing."""
    if flops is None or latency_ms is None:
        return None
    if not (math.isfinite(flops) and math.isfinite(latency_ms)) or flops <= 0 or latency_ms <= 0:
        return None
    return flops / (latency_ms * 1e-3) / 1e12


def effective_peak(count: FlopCount, gpu_name: str | None, dtype: str, *, tf32_matmul: bool,
                   tf32_conv: bool) -> float | None:
    """The device's dense peak for this forward pass's mix of work (TFLOP/s), or None: each class of FLOPs held to
    its own TF32 state's peak, total / sum(flops_c / peak_c) (docs/measurement.md, "FLOPs, peak and energy")."""
    from .peaks import peak_tflops

    if not gpu_name or not count.flops:
        return None
    conv = sum(n for op, n in count.by_operator.items() if "convolution" in op)
    parts = [(conv, peak_tflops(gpu_name, dtype, tf32_conv)),
             (count.flops - conv, peak_tflops(gpu_name, dtype, tf32_matmul))]
    at_peaks = 0.0  # the pass's time were each class of its FLOPs run at its own peak
    for flops, peak in parts:
        if flops > 0:
            if not peak:
                return None
            at_peaks += flops / peak
    return count.flops / at_peaks


def compute_block(count: FlopCount, *, gpu_name: str | None, dtype: str, tf32_matmul: bool,
                  tf32_conv: bool, latency_ms: float, eager_latency_ms: float | None = None) -> dict[str, Any]:
    """A record's hardware-normalized figures: FLOPs of one forward pass, the TFLOP/s the
    cell's mean latency implies (and eager's, for a compiled cell) and their share of the
    device's dense peak for the dtype and TF32 state (None on CPUs and unknown GPUs)."""
    from .peaks import gpu_key, percent_of_peak

    peak = effective_peak(count, gpu_name, dtype, tf32_matmul=tf32_matmul, tf32_conv=tf32_conv)
    tflops = achieved_tflops(count.flops, latency_ms)
    block = {"flops": count.flops, "flops_note": count.note, "peak_tflops": peak,
             "peak_of": gpu_key(gpu_name) if gpu_name else None,
             "peak_tf32": {"matmul": tf32_matmul, "convolution": tf32_conv},
             "tflops": tflops, "percent_of_peak": percent_of_peak(tflops, peak)}
    if eager_latency_ms is not None:
        eager = achieved_tflops(count.flops, eager_latency_ms)
        block.update(eager_tflops=eager, eager_percent_of_peak=percent_of_peak(eager, peak))
    return block
