"""The accuracy gate: does the compiled model still compute what the eager one does?

Every output tensor of the compiled model is compared with the eager model's on the
same inputs, in float64: maximum absolute error, relative error (max |c - e| over
max |e|, per tensor) and cosine similarity. A cell passes when, for every tensor,
the relative error and the cosine similarity are within the dtype's tolerance
below, integer outputs are equal, and NaNs appear in the same places. A failing
cell keeps its timing and is flagged wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import math
from typing import Any

import torch


@dataclass(frozen=True)
class Tolerance:
    max_rel_err: float
    min_cosine: float


# The one place tolerances are stated (about 1e-3 for fp32, looser for half precisions).
TOLERANCES = {
    "float32": Tolerance(max_rel_err=1e-3, min_cosine=0.9999),
    "float16": Tolerance(max_rel_err=1e-2, min_cosine=0.999),
    "bfloat16": Tolerance(max_rel_err=5e-2, min_cosine=0.99),
}


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


def _compare_tensor(reference: torch.Tensor, candidate: torch.Tensor) -> dict[str, Any]:
    if reference.shape != candidate.shape:
        return {"problem": f"shape {tuple(candidate.shape)} != {tuple(reference.shape)}"}
    if not reference.is_floating_point():
        equal = torch.equal(reference, candidate.to(reference.device))
        return {} if equal else {"problem": "integer or boolean values differ"}
    ref = reference.detach().to(torch.float64)
    cand = candidate.detach().to(device=ref.device, dtype=torch.float64)
    ref_nan, cand_nan = torch.isnan(ref), torch.isnan(cand)
    if not torch.equal(ref_nan, cand_nan):
        return {"problem": "NaN in different places"}
    ref, cand = ref.masked_fill(ref_nan, 0.0), cand.masked_fill(cand_nan, 0.0)
    if not (torch.isfinite(ref).all() and torch.isfinite(cand).all()):
        if not torch.equal(ref, cand):
            return {"problem": "infinite values differ"}
        ref, cand = torch.nan_to_num(ref), torch.nan_to_num(cand)
    abs_err = float((cand - ref).abs().max()) if ref.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    rel_err = abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else math.inf)
    ref_norm, cand_norm = float(ref.norm()), float(cand.norm())
    if ref_norm == 0 and cand_norm == 0:
        cosine = 1.0
    elif ref_norm == 0 or cand_norm == 0:
        cosine = 0.0
    else:
        cosine = float((ref.flatten() @ cand.flatten()) / (ref_norm * cand_norm))
    return {"max_abs_err": abs_err, "max_rel_err": rel_err, "cosine": min(cosine, 1.0)}


def compare_outputs(reference: Any, candidate: Any, dtype: str = "float32") -> dict[str, Any]:
    """Errors of ``candidate`` against ``reference`` and the verdict ``parity``."""
    tolerance = TOLERANCES[dtype]
    ref_tensors, cand_tensors = flatten_outputs(reference), flatten_outputs(candidate)
    problems: list[str] = []
    if set(ref_tensors) != set(cand_tensors):
        missing = sorted(set(ref_tensors) ^ set(cand_tensors))
        problems.append(f"outputs differ in structure: {', '.join(missing[:5])}")
    max_abs, max_rel, min_cos, worst = 0.0, 0.0, 1.0, None
    for path in sorted(set(ref_tensors) & set(cand_tensors)):
        result = _compare_tensor(ref_tensors[path], cand_tensors[path])
        if "problem" in result:
            problems.append(f"{path}: {result['problem']}")
            continue
        if "max_rel_err" not in result:
            continue
        max_abs = max(max_abs, result["max_abs_err"])
        if result["max_rel_err"] > tolerance.max_rel_err or result["cosine"] < tolerance.min_cosine:
            problems.append(f"{path}: relative error {result['max_rel_err']:.3g}, "
                            f"cosine {result['cosine']:.6f}")
        if result["max_rel_err"] >= max_rel:
            max_rel, worst = result["max_rel_err"], path
        min_cos = min(min_cos, result["cosine"])
    return {
        "parity": "fail" if problems else "pass",
        "dtype": dtype,
        "tensors": len(ref_tensors),
        "max_abs_err": max_abs,
        "max_rel_err": max_rel if math.isfinite(max_rel) else None,
        "min_cosine": min_cos,
        "worst_tensor": worst,
        "tolerance": {"max_rel_err": tolerance.max_rel_err, "min_cosine": tolerance.min_cosine},
        "problems": problems[:10],
    }
