"""Precisions: names, the TF32 policy, and whether a device can run a dtype (docs/variants.md).

torch has two APIs for float32 math, the legacy flags and, from 2.9, the per-backend ``fp32_precision`` ones, and a
legacy getter raises once the two disagree: ``set_fp32_math`` sets them and ``environment.capture.fp32_math_in_force``
reads them; nothing else in the package touches either API.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping
import warnings

import torch

from ..errors import UserError
from ..environment.capture import fp32_math_in_force, fp32_precision_settings
from ..vocabulary import TF32_SWITCHES, DType, dtype_name, tf32_policy

DTYPES = {DType.FLOAT32: torch.float32, DType.FLOAT16: torch.float16, DType.BFLOAT16: torch.bfloat16}


def parse_dtype(value: str | torch.dtype) -> tuple[str, torch.dtype]:
    """('float16', torch.float16) from 'fp16', 'float16' or torch.float16."""
    if isinstance(value, torch.dtype):
        for name, dtype in DTYPES.items():
            if dtype == value:
                return name, dtype
        raise ValueError(f"unsupported dtype {value}: use one of {', '.join(DTYPES)}")
    name = dtype_name(value)
    return str(name), DTYPES[name]


TF32_POLICIES = TF32_SWITCHES  # policy -> (matmul, cuDNN) may use TF32; ``tf32_policy`` checks a name


# torch 2.9 warns, once a process, on every legacy TF32 call that the API "will be deprecated after
# Pytorch 2.9"; 2.11 and 2.14 no longer do. set_fp32_math still sets the legacy flags: silenced there.
_LEGACY_NOTICE = "Please use the new API settings to control TF32 behavior"


def set_fp32_math(tf32_matmul: bool, tf32_cudnn: bool,
                  fp32_precision: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Allow TF32 or not for cuBLAS matmuls and for cuDNN (convolutions and RNNs); return ``fp32_math_in_force()``.

    The legacy flags first, as inductor still reads them, then, where torch has them, the per-backend settings:
    ``fp32_precision`` where given (another process's ``fp32_math_in_force()["fp32_precision"]``), else "tf32" or
    "ieee"."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LEGACY_NOTICE)
        torch.backends.cuda.matmul.allow_tf32 = tf32_matmul  # float32_matmul_precision "high" or "highest"
        torch.backends.cudnn.allow_tf32 = tf32_cudnn
    if fp32_precision_settings() is not None:
        wanted = dict(fp32_precision or {"cuda.matmul": "tf32" if tf32_matmul else "ieee",
                                         "cudnn.conv": "tf32" if tf32_cudnn else "ieee",
                                         "cudnn.rnn": "tf32" if tf32_cudnn else "ieee"})
        for path, value in wanted.items():
            backend: Any = functools.reduce(getattr, path.split("."), torch.backends)  # torch.backends.cuda.matmul...
            backend.fp32_precision = value
    return fp32_math_in_force()


def configure_fp32_math(policy: str | bool = "default") -> dict[str, Any]:
    """Set the TF32 policy for matmuls and convolutions; return the settings now in force."""
    policy = tf32_policy(policy)
    in_force = set_fp32_math(*TF32_POLICIES[policy])
    in_force = {key: in_force[key] for key in ("tf32_matmul", "tf32_cudnn", "float32_matmul_precision")}
    return {"tf32": str(policy), **in_force}


def tf32_in_force(settings: dict[str, Any], device: torch.device, dtype: str) -> dict[str, bool]:
    """Which float32 work on ``device`` may carry TF32 rounding: ``matmul`` and ``convolution``
    (the accuracy gate loosens where either does; the peak follows each class)."""
    fp32_cuda = device.type == "cuda" and dtype == "float32"
    return {"matmul": fp32_cuda and bool(settings.get("tf32_matmul")),
            "convolution": fp32_cuda and bool(settings.get("tf32_cudnn"))}


def _probe(dtype: torch.dtype, device: torch.device) -> None:
    """The operations every vision model of the study needs, tiny, in ``dtype``."""
    x = torch.randn(1, 3, 8, 8, device=device).to(dtype)
    conv = torch.nn.Conv2d(3, 4, 3).to(device=device, dtype=dtype)
    y = conv(x).flatten(1)
    y = torch.nn.functional.layer_norm(y, y.shape[-1:])
    y = torch.nn.functional.gelu(y) @ y.T
    torch.softmax(y, dim=-1).sum().item()


@functools.lru_cache(maxsize=None)
def _support(dtype: torch.dtype, device: str) -> str | None:
    try:
        _probe(dtype, torch.device(device))
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def check_dtype_supported(dtype: str | torch.dtype, device: str | torch.device) -> None:
    """Raise UserError, in one line, when ``device`` cannot run ``dtype``."""
    name, resolved = parse_dtype(dtype)
    problem = _support(resolved, str(device))
    if problem:
        raise UserError(f"dtype {name} cannot run on {device} with this torch build "
                        f"({problem}); use float32 there, or a device that supports {name}")
