import math

import pytest
import torch

from bench_utils.variants import modes as compile_module
from bench_utils.variants.parity import TOLERANCES, compare_outputs, flatten_outputs


def outputs(scale=1.0):
    torch.manual_seed(0)
    return {"logits": torch.randn(2, 10) * scale, "boxes": torch.rand(2, 5, 4),
            "hidden": (torch.randn(2, 3), torch.randn(2, 3)), "labels": torch.tensor([1, 2])}


def test_flatten_names_every_tensor():
    assert sorted(flatten_outputs(outputs())) == ["output.boxes", "output.hidden[0]",
                                                  "output.hidden[1]", "output.labels", "output.logits"]


def test_identical_outputs_pass():
    result = compare_outputs(outputs(), outputs())
    assert result["parity"] == "pass" and result["max_abs_err"] == 0
    assert result["min_cosine"] == pytest.approx(1.0, abs=1e-12)
    assert result["tensors"] == 5 and result["tolerance"]["max_rel_err"] == 1e-3


def test_tiny_numerical_noise_passes_and_a_perturbation_fails():
    ref, noisy, perturbed = outputs(), outputs(), outputs()
    noisy["logits"] = noisy["logits"] * (1 + 1e-6)
    assert compare_outputs(ref, noisy)["parity"] == "pass"
    perturbed["boxes"] = perturbed["boxes"] + 0.01
    result = compare_outputs(ref, perturbed)
    assert result["parity"] == "fail" and result["worst_tensor"] == "output.boxes"
    assert result["max_rel_err"] > 1e-3 and any("output.boxes" in p for p in result["problems"])


def test_looser_tolerance_for_half_precision():
    ref, cand = outputs(), outputs()
    cand["logits"] = cand["logits"] * (1 + 5e-3)
    assert compare_outputs(ref, cand, "float32")["parity"] == "fail"
    assert compare_outputs(ref, cand, "float16")["parity"] == "pass"
    assert TOLERANCES["bfloat16"].max_rel_err > TOLERANCES["float16"].max_rel_err > TOLERANCES["float32"].max_rel_err


def test_structure_integer_and_nan_differences_fail():
    ref = outputs()
    missing = {k: v for k, v in outputs().items() if k != "boxes"}
    assert "structure" in compare_outputs(ref, missing)["problems"][0]
    labels = outputs()
    labels["labels"] = torch.tensor([1, 3])
    assert compare_outputs(ref, labels)["parity"] == "fail"
    nan = outputs()
    nan["logits"][0, 0] = math.nan
    assert "NaN" in compare_outputs(ref, nan)["problems"][0]
    both = outputs(), outputs()
    both[0]["logits"][0, 0] = both[1]["logits"][0, 0] = math.nan
    assert compare_outputs(*both)["parity"] == "pass"  # NaN where eager has NaN too
    shape = outputs()
    shape["logits"] = shape["logits"][:, :5]
    assert "shape" in compare_outputs(ref, shape)["problems"][0]


def test_compiled_tiny_model_passes_and_a_perturbed_compiled_model_fails(tiny_vit):
    model, inputs = tiny_vit
    with torch.no_grad():
        reference = compile_module.clone_outputs(model(**inputs))
        compile_module.reset()
        compiled = compile_module.compile_model(model, "default", backend="aot_eager")
        assert compare_outputs(reference, compiled(**inputs))["parity"] == "pass"
        model.classifier.bias += 0.05  # a deliberately wrong model
        result = compare_outputs(reference, compiled(**inputs))
    assert result["parity"] == "fail" and result["worst_tensor"] == "output.logits"
