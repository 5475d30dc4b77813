import math

import pytest
import torch

from bench_utils.variants import modes as compile_module
from bench_utils.variants.parity import (METHOD, METHOD_ALLCLOSE_ONLY, TOLERANCES, compare_outputs,
                                         flatten_outputs, fp64_reference, tolerance_key, unjudged)


def outputs(scale=1.0):
    torch.manual_seed(0)
    return {"logits": torch.randn(2, 10) * scale, "boxes": torch.rand(2, 5, 4),
            "hidden": (torch.randn(2, 3), torch.randn(2, 3)), "labels": torch.tensor([1, 2])}


def gold_and_eager(n=4096, noise=1e-3, seed=0):
    """A float64 'truth' and an eager result off it by fp32-like accumulation noise."""
    generator = torch.Generator().manual_seed(seed)
    gold = torch.randn(n, dtype=torch.float64, generator=generator)
    eager = (gold + noise * torch.randn(n, dtype=torch.float64, generator=generator)).float()
    return gold, eager


def test_flatten_names_every_tensor():
    assert sorted(flatten_outputs(outputs())) == ["output.boxes", "output.hidden[0]",
                                                  "output.hidden[1]", "output.labels", "output.logits"]


def test_identical_outputs_pass_and_the_result_says_how_it_judged():
    gold = {key: (value.double() if not isinstance(value, tuple) else tuple(v.double() for v in value))
            for key, value in outputs().items()}
    result = compare_outputs(outputs(), outputs(), fp64=gold)
    assert result["parity"] == "pass" and result["max_abs_err"] == 0 and result["problems"] == []
    assert result["method"] == METHOD == "allclose or rmse-vs-fp64 (dynamo)"
    assert result["reference"] == "float64" and result["reference_note"] is None
    assert result["tensors"] == 5 and result["tolerance"]["tol"] == 1e-4
    assert result["tolerance"]["key"] == "float32" and result["tf32"] is False
    assert set(result["per_tensor"]) == set(flatten_outputs(outputs()))
    assert "max_rel_err" not in result and "min_cosine" not in result


