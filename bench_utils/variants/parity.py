"""The accuracy gate: does the compiled model still compute what the eager one does? (docs/variants.md)

The rule is dynamo's own (``torch._dynamo.utils.same``): a floating output passes when it is ``allclose`` to eager
(atol = rtol = ``tol``), or else when RMSE(compiled, fp64) <= ``multiplier`` * RMSE(eager, fp64) + tol / 10 (an
error confined to small elements, invisible next to the largest ones, still moves the RMSE). Without a float64
reference the rule is ``allclose`` alone; every verdict names its ``reference``, ``rule`` and tolerance ``source``.
"""

from __future__ import annotations

from collections.abc import Mapping
import copy
from dataclasses import dataclass
import math
from typing import Any

import torch

from .precision import parse_dtype

METHOD = "allclose or rmse-vs-fp64 (dynamo)"
METHOD_ALLCLOSE_ONLY = "allclose only (no float64 reference)"
REFERENCE_FP64, REFERENCE_EAGER, REFERENCE_NONE = "float64", "same-dtype", "none"  # what judged a cell


@dataclass(frozen=True)
class Tolerance:
    tol: float         # atol = rtol of the allclose test; tol / 10 is the RMSE test's slack
    multiplier: float  # compiled may be this many times further from fp64 than eager is


# The one place tolerances are stated, keyed by ``tolerance_key(dtype, tf32)``. Sources:
# torch/_dynamo/utils.py ``same()`` and benchmarks/dynamo/{common,torchbench,timm_models,
# huggingface}.py (``get_tolerance_and_cosine_flag``).
TOLERANCES = {
    # same()'s default tol and torchbench's fp32 inference tolerance; multiplier 2 is
    # same()'s for fp32 results.
    "float32": Tolerance(tol=1e-4, multiplier=2.0),
    # The harness runs fp32 with TF32 matmuls on (common.py sets allow_tf32 = True) and
    # judges timm and HuggingFace inference with tol 1e-3: TF32 keeps a 10-bit mantissa.
    "float32+tf32": Tolerance(tol=1e-3, multiplier=2.0),
    # torchbench's fp16/amp tolerance (about one fp16 ulp, 2**-10); multiplier 3 is
    # same()'s for fp16/bf16 results ("to avoid false alarms" with AMP).
    "float16": Tolerance(tol=1e-3, multiplier=3.0),
    # torchbench's "higher_bf16" tolerance: one bf16 ulp is 2**-8 ~ 3.9e-3, so a 1e-3
    # allclose could never pass and the RMSE test (multiplier 3, as fp16) decides.
    "bfloat16": Tolerance(tol=1e-2, multiplier=3.0),
}
# Why each tolerance applies, as a record states it.
TOLERANCE_SOURCES = {
    "float32": "float32, TF32 off: torchbench's fp32 inference tolerance",
    "float32+tf32": "float32 with TF32 allowed (10-bit mantissa): the harness's timm/HuggingFace tolerance",
    "float16": "float16: torchbench's fp16/amp tolerance (about one fp16 ulp)",
    "bfloat16": "bfloat16: torchbench's higher_bf16 tolerance (one bf16 ulp is 3.9e-3)",
}
# same(): tensors under 1000 elements, 4-D tensors ending in 1x1 and tolerances of 2e-2
# or more get multiplier 3 at least ("noise might dominate our error metric").
SMALL_TENSOR_NUMEL = 1000
SMALL_TENSOR_MULTIPLIER = 3.0
LARGE_TOL = 2e-2
MAX_PROBLEMS = 10
MAX_PER_TENSOR = 20


def tolerance_key(dtype: str | torch.dtype = "float32", tf32: bool = False) -> str:
    """The key into ``TOLERANCES``: TF32 only matters for float32 runs."""
    name, _ = parse_dtype(dtype)
    return "float32+tf32" if name == "float32" and tf32 else name


