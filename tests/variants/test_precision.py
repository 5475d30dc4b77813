import pytest
import torch

from bench_utils.variants.precision import check_dtype_supported, configure_fp32_math, parse_dtype


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


def test_tf32_is_off_unless_asked_and_is_reported():
    try:
        on = configure_fp32_math(True)
        assert on["tf32"] and torch.backends.cuda.matmul.allow_tf32 and on["float32_matmul_precision"] == "high"
        off = configure_fp32_math()
        assert off == {"tf32": False, "tf32_matmul": False, "tf32_cudnn": False,
                       "float32_matmul_precision": "highest"}
    finally:
        configure_fp32_math(False)


def test_supported_dtypes_pass_on_cpu():
    check_dtype_supported("float32", "cpu")
    check_dtype_supported("bfloat16", "cpu")