def test_an_error_confined_to_small_elements_fails():
    # One large element hides the rest from max-abs over max-abs; RMSE against fp64 does not.
    gold = torch.randn(2000, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.01
    gold[0] = 100.0
    eager = gold.float()
    compiled = eager.clone()
    compiled[1:] += 1e-3  # 10 % of every small element
    result = compare_outputs({"logits": eager}, {"logits": compiled}, fp64={"logits": gold})
    assert result["parity"] == "fail" and result["worst_tensor"] == "output.logits"
    assert result["rmse_ratio"] is None or result["rmse_ratio"] > 100
    assert result["rmse_compiled"] > 1e-4 and "RMSE vs float64" in result["problems"][0]
    # allclose alone (no fp64 reference) catches it too: the tolerance is per element
    assert compare_outputs({"logits": eager}, {"logits": compiled})["parity"] == "fail"


def test_as_far_from_fp64_as_eager_passes_though_not_allclose_and_three_times_further_fails():
    gold, eager = gold_and_eager()
    generator = torch.Generator().manual_seed(7)
    near = (gold + 1e-3 * torch.randn(gold.shape, dtype=torch.float64, generator=generator)).float()
    far = (gold + 3e-3 * torch.randn(gold.shape, dtype=torch.float64, generator=generator)).float()
    assert not torch.allclose(near, eager, atol=1e-4, rtol=1e-4)
    passed = compare_outputs(eager, near, fp64=gold)
    assert passed["parity"] == "pass" and passed["rmse_ratio"] == pytest.approx(1.0, abs=0.1)
    assert passed["per_tensor"]["output"]["allclose"] is False
    assert passed["per_tensor"]["output"]["multiplier"] == 2.0
    failed = compare_outputs(eager, far, fp64=gold)
    assert failed["parity"] == "fail" and failed["rmse_ratio"] == pytest.approx(3.0, abs=0.3)


def test_small_tensors_get_dynamos_larger_multiplier():
    gold, eager = gold_and_eager(n=500)
    result = compare_outputs(eager, eager.clone(), fp64=gold)
    assert result["per_tensor"]["output"]["multiplier"] == 3.0


def test_all_nan_outputs_fail():
    nan = torch.full((2, 10), math.nan)
    for fp64 in (None, torch.zeros(2, 10, dtype=torch.float64)):
        result = compare_outputs({"logits": nan}, {"logits": nan.clone()}, fp64=fp64)
        assert result["parity"] == "fail"


def test_nan_or_inf_in_eager_fails_loudly_even_where_compiled_matches():
    for bad in (math.nan, math.inf):
        eager = outputs()
        eager["logits"][0, 0] = bad
        compiled = outputs()
        compiled["logits"][0, 0] = bad
        result = compare_outputs(eager, compiled)
        assert result["parity"] == "fail"
        assert "output.logits: eager output is not finite" in result["problems"][0]


def test_nan_in_different_places_fails():
    nan = outputs()
    nan["logits"][0, 0] = math.nan
    result = compare_outputs(outputs(), nan)
    assert result["parity"] == "fail" and "NaN" in result["problems"][0]


def test_tf32_runs_get_the_looser_tolerance():
    gold, eager = gold_and_eager(noise=1e-7)
    compiled = eager + 5e-4  # within TF32's 1e-3, outside strict fp32's 1e-4
    assert compare_outputs(eager, compiled, "float32", fp64=gold)["parity"] == "fail"
    result = compare_outputs(eager, compiled, "float32", tf32=True, fp64=gold)
    assert result["parity"] == "pass" and result["tolerance"]["key"] == "float32+tf32"
    assert result["tf32"] is True and result["tolerance"]["tol"] == 1e-3
    assert tolerance_key("fp16", tf32=True) == "float16"  # TF32 only concerns float32


def test_tolerances_loosen_with_precision():
    tols = [TOLERANCES[key].tol for key in ("float32", "float32+tf32", "float16", "bfloat16")]
    assert tols == sorted(tols) and tols[0] < tols[1] < tols[3]
    assert TOLERANCES["float16"].multiplier == TOLERANCES["bfloat16"].multiplier == 3.0
    assert TOLERANCES["float32"].multiplier == 2.0


def test_half_precision_rounding_passes_and_a_real_error_fails():
    gold = torch.randn(4096, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for dtype in (torch.float16, torch.bfloat16):
        eager = gold.to(dtype)
        step = torch.finfo(dtype).eps
        compiled = (eager.double() * (1 + step)).to(dtype)  # about one ulp off everywhere
        name = str(dtype).split(".")[1]
        assert compare_outputs(eager, compiled, name, fp64=gold)["parity"] == "pass"
        wrong = (eager.double() + 0.1).to(dtype)
        assert compare_outputs(eager, wrong, name, fp64=gold)["parity"] == "fail"


def test_structure_integer_shape_and_dtype_differences_fail():
    ref = outputs()
    missing = {k: v for k, v in outputs().items() if k != "boxes"}
    assert "structure" in compare_outputs(ref, missing)["problems"][0]
    labels = outputs()
    labels["labels"] = torch.tensor([1, 3])
    result = compare_outputs(ref, labels)
    assert result["parity"] == "fail" and "integer or boolean" in result["problems"][0]
    shape = outputs()
    shape["logits"] = shape["logits"][:, :5]
    assert "shape" in compare_outputs(ref, shape)["problems"][0]
    dtype = outputs()
    dtype["logits"] = dtype["logits"].double()
    assert "dtype" in compare_outputs(ref, dtype)["problems"][0]


def test_without_fp64_reference_it_falls_back_to_allclose_and_says_why():
    result = compare_outputs(outputs(), outputs(), fp64_missing="RuntimeError: no fp64 kernel")
    assert result["parity"] == "pass" and result["reference"] == "same-dtype"
    assert result["method"] == METHOD_ALLCLOSE_ONLY
    assert result["reference_note"] == "RuntimeError: no fp64 kernel"
    assert result["rmse_eager"] is None


def test_fp64_reference_of_a_tiny_hf_model(tiny_vit):
    model, inputs = tiny_vit
    before = {name: value.clone() for name, value in model.state_dict().items()}
    outputs_64, reason = fp64_reference(model, inputs)
    assert reason is None and outputs_64["logits"].dtype == torch.float64
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert inputs["pixel_values"].dtype == torch.float32
    with torch.no_grad():
        eager = model(**inputs)
    assert torch.allclose(outputs_64["logits"], eager["logits"].double(), atol=1e-4)


def test_fp64_reference_of_a_bare_tensor_model_keeps_integer_inputs():
    seen = []

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.linear = torch.nn.Embedding(5, 4), torch.nn.Linear(4, 3)

        def forward(self, x, ids):
            seen.append((x.dtype, ids.dtype, torch.is_grad_enabled()))
            return self.linear(x + self.embed(ids))

    model = Net()
    out, reason = fp64_reference(model, (torch.randn(2, 4), torch.tensor([1, 2])))
    assert reason is None and out.dtype == torch.float64
    assert seen == [(torch.float64, torch.int64, False)]
    assert model.linear.weight.dtype == torch.float32


def test_a_model_that_cannot_run_in_fp64_gives_none_and_a_reason():
    class Fp32Only(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x):
            if self.linear.weight.dtype != torch.float32:
                raise RuntimeError("expected float32 weights")
            return self.linear(x)

    model = Fp32Only()
    out, reason = fp64_reference(model, torch.randn(2, 4))
    assert out is None and reason == "RuntimeError: expected float32 weights"
    assert model(torch.randn(2, 4)).dtype == torch.float32


def test_compiled_tiny_model_passes_and_a_perturbed_compiled_model_fails(tiny_vit):
    model, inputs = tiny_vit
    gold, reason = fp64_reference(model, inputs)
    assert reason is None
    with torch.no_grad():
        reference = compile_module.clone_outputs(model(**inputs))
        compile_module.reset()
        compiled = compile_module.compile_model(model, "default", backend="aot_eager")
        result = compare_outputs(reference, compiled(**inputs), fp64=gold)
        assert result["parity"] == "pass" and result["reference"] == "float64"
        model.classifier.bias += 1e-3  # a deliberately (slightly) wrong model
        result = compare_outputs(reference, compiled(**inputs), fp64=gold)
    assert result["parity"] == "fail" and result["worst_tensor"] == "output.logits"
    assert result["rmse_compiled"] > 10 * result["rmse_eager"]


def test_tensors_without_a_float64_counterpart_are_judged_by_allclose_and_named():
    gold = {"logits": outputs()["logits"].double()}
    result = compare_outputs(outputs(), outputs(), fp64=gold)
    assert result["parity"] == "pass" and result["reference"] == "float64"
    assert result["per_tensor"]["output.logits"]["judged_by"] == "allclose or rmse-vs-fp64"
    assert result["per_tensor"]["output.boxes"]["judged_by"] == "allclose"
    assert result["per_tensor"]["output.labels"]["judged_by"] == "equality"
    assert "output.boxes" in result["reference_note"]


class NoFloat64(torch.nn.Module):
    """A model whose float64 copy cannot run: ``failure`` is raised when its weights are float64."""

    def __init__(self, failure):
        super().__init__()
        self.linear, self.failure = torch.nn.Linear(6, 3), failure

    def forward(self, features):
        if self.linear.weight.dtype == torch.float64:
            raise self.failure
        return self.linear(features)


@pytest.mark.parametrize("failure", [NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Double'"),
                                     torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")])
def test_a_float64_reference_that_fails_names_the_fallback_reference_and_rule(failure):
    torch.manual_seed(0)
    model, inputs = NoFloat64(failure).eval(), {"features": torch.randn(4, 6)}
    fp64, missing = fp64_reference(model, inputs)
    assert fp64 is None and missing.startswith(type(failure).__name__)
    eager = model(**inputs)
    result = compare_outputs(eager, eager.clone(), "float32", tf32=True, fp64=fp64, fp64_missing=missing)
    assert result["parity"] == "pass" and result["reference"] == "same-dtype" and result["reference_note"] == missing
    assert result["method"] == METHOD_ALLCLOSE_ONLY
    assert result["rule"] == "allclose to eager (atol = rtol = 0.001) alone"
    assert result["tolerance"]["key"] == "float32+tf32" and "TF32 allowed" in result["tolerance"]["source"]


def test_the_rule_with_a_float64_reference_and_a_float64_given_for_no_tensor():
    gold, eager = gold_and_eager()
    result = compare_outputs(eager, eager.clone(), "bfloat16", fp64=gold)
    assert result["reference"] == "float64" and result["method"] == METHOD
    assert result["rule"].startswith("allclose to eager (atol = rtol = 0.01), or RMSE vs float64 <= 3")
    assert result["tolerance"]["source"].startswith("bfloat16")
    unmatched = compare_outputs(eager, eager.clone(), fp64=gold[:10])  # a reference of another shape
    assert unmatched["reference"] == "same-dtype" and unmatched["method"] == METHOD_ALLCLOSE_ONLY
    assert "no float64 counterpart" in unmatched["reference_note"]


def test_a_gate_that_could_not_run_says_nothing_judged_it_and_why():
    result = unjudged("float16", False, "accuracy gate not measured: OutOfMemoryError: CUDA out of memory")
    assert result["parity"] is None and result["reference"] == "none" and result["rule"] is None
    assert "OutOfMemoryError" in result["reference_note"] and result["tolerance"]["key"] == "float16"


def test_a_gate_whose_outputs_lie_below_the_tolerance_says_it_cannot_fail():
    # random weights made MobileNet's logits about 1e-25 on the H200: allclose (atol 1e-3) passed anything of that
    # scale, zeros included
    tiny = torch.randn(4, 1000, generator=torch.Generator().manual_seed(0)) * 1e-25
    gold = {"logits": tiny.double()}
    result = compare_outputs({"logits": tiny}, {"logits": torch.zeros_like(tiny)}, fp64=gold, tf32=True)
    assert result["parity"] == "pass" and result["can_fail"] is False
    assert result["output_scale"] == pytest.approx(float(tiny.abs().max()))
    assert result["per_tensor"]["output.logits"]["eager_max_abs"] == result["output_scale"]
    # the same outputs at the scale of real logits: the gate can fail, and fails zeros
    real = {"logits": tiny * 1e25}
    judged = compare_outputs(real, {"logits": torch.zeros_like(tiny)}, fp64={"logits": real["logits"].double()})
    assert judged["parity"] == "fail" and judged["can_fail"] is True
    assert compare_outputs(real, real, fp64={"logits": real["logits"].double()})["can_fail"] is True


def test_one_output_that_reaches_the_tolerance_or_an_integer_output_lets_the_gate_fail():
    tiny = torch.full((2, 3), 1e-9)
    assert compare_outputs({"a": tiny, "b": torch.ones(2, 3)}, {"a": tiny, "b": torch.ones(2, 3)})["can_fail"] is True
    labels = torch.tensor([1, 2])
    assert compare_outputs({"a": tiny, "labels": labels}, {"a": tiny, "labels": labels})["can_fail"] is True
    assert compare_outputs({"a": tiny}, {"a": tiny})["can_fail"] is False
    assert unjudged("float32", False, "no gate")["can_fail"] is None
