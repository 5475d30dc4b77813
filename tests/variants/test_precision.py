import warnings

import pytest
import torch

from bench_utils.environment.capture import runtime_settings
from bench_utils.variants.precision import (TF32_POLICIES, check_dtype_supported, configure_fp32_math,
                                            fp32_math_in_force, parse_dtype, tf32_in_force, tf32_policy)


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


# torch 2.9's notice (TORCH_WARN_ONCE in at::Context) on the legacy TF32 setters and getters
TORCH_2_9_NOTICE = ("Please use the new API settings to control TF32 behavior, such as "
                    "torch.backends.cudnn.conv.fp32_precision = 'tf32' or torch.backends.cuda.matmul.fp32_precision = "
                    "'ieee'. Old settings, e.g, torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn."
                    "allow_tf32 = True, allowTF32CuDNN() and allowTF32CuBLAS() will be deprecated after Pytorch 2.9.")


@pytest.fixture
def defaults_after():
    yield
    configure_fp32_math()


def _warning(function):
    def warned(*args):
        warnings.warn(TORCH_2_9_NOTICE, UserWarning)
        return function(*args)
    return warned


@pytest.fixture
def legacy_api_warns(monkeypatch, defaults_after):
    """Every legacy TF32 setter and getter warns, as torch 2.9's do."""
    for name in ("_set_cublas_allow_tf32", "_get_cublas_allow_tf32", "_set_float32_matmul_precision",
                 "_get_float32_matmul_precision"):
        monkeypatch.setattr(torch._C, name, _warning(getattr(torch._C, name)))
    cudnn_flag = type(torch.backends.cudnn).__dict__["allow_tf32"]
    monkeypatch.setattr(cudnn_flag, "getter", _warning(cudnn_flag.getter))
    monkeypatch.setattr(cudnn_flag, "setter", _warning(cudnn_flag.setter))


@pytest.mark.parametrize("policy", ["on", "strict", "default"])
def test_setting_and_reading_print_no_deprecation_warning(legacy_api_warns, policy):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = configure_fp32_math(policy)
        assert fp32_math_in_force()["tf32_matmul"] == settings["tf32_matmul"] == (policy == "on")
        runtime_settings()  # every record's environment reads them too


def test_the_per_backend_api_is_the_one_set_and_torchs_own_legacy_readers_still_work(defaults_after):
    # inductor reads the legacy getters (autotuning's cache keys, triton's conv templates): they raise when
    # the per-backend setters alone moved away from the legacy flags, so both are set, in step
    for policy, (matmul, cudnn) in TF32_POLICIES.items():
        settings = configure_fp32_math(policy)
        assert torch.backends.cuda.matmul.fp32_precision == ("tf32" if matmul else "ieee")
        assert torch.backends.cudnn.conv.fp32_precision == torch.backends.cudnn.rnn.fp32_precision == (
            "tf32" if cudnn else "ieee")
        assert torch.get_float32_matmul_precision() == settings["float32_matmul_precision"]
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (matmul, cudnn)


def test_reading_never_calls_the_legacy_getters_which_raise_once_the_apis_disagree(defaults_after):
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # as a library might, through the per-backend API alone
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        torch.get_float32_matmul_precision()  # what recent torch does
    in_force = fp32_math_in_force()
    assert (in_force["tf32_matmul"], in_force["tf32_cudnn"], in_force["float32_matmul_precision"]) == (
        True, False, "high")
    assert runtime_settings()["tf32_matmul"] is True


@pytest.fixture
def torch_without_the_per_backend_api(monkeypatch, defaults_after):
    """torch before 2.9: no ``fp32_precision`` attributes; using them would fail the test."""
    def absent(*args):
        raise AttributeError("Unknown attribute fp32_precision")

    def forbidden(*args):
        raise AssertionError("the per-backend API was used on a torch without it")

    monkeypatch.setattr(torch._C, "_get_fp32_precision_getter", absent)
    monkeypatch.setattr(torch._C, "_set_fp32_precision_setter", forbidden)


def test_an_older_torch_is_set_and_read_through_the_legacy_flags(torch_without_the_per_backend_api):
    assert fp32_math_in_force()["fp32_precision"] is None
    settings = configure_fp32_math("on")
    assert settings == {"tf32": "on", "tf32_matmul": True, "tf32_cudnn": True, "float32_matmul_precision": "high"}
    assert torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "high"
    assert configure_fp32_math("strict")["tf32_cudnn"] is False and not torch.backends.cudnn.allow_tf32
