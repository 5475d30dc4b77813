"""Vendor peak throughput per GPU and dtype, to put achieved TFLOP/s against (docs/measurement.md).

NVIDIA datasheet peaks in dense TFLOP/s per GPU (boost clock); a datasheet's 2:4-sparsity figure ("*") is halved:
sparsity needs pruned weights, which no model here has. ``float32`` is CUDA cores, ``tf32``, ``float16`` and
``bfloat16`` tensor cores; None where the GPU lacks the format. GPU names are matched as NVML and torch spell them;
a MIG slice has no peak. No torch: the report reads it.
"""

from __future__ import annotations

import math
import re

FLOAT32, TF32, FLOAT16, BFLOAT16 = "float32", "tf32", "float16", "bfloat16"
DTYPES = (FLOAT32, TF32, FLOAT16, BFLOAT16)


def _row(fp32: float, tf32: float | None, fp16: float, bf16: float | None) -> dict[str, float | None]:
    return {FLOAT32: fp32, TF32: tf32, FLOAT16: fp16, BFLOAT16: bf16}


# Dense TFLOP/s, keyed by a canonical GPU name.
PEAK_TFLOPS: dict[str, dict[str, float | None]] = {
    # NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): FP32 67; TF32 989*,
    # BF16 1,979*, FP16 1,979* (* with sparsity) -> 494.5 / 989.5 dense.
    "H100 SXM": _row(67.0, 494.5, 989.5, 989.5),
    # Same datasheet, H100 NVL column (per GPU): FP32 60; TF32 835*, BF16/FP16 1,671*.
    "H100 NVL": _row(60.0, 417.5, 835.5, 835.5),
    # H100 datasheet (2022 edition, H100 PCIe column): FP32 51; TF32 756*, BF16/FP16 1,513*.
    "H100 PCIe": _row(51.0, 378.0, 756.5, 756.5),
    # NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): FP32 67; TF32 989*,
    # BF16/FP16 1,979*: the H100 SXM's compute with more memory.
    "H200 SXM": _row(67.0, 494.5, 989.5, 989.5),
    # Same datasheet, H200 NVL column: FP32 60; TF32 835*, BF16/FP16 1,671*.
    "H200 NVL": _row(60.0, 417.5, 835.5, 835.5),
    # NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5; TF32 156 (312*), BF16/FP16 312 (624*).
    # The datasheet gives the same peaks for 40 GB and 80 GB, SXM and PCIe (the PCIe
    # card's lower power limit shows in sustained clocks, not in the peak).
    "A100 SXM": _row(19.5, 156.0, 312.0, 312.0),
    "A100 PCIe": _row(19.5, 156.0, 312.0, 312.0),
    # NVIDIA L4 Tensor Core GPU datasheet: FP32 30.3; TF32 120*, BF16/FP16 242*.
    "L4": _row(30.3, 60.0, 121.0, 121.0),
    # NVIDIA T4 datasheet: FP32 8.1; mixed precision (FP16/FP32) 65; no TF32, no BF16.
    "T4": _row(8.1, None, 65.0, None),
    # NVIDIA V100 Tensor Core GPU datasheet: SXM2 FP32 15.7, tensor (FP16) 125;
    # PCIe 14 / 112; V100S PCIe 16.4 / 130. Volta has no TF32 or BF16.
    "V100 SXM2": _row(15.7, None, 125.0, None),
    "V100 PCIe": _row(14.0, None, 112.0, None),
    "V100S PCIe": _row(16.4, None, 130.0, None),
}

# Peak memory bandwidth in GB/s (10^9 bytes/s), from the same datasheets, for a roofline's memory side.
MEMORY_BANDWIDTH_GBS: dict[str, float] = {
    "H100 SXM": 3350.0,    # H100 datasheet, SXM: 80 GB HBM3, 3.35 TB/s
    "H100 NVL": 3900.0,    # H100 datasheet, NVL: 94 GB HBM3, 3.9 TB/s
    "H100 PCIe": 2000.0,   # H100 datasheet (2022), PCIe: 80 GB HBM2e, 2 TB/s
    "H200 SXM": 4800.0,    # H200 datasheet, SXM: 141 GB HBM3e, 4.8 TB/s
    "H200 NVL": 4800.0,    # H200 datasheet, NVL: 141 GB HBM3e, 4.8 TB/s
    # A100 datasheet: 80 GB SXM 2,039 GB/s, 80 GB PCIe 1,935 GB/s; the 40 GB parts 1,555 GB/s. The
    # names here do not tell 40 from 80 GB: the 40 GB figure, the slower, is the one kept.
    "A100 SXM": 1555.0,
    "A100 PCIe": 1555.0,
    "L4": 300.0,           # L4 datasheet: 24 GB GDDR6, 300 GB/s
    "T4": 320.0,           # T4 datasheet: 16 GB GDDR6, 320+ GB/s
    "V100 SXM2": 900.0,    # V100 datasheet: 900 GB/s (SXM2 and PCIe)
    "V100 PCIe": 900.0,
    "V100S PCIe": 1134.0,  # V100S datasheet: 1,134 GB/s
}

