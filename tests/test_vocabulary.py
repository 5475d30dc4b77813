import argparse
import json

import pytest

from bench_utils.vocabulary import (AOT_MODES, COMPILED_MODE_ORDER, CUDA_GRAPH_MODES, CompileMode, DType, Status,
                                    Tf32Policy, check_mode, check_shapes, dtype_name, names, tf32_policy)


def test_a_name_is_its_string_in_records_and_comparisons():
    record = {"compile_mode": CompileMode.REDUCE_OVERHEAD, "status": Status.OOM}
    assert json.loads(json.dumps(record)) == {"compile_mode": "reduce-overhead", "status": "oom"}
    assert CompileMode.EAGER == "eager" and "oom" in (Status.OK, Status.OOM)
    assert type(names(CompileMode)[0]) is str and names(Status) == ("ok", "oom", "error", "skipped")


def test_the_groups_of_modes_are_what_torch_does_with_each_mode():
    from torch._inductor import list_mode_options  # the vocabulary loads no torch; its test checks it against torch

    inductor = list_mode_options()  # torch.compile's modes and the inductor options each turns on
    torch_compiled = {mode for mode in CompileMode if mode != CompileMode.EAGER and mode not in AOT_MODES}
    assert torch_compiled <= set(inductor) and not set(AOT_MODES) & set(inductor)
    assert set(CUDA_GRAPH_MODES) == {mode for mode in torch_compiled if inductor[mode].get("triton.cudagraphs")}


def test_the_order_of_compiled_modes_leaves_eager_out():
    assert CompileMode.EAGER not in COMPILED_MODE_ORDER and COMPILED_MODE_ORDER[0] == "default"
    assert len(COMPILED_MODE_ORDER) == len(CompileMode) - 1


def test_a_wrong_name_is_one_line_with_the_closest_valid_one():
    with pytest.raises(ValueError, match="Did you mean 'reduce-overhead'"):
        check_mode("reduce_overhead")
    with pytest.raises(ValueError, match="Did you mean 'dynamic'"):
        check_shapes("dynamc")
    with pytest.raises(ValueError, match="unknown dtype 'int8': use one of float32"):
        dtype_name("int8")
    with pytest.raises(ValueError, match="unknown tf32 policy 'yes'"):
        tf32_policy("yes")


def test_aliases_and_booleans_map_to_names():
    assert dtype_name("FP16") is DType.FLOAT16 and dtype_name("bf16") is DType.BFLOAT16
    assert tf32_policy(True) is Tf32Policy.ON and tf32_policy(False) is Tf32Policy.STRICT
    assert tf32_policy("default") is Tf32Policy.DEFAULT


def test_argparse_choices_from_names_show_plain_strings_in_errors(capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=names(CompileMode))
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "fast"])
    assert "'max-autotune'" in capsys.readouterr().err