def flatten_outputs(outputs: Any, prefix: str = "output") -> dict[str, torch.Tensor]:
    """Every tensor of ``outputs``, keyed by its path (ModelOutputs are Mappings)."""
    found: dict[str, torch.Tensor] = {}
    if isinstance(outputs, torch.Tensor):
        found[prefix] = outputs
    elif isinstance(outputs, Mapping):
        for key, value in outputs.items():
            found.update(flatten_outputs(value, f"{prefix}.{key}"))
    elif isinstance(outputs, (list, tuple)):
        for index, value in enumerate(outputs):
            found.update(flatten_outputs(value, f"{prefix}[{index}]"))
    return found


def _to_fp64(value: Any) -> Any:
    """Floating tensors cast to float64; integer tensors and everything else kept."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, Mapping):
        return {key: _to_fp64(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_fp64(item) for item in value)
    return value


def fp64_reference(model: torch.nn.Module, inputs: Any) -> tuple[Any | None, str | None]:
    """The eager model's outputs computed in float64 by a deep copy of it, on float64 inputs (a dict as keyword
    arguments, a tuple or list as positional ones, else the one argument): ``(outputs, None)``, or ``(None,
    "ExceptionType: message")`` where it cannot run in float64 (out-of-memory included). ``model`` is left as it was.
    """
    replica = None
    try:
        replica = copy.deepcopy(model).to(torch.float64)
        cast = _to_fp64(inputs)
        with torch.no_grad():
            if isinstance(cast, Mapping):
                outputs = replica(**cast)
            elif isinstance(cast, (list, tuple)):
                outputs = replica(*cast)
            else:
                outputs = replica(cast)
        return outputs, None
    except Exception as exc:  # noqa: BLE001 - any failure means "no fp64 reference"
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return None, f"{type(exc).__name__}: {message}"[:300].rstrip(": ")
    finally:
        del replica
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def _rmse(reference: torch.Tensor, values: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(reference - values))))


def _multiplier(tolerance: Tolerance, tensor: torch.Tensor) -> float:
    small = (tensor.numel() < SMALL_TENSOR_NUMEL or tolerance.tol >= LARGE_TOL
             or (tensor.ndim == 4 and tensor.shape[-1] == tensor.shape[-2] == 1))
    return max(tolerance.multiplier, SMALL_TENSOR_MULTIPLIER) if small else tolerance.multiplier


def _non_finite(tensor: torch.Tensor) -> str:
    return f"{int(torch.isnan(tensor).sum())} NaN, {int(torch.isinf(tensor).sum())} inf"


def _judge(eager: torch.Tensor, compiled: torch.Tensor, fp64: torch.Tensor | None,
           tolerance: Tolerance) -> dict[str, Any]:
    """One tensor's verdict (``problem``) and diagnostics. ``budget_used`` is RMSE(compiled,
    fp64) over its limit, or without fp64 the largest |c - e| / (tol + tol |e|): above 1 is
    over the limit (a tensor still passes the RMSE test when it is allclose)."""
    if eager.shape != compiled.shape:
        return {"problem": f"shape {tuple(compiled.shape)} != {tuple(eager.shape)}"}
    if eager.dtype != compiled.dtype:
        return {"problem": f"dtype {compiled.dtype} != {eager.dtype}"}
    if not eager.is_floating_point():
        if torch.equal(eager, compiled.to(eager.device)):
            return {"judged_by": "equality"}
        return {"judged_by": "equality", "problem": "integer or boolean values differ"}
    if eager.numel() == 0:
        return {"judged_by": "equality"}
    ref = eager.detach().to(torch.float64)
    cand = compiled.detach().to(device=ref.device, dtype=torch.float64)
    if not torch.isfinite(ref).all():
        return {"problem": f"eager output is not finite ({_non_finite(ref)}): "
                           "the reference is broken, nothing can be judged against it"}
    if not torch.isfinite(cand).all():
        return {"problem": f"compiled output is not finite where eager is ({_non_finite(cand)}): "
                           "NaN or inf in different places"}
    tol = tolerance.tol
    abs_err = (cand - ref).abs()
    found: dict[str, Any] = {"max_abs_err": float(abs_err.max()),
                             "allclose": torch.allclose(cand, ref, atol=tol, rtol=tol),
                             "eager_max_abs": float(ref.abs().max())}  # below tol, allclose cannot fail
    if fp64 is None or fp64.shape != eager.shape:
        found["judged_by"] = "allclose"
        found["budget_used"] = float((abs_err / (tol + tol * ref.abs())).max())
        if not found["allclose"]:
            found["problem"] = (f"not allclose (atol = rtol = {tol:g}, max abs err "
                                f"{found['max_abs_err']:.3g}) and no float64 reference")
        return found
    found["judged_by"] = "allclose or rmse-vs-fp64"
    gold = fp64.detach().to(device=ref.device, dtype=torch.float64)
    if not torch.isfinite(gold).all():
        found["budget_used"] = math.inf
        if not found["allclose"]:
            found["problem"] = (f"not allclose (atol = rtol = {tol:g}) and the float64 "
                                f"reference is not finite ({_non_finite(gold)})")
        return found
    rmse_eager, rmse_compiled = _rmse(gold, ref), _rmse(gold, cand)
    multiplier = _multiplier(tolerance, eager)
    limit = multiplier * rmse_eager + tol / 10.0
    found.update(rmse_eager=rmse_eager, rmse_compiled=rmse_compiled, multiplier=multiplier,
                 rmse_ratio=(rmse_compiled / rmse_eager if rmse_eager > 0
                             else (0.0 if rmse_compiled == 0 else math.inf)),
                 budget_used=rmse_compiled / limit)
    if not found["allclose"] and rmse_compiled > limit:
        found["problem"] = (f"not allclose (atol = rtol = {tol:g}) and RMSE vs float64 "
                            f"{rmse_compiled:.3g} > {multiplier:g} x eager's {rmse_eager:.3g}"
                            f" + {tol / 10:g}")
    return found


def _can_fail(judged: dict[str, dict[str, Any]], tol: float, problems: list[str]) -> bool:
    """Whether the gate could have failed: a problem was found, or some output could differ beyond the tolerance
    (a floating one whose eager values reach ``tol``, an integer one judged by equality). Where every floating
    output of eager lies below ``tol`` (random weights make MobileNet's logits about 1e-25), allclose passes any
    compiled output of their scale, zeros included, and the RMSE test is only a second way to pass."""
    return bool(problems) or any(found.get("eager_max_abs", math.inf) >= tol for found in judged.values())


def _finite_or_none(value: Any) -> Any:
    return value if not isinstance(value, float) or math.isfinite(value) else None


def _rule(tolerance: Tolerance, reference: str) -> str:
    allclose = f"allclose to eager (atol = rtol = {tolerance.tol:g})"
    if reference != REFERENCE_FP64:
        return allclose + " alone"
    return (f"{allclose}, or RMSE vs float64 <= {tolerance.multiplier:g} (small tensors "
            f"{max(tolerance.multiplier, SMALL_TENSOR_MULTIPLIER):g}) x eager's + {tolerance.tol / 10:g}")


def _tolerance_block(key: str) -> dict[str, Any]:
    tolerance = TOLERANCES[key]
    return {"key": key, "tol": tolerance.tol, "multiplier": tolerance.multiplier,
            "small_tensor_multiplier": SMALL_TENSOR_MULTIPLIER, "small_tensor_numel": SMALL_TENSOR_NUMEL,
            "source": TOLERANCE_SOURCES[key]}


def unjudged(dtype: str | torch.dtype, tf32: bool, reason: str) -> dict[str, Any]:
    """The parity block of a cell whose gate could not run at all (``reason``): judged by nothing."""
    key = tolerance_key(dtype, tf32)
    return {"parity": None, "method": None, "reference": REFERENCE_NONE, "reference_note": reason, "rule": None,
            "dtype": parse_dtype(dtype)[0], "tf32": bool(tf32), "tolerance": _tolerance_block(key),
            "worst_tensor": None, "rmse_ratio": None, "problem_count": 0, "problems": [], "can_fail": None,
            "output_scale": None}


def compare_outputs(eager: Any, compiled: Any, dtype: str | torch.dtype = "float32", *,
                    tf32: bool = False, fp64: Any = None,
                    fp64_missing: str | None = None) -> dict[str, Any]:
    """Judge ``compiled`` against ``eager`` (and ``fp64``, from ``fp64_reference``); ``dtype`` and ``tf32`` (TF32
    allowed for the run) pick the tolerance. ``fp64=None`` falls back to allclose alone; ``fp64_missing`` is why."""
    key = tolerance_key(dtype, tf32)
    tolerance = TOLERANCES[key]
    eager_t, compiled_t = flatten_outputs(eager), flatten_outputs(compiled)
    gold_t = flatten_outputs(fp64) if fp64 is not None else {}
    problems: list[str] = []
    if set(eager_t) != set(compiled_t):
        differ = sorted(set(eager_t) ^ set(compiled_t))
        problems.append(f"outputs differ in structure: {', '.join(differ[:5])}")
    judged: dict[str, dict[str, Any]] = {}
    for path in sorted(set(eager_t) & set(compiled_t)):
        judged[path] = _judge(eager_t[path], compiled_t[path], gold_t.get(path), tolerance)
        if "problem" in judged[path]:
            problems.append(f"{path}: {judged[path]['problem']}")
    floating = {path: found for path, found in judged.items() if "budget_used" in found}

    def badness(path: str) -> tuple[bool, float]:  # failures first, then the most budget used
        return "problem" in judged[path], judged[path].get("budget_used", -1.0)

    unmatched = [p for p, found in floating.items() if found["judged_by"] == "allclose"]
    # float64 judged the cell where it judged a floating tensor (or there was none to judge)
    reference = REFERENCE_FP64 if fp64 is not None and (len(unmatched) < len(floating) or not floating) \
        else REFERENCE_EAGER
    if fp64 is not None:
        note = f"no float64 counterpart, judged by allclose: {', '.join(unmatched[:5])}" if unmatched else None
    else:
        note = fp64_missing or "no float64 reference given"
    ranked = sorted(judged, key=badness, reverse=True)
    worst = ranked[0] if ranked else None
    worst_found = judged[worst] if worst is not None else {}
    per_tensor = {path: {name: _finite_or_none(value) for name, value in judged[path].items()}
                  for path in ranked[:MAX_PER_TENSOR]}
    return {
        "parity": "fail" if problems else "pass",
        "method": METHOD if reference == REFERENCE_FP64 else METHOD_ALLCLOSE_ONLY,
        "reference": reference,
        "reference_note": note,
        "rule": _rule(tolerance, reference),
        "dtype": parse_dtype(dtype)[0],
        "tf32": bool(tf32),
        "tolerance": _tolerance_block(key),
        "tensors": len(eager_t),
        "max_abs_err": max((f["max_abs_err"] for f in floating.values()), default=None),
        "worst_tensor": worst,
        "rmse_eager": _finite_or_none(worst_found.get("rmse_eager")),
        "rmse_compiled": _finite_or_none(worst_found.get("rmse_compiled")),
        "rmse_ratio": _finite_or_none(worst_found.get("rmse_ratio")),
        "per_tensor": per_tensor,
        "problem_count": len(problems),
        "problems": problems[:MAX_PROBLEMS],
        "can_fail": _can_fail(judged, tolerance.tol, problems),
        "output_scale": max((found["eager_max_abs"] for found in judged.values() if "eager_max_abs" in found),
                            default=None),
    }