# Peak float64 TFLOP/s (CUDA cores; the accuracy gate's float64 reference runs there), same datasheets.
# L4 and T4 datasheets give none: Ada runs FP64 at 1/64 and Turing at 1/32 of FP32, by architecture.
FP64_TFLOPS: dict[str, float] = {
    "H100 SXM": 34.0, "H100 NVL": 30.0, "H100 PCIe": 26.0, "H200 SXM": 34.0, "H200 NVL": 30.0,
    "A100 SXM": 9.7, "A100 PCIe": 9.7, "L4": 30.3 / 64, "T4": 8.1 / 32,
    "V100 SXM2": 7.8, "V100 PCIe": 7.0, "V100S PCIe": 8.2,
}

# (family, variant) rules, most specific first; a family is a whole word so that
# "GH200" is not an H200, "L40S" not an L4 and "V100S" not a V100.
_RULES: list[tuple[str, str | None, str]] = [
    (r"h100", r"nvl", "H100 NVL"),
    (r"h100", r"pcie", "H100 PCIe"),
    (r"h100", None, "H100 SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM5 part
    (r"h200", r"nvl", "H200 NVL"),
    (r"h200", None, "H200 SXM"),  # "NVIDIA H200"
    (r"a100", r"pcie", "A100 PCIe"),
    (r"a100", None, "A100 SXM"),  # SXM4 names; same figures as PCIe anyway
    (r"l4", None, "L4"),
    (r"t4", None, "T4"),
    (r"v100s", r"pcie", "V100S PCIe"),
    (r"v100", r"pcie", "V100 PCIe"),
    # SXM2 and the DGX Station's DGXS part share clocks; SXM3 (DGX-2) runs faster
    # than any datasheet figure here, so it stays unknown rather than understated.
    (r"v100", r"sxm2|dgxs", "V100 SXM2"),
]

_DTYPE_ALIASES = {
    "float32": FLOAT32, "fp32": FLOAT32, "float": FLOAT32,
    "tf32": TF32, "tensorfloat32": TF32,
    "float16": FLOAT16, "fp16": FLOAT16, "half": FLOAT16,
    "bfloat16": BFLOAT16, "bf16": BFLOAT16,
}


def _words(name: str) -> str:
    # "NVIDIA A100-SXM4-80GB" -> "nvidia a100 sxm4 80gb": one spelling for every source.
    return " ".join(re.split(r"[\s_\-/()]+", name.strip().lower()))


def gpu_key(gpu_name: str | None) -> str | None:
    """The ``PEAK_TFLOPS`` key for a device name, or None (a CPU, an unknown or unlisted GPU)."""
    if not gpu_name:
        return None
    words = _words(gpu_name)
    if re.search(r"\bmig\b", words):
        return None  # a MIG slice has a fraction of the GPU's units: no datasheet peak
    for family, variant, key in _RULES:
        if not re.search(rf"\b{family}\b", words):
            continue
        if variant is None or re.search(rf"\b(?:{variant})", words):
            return key
    return None


def normalize_dtype(dtype: object) -> str | None:
    """``"float16"`` for "float16", "fp16", "half" or ``torch.float16`` (read by name: no torch here)."""
    text = str(dtype).strip().lower()
    text = text.removeprefix("torch.")
    return _DTYPE_ALIASES.get(text)


def peak_tflops(gpu_name: str | None, dtype: object, tf32: bool) -> float | None:
    """Dense peak TFLOP/s of ``gpu_name`` in ``dtype``; None for a CPU, an unknown GPU or dtype. With ``tf32``
    (float32 work may use TF32 tensor cores) a float32 peak is the TF32 figure, where the GPU has one."""
    key = gpu_key(gpu_name)
    name = normalize_dtype(dtype)
    if key is None or name is None:
        return None
    row = PEAK_TFLOPS[key]
    if name == FLOAT32 and tf32 and row[TF32] is not None:
        return row[TF32]
    return row[name]


def percent_of_peak(achieved_tflops: float | None, peak: float | None) -> float | None:
    """``100 * achieved / peak``; None when either is missing or not a positive finite number."""
    if achieved_tflops is None or peak is None:
        return None
    if not (math.isfinite(achieved_tflops) and math.isfinite(peak)) or peak <= 0 or achieved_tflops < 0:
        return None
    return 100.0 * achieved_tflops / peak
