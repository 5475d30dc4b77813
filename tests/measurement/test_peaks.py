import json
import subprocess
import sys

import pytest

from bench_utils.measurement.peaks import (DTYPES, FP64_TFLOPS, MEMORY_BANDWIDTH_GBS, PEAK_TFLOPS, gpu_key,
                                          normalize_dtype, peak_tflops, percent_of_peak)

# Names as NVML / torch.cuda.get_device_name report them.
NAMES = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA A100-SXM4-80GB": "A100 SXM",
    "NVIDIA A100-SXM4-40GB": "A100 SXM",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe",
    "NVIDIA A100 80GB PCIe": "A100 PCIe",
    "NVIDIA L4": "L4",
    "Tesla T4": "T4",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-PCIE-32GB": "V100 PCIe",
    "Tesla V100S-PCIE-32GB": "V100S PCIe",
}


@pytest.mark.parametrize("name,key", sorted(NAMES.items()))
def test_each_reported_name_resolves(name, key):
    assert gpu_key(name) == key
    # case and spacing do not matter
    assert gpu_key(f"  {name.upper()} ") == key
    assert peak_tflops(name, "float16", tf32=False) == PEAK_TFLOPS[key]["float16"] > 0


def test_every_gpu_has_a_bandwidth_and_a_float64_peak_from_its_datasheet():
    assert set(MEMORY_BANDWIDTH_GBS) == set(FP64_TFLOPS) == set(PEAK_TFLOPS)
    assert MEMORY_BANDWIDTH_GBS[gpu_key("NVIDIA H100 80GB HBM3")] == 3350.0  # H100 SXM: 3.35 TB/s
    assert MEMORY_BANDWIDTH_GBS[gpu_key("NVIDIA H200")] == 4800.0 and MEMORY_BANDWIDTH_GBS["L4"] == 300.0
    assert MEMORY_BANDWIDTH_GBS[gpu_key("NVIDIA A100-SXM4-80GB")] == 1555.0  # 40 GB's figure: the names do not tell
    # float64 runs far below float32 on every part; L4 and T4 at their architectures' 1/64 and 1/32
    assert all(FP64_TFLOPS[key] < PEAK_TFLOPS[key]["float32"] for key in PEAK_TFLOPS)
    assert FP64_TFLOPS["L4"] == pytest.approx(30.3 / 64) and FP64_TFLOPS["H100 SXM"] == 34.0


@pytest.mark.parametrize("name", [
    None, "", "cpu", "Intel(R) Xeon(R) Platinum 8480+", "AMD EPYC 9654", "x86_64",
    "NVIDIA GH200 480GB",      # Grace Hopper: not an H200
    "NVIDIA L40S", "NVIDIA L40", "NVIDIA A10G", "NVIDIA A10",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a slice of a GPU
    "Tesla V100-SXM3-32GB", "NVIDIA GeForce RTX 4090", "AMD Instinct MI300X",
])
def test_cpus_and_unknown_gpus_have_no_peak(name):
    assert gpu_key(name) is None
    for dtype in DTYPES:
        assert peak_tflops(name, dtype, tf32=True) is None


def test_datasheet_dense_figures():
    h100 = "NVIDIA H100 80GB HBM3"
    assert peak_tflops(h100, "float32", tf32=False) == 67.0
    assert peak_tflops(h100, "tf32", tf32=False) == 494.5
    assert peak_tflops(h100, "bfloat16", tf32=False) == 989.5
    assert peak_tflops("NVIDIA H200", "float16", tf32=False) == 989.5
    assert peak_tflops("NVIDIA H100 PCIe", "bfloat16", tf32=False) == 756.5
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "bfloat16", tf32=False) == 312.0
    assert peak_tflops("NVIDIA A100-PCIE-40GB", "tf32", tf32=False) == 156.0
    assert peak_tflops("NVIDIA L4", "float16", tf32=False) == 121.0
    assert peak_tflops("Tesla T4", "float16", tf32=False) == 65.0
    assert peak_tflops("Tesla V100-SXM2-16GB", "float16", tf32=False) == 125.0
    # no format on the hardware: None, not a number
    assert peak_tflops("Tesla T4", "bfloat16", tf32=False) is None
    assert peak_tflops("Tesla V100-SXM2-16GB", "tf32", tf32=False) is None
    # dense: half the datasheet's 2:4-sparsity figures (H100 SXM BF16 1,979*, L4 TF32 120*)
    assert PEAK_TFLOPS["H100 SXM"]["bfloat16"] == 1979 / 2
    assert PEAK_TFLOPS["L4"]["tf32"] == 120 / 2


def test_tf32_switch_selects_the_tensor_core_figure_for_float32():
    name = "NVIDIA A100-SXM4-80GB"
    assert peak_tflops(name, "float32", tf32=False) == 19.5
    assert peak_tflops(name, "float32", tf32=True) == 156.0
    # the switch concerns float32 only
    assert peak_tflops(name, "float16", tf32=True) == peak_tflops(name, "float16", tf32=False) == 312.0
    # without TF32 hardware, float32 stays on CUDA cores whatever the switch says
    assert peak_tflops("Tesla T4", "float32", tf32=True) == 8.1
    assert peak_tflops("Tesla V100-PCIE-32GB", "float32", tf32=True) == 14.0


def test_dtype_spellings():
    assert normalize_dtype("torch.float16") == normalize_dtype("fp16") == normalize_dtype("half") == "float16"
    assert normalize_dtype("torch.bfloat16") == normalize_dtype("BF16") == "bfloat16"
    assert normalize_dtype("fp32") == normalize_dtype("float32") == "float32"
    assert normalize_dtype("float64") is None
    assert peak_tflops("NVIDIA L4", "torch.bfloat16", tf32=False) == 121.0
    assert peak_tflops("NVIDIA L4", "float64", tf32=False) is None


def test_torch_dtype_objects_are_read_by_name():
    torch = pytest.importorskip("torch")
    assert peak_tflops("NVIDIA H100 PCIe", torch.float32, tf32=True) == 378.0


def test_percent_of_peak():
    assert percent_of_peak(494.75, 989.5) == 50.0
    assert percent_of_peak(0.0, 100.0) == 0.0
    for achieved, peak in [(None, 100.0), (10.0, None), (10.0, 0.0), (-1.0, 100.0), (float("nan"), 1.0)]:
        assert percent_of_peak(achieved, peak) is None


def test_module_imports_no_torch():
    script = ("import json, sys; import bench_utils.measurement.peaks; "
              "print(json.dumps('torch' in sys.modules))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) is False
