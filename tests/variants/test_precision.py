import pytest
import torch

from bench_utils.variants.precision import (check_dtype_supported, configure_fp32_math, parse_dtype, tf32_in_force,
                                            tf32_policy)


@pytest.mark.parametrize("value, expected", [
    ("fp32", "float32"), ("float32", "float32"), (torch.float32, "float32"), ("FP16", "float16"),
    ("half", "float16"), ("bf16", "bfloat16"), (torch.bfloat16, "bfloat16")])
def test_parse_dtype(value, expected):
    name, dtype = parse_dtype(value)
    assert name == expected and dtype == getattr(torch, expected)


def test_unknown_dtypes_list_the_valid_ones():
    with pytest.raises(ValueError, match="unknown dtype 'int8': use one of float32, float16"):
        parse_dtype("int8")
    with pytest.raises(ValueError, match="unsupported dtype"):
        parse_dtype(torch.int64)


def test_default_policy_is_pytorchs_defaults_as_the_guide_ran():
    try:
        default = configure_fp32_math()
        # cuDNN may use TF32, matmuls may not: what a fresh PyTorch does
        assert default == {"tf32": "default", "tf32_matmul": False, "tf32_cudnn": True,
                           "float32_matmul_precision": "highest"}
        assert torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    finally:
        configure_fp32_math()


@pytest.mark.parametrize("policy, matmul, cudnn, precision", [
    ("strict", False, False, "highest"), ("on", True, True, "high"),
    (False, False, False, "highest"), (True, True, True, "high"),  # the former boolean setting
])
def test_explicit_policies_set_and_report_what_is_in_force(policy, matmul, cudnn, precision):
    try:
        settings = configure_fp32_math(policy)
        assert settings["tf32"] == tf32_policy(policy)
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (matmul, cudnn)
        assert settings["float32_matmul_precision"] == torch.get_float32_matmul_precision() == precision
    finally:
        configure_fp32_math()


def test_unknown_policy_is_refused_and_tf32_applies_only_to_cuda_fp32():
    with pytest.raises(ValueError, match="tf32 policy 'off'"):
        configure_fp32_math("off")
    settings = {"tf32_matmul": False, "tf32_cudnn": True}  # PyTorch's defaults
    assert tf32_in_force(settings, torch.device("cuda"), "float32") == {"matmul": False, "convolution": True}
    none = {"matmul": False, "convolution": False}
    assert tf32_in_force(settings, torch.device("cpu"), "float32") == none
    assert tf32_in_force(settings, torch.device("cuda"), "float16") == none


def test_supported_dtypes_pass_on_cpu():
    check_dtype_supported("float32", "cpu")
    check_dtype_supported("bfloat16", "cpu")
