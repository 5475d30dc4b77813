"""Per-model work of one forward pass, measured once on this CPU: the data of the dry run's a-priori estimate.

``python benchmarks/model_costs.py [--models vit,resnet] [--compile] [--out FILE]``

For each model of the zoo (random weights, float32, the guide's inputs) it counts, at batch sizes 1
and 2 (so that the per-image part and the fixed part are told apart):

- the FLOPs of one forward pass (``measurement.flops``: matmuls, convolutions and attention), split
  into convolution FLOPs and the rest, since TF32 may apply to one and not the other;
- the bytes the eager operators read and write (every non-view aten operator's tensor inputs and
  outputs: eager's memory traffic, each operator going to memory and back), and the parameter bytes;
- the operators eager dispatches per forward (non-view aten operators: the kernels eager launches);
- the seconds this CPU takes to build the model offline (the kernel's model build, an upper bound for
  a GPU host's faster cores), and with ``--compile`` one cold ``torch.compile`` (default mode, fresh
  caches, batch 1) on this CPU: Inductor's C++ path, an anchor for the compile-time prior.

The counts are properties of the model and its input shapes, not of the device, so they are taken
once here and committed (``bench_utils/study/pricing/data/model_costs.json``, with the versions and the
machine they came from); ``bench_utils.study.pricing.prior`` reads them at dry-run time without
running any model.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
import json
from pathlib import Path
import platform
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))
DEFAULT_OUT = PROJECT_ROOT / "bench_utils" / "study" / "pricing" / "data" / "model_costs.json"
BATCHES = (1, 2)


class TrafficCounter(TorchDispatchMode):
    """Counts the non-view aten operators of a call and the bytes of their tensor inputs and outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not getattr(func, "is_view", False):
            tensors = [t for t in tree_leaves((args, kwargs or {}, out)) if isinstance(t, torch.Tensor)]
            self.ops += 1
            self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        return out


def measure_model(key: str, compile_cold: bool) -> dict:
    from bench_utils.measurement.flops import count_forward_flops
    from bench_utils.zoo.loading import load

    start = time.perf_counter()
    loaded = load(key, weights="random", device="cpu")
    row = {"build_s_cpu": round(time.perf_counter() - start, 2), "param_count": loaded.param_count,
           "param_bytes": sum(p.numel() * p.element_size() for p in loaded.model.parameters())}
    per_batch = {}
    for batch in BATCHES:
        inputs = loaded.inputs(batch)
        count = count_forward_flops(lambda: loaded.model(**inputs))
        conv = sum(n for op, n in count.by_operator.items() if "convolution" in op)
        traffic = TrafficCounter()
        with torch.no_grad(), traffic:
            loaded.model(**inputs)
        per_batch[batch] = {"conv": conv, "other": (count.flops or 0) - conv, "bytes": traffic.bytes,
                            "ops": traffic.ops}
    one, two = per_batch[1], per_batch[2]
    # a linear fit through batch 1 and 2: per image, and fixed (text queries, weights read once)
    for name, field in (("conv_gflops", "conv"), ("other_gflops", "other")):
        row[f"{name}_per_image"] = round((two[field] - one[field]) / 1e9, 4)
        row[f"{name}_fixed"] = round((2 * one[field] - two[field]) / 1e9, 4)
    row["eager_mb_per_image"] = round((two["bytes"] - one["bytes"]) / 1e6, 2)
    row["eager_mb_fixed"] = round((2 * one["bytes"] - two["bytes"]) / 1e6, 2)
    row["eager_ops"] = one["ops"]
    if compile_cold:
        row["cold_compile_s_cpu"] = _cold_compile_seconds(loaded)
    return row


def _cold_compile_seconds(loaded) -> float:
    from bench_utils.variants.compile_cost import fresh_caches

    torch._dynamo.reset()
    inputs = loaded.inputs(1)
    with fresh_caches(), torch.no_grad():
        compiled = torch.compile(loaded.model)
        start = time.perf_counter()
        compiled(**inputs)
        seconds = time.perf_counter() - start
    torch._dynamo.reset()
    return round(seconds, 1)


def provenance(compile_cold: bool) -> dict:
    import transformers

    from bench_utils.environment.capture import capture_environment

    environment = capture_environment()
    return {"script": "benchmarks/model_costs.py" + (" --compile" if compile_cold else ""),
            "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "cpu_model": environment.get("cpu_model"),
            "cpu_count_logical": environment.get("cpu_count_logical"),
            "weights": "random (offline architectures), float32, contiguous, the guide's inputs",
            "batch_sizes": list(BATCHES)}


def main(argv: list[str] | None = None) -> int:
    from bench_utils.zoo.registry import REGISTRY

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(REGISTRY), help="comma-separated registry keys")
    parser.add_argument("--compile", action="store_true", help="also time one cold torch.compile per model")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    import timm  # noqa: F401 - imported before the first build is timed, as a kernel has them by then
    import transformers  # noqa: F401
    models = {}
    for key in filter(None, args.models.split(",")):
        models[key] = measure_model(key, args.compile)
        print(key, json.dumps(models[key]), file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"provenance": provenance(args.compile), "models": models}, indent=1) + "\n",
                        encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
