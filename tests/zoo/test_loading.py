
import pytest
import torch

from bench_utils.zoo.hub import WeightsUnavailableError
from bench_utils.zoo.loading import load
from bench_utils.zoo.registry import REGISTRY, list_models, resolve_key
from bench_utils.zoo.architectures import ARCHITECTURES

# Published sizes (millions of parameters, parameters() without buffers) and their precision.
PUBLISHED_M = {"vit": (86.57, 0.005), "resnet": (25.56, 0.005), "convnext": (197.8, 0.05),
               "detr": (41.5, 0.05), "detr-resnet-101": (60.4, 0.1)}


@pytest.mark.parametrize("key", list(REGISTRY))
def test_every_model_builds_offline_and_runs_one_forward_pass(key, no_network):
    loaded = load(key, weights="random")
    spec = REGISTRY[key]
    assert (loaded.key, loaded.label, loaded.task, loaded.checkpoint) == \
        (key, spec.label, spec.task, spec.checkpoint)
    assert loaded.weights == "random" and not loaded.model.training
    assert loaded.param_count == ARCHITECTURES[key].param_count
    if key in PUBLISHED_M:
        published, precision = PUBLISHED_M[key]
        assert abs(loaded.param_count / 1e6 - published) <= precision
    inputs = loaded.inputs(1)
    assert inputs["pixel_values"].shape[0] == 1
    with torch.no_grad():
        outputs = loaded.model(**inputs)
    first = outputs["logits"] if "logits" in outputs else next(iter(outputs.values()))
    assert torch.isfinite(first).all()


@pytest.mark.parametrize("key", ["vit", "mask2former", "owlvit", "detr"])
def test_inputs_have_the_batch_size(key):
    loaded = load(key)
    inputs = loaded.inputs(4)
    assert inputs["pixel_values"].shape[0] == 4
    assert inputs["pixel_values"].dtype == torch.float32
    if key == "owlvit":  # two queries per image, OwlViT's fixed length
        assert inputs["input_ids"].shape == (8, 16) and inputs["input_ids"].dtype == torch.long
        assert loaded.info()["text_source"] == "fixed-token-ids"
    if key == "detr":
        assert inputs["pixel_values"].shape[-2:] == (800, 1066)  # the guide's 640x480 photo
    with pytest.raises(ValueError, match="batch_size"):
        loaded.inputs(0)


def test_list_models_has_all_twelve():
    rows = list_models()
    assert [row["key"] for row in rows] == list(REGISTRY) and len(rows) == 12
    assert {row["task"] for row in rows} == {"image-classification", "image-segmentation",
                                             "object-detection"}
    assert all(row["param_count"] > 1e6 for row in rows)


def test_unknown_key_names_the_closest_and_lists_known():
    with pytest.raises(ValueError, match=r"Did you mean 'convnext'.*Known keys: vit, beit"):
        resolve_key("convnex")
    assert resolve_key("Resnet-101").key == "detr-resnet-101"  # by the guide's label
    assert resolve_key("facebook/detr-resnet-50").key == "detr"  # by checkpoint
    assert resolve_key("timm:resnet18") is None and resolve_key("org/other") is None


def test_pretrained_offline_fails_in_one_clear_line():
    with pytest.raises(WeightsUnavailableError) as caught:
        load("resnet", weights="pretrained")
    message = str(caught.value)
    assert "microsoft/resnet-50" in message and "weights='random'" in message
    assert "\n" not in message


def test_auto_falls_back_to_random_and_says_so():
    with pytest.warns(UserWarning, match="falling back to random weights"):
        loaded = load("resnet", weights="auto")
    assert loaded.weights == "random" and loaded.info()["weights"] == "random"
    assert any("falling back" in note for note in loaded.notes)


def test_random_weights_depend_on_the_seed_only():
    a = load("segformer", seed=1).model.state_dict()
    b = load("segformer", seed=1).model.state_dict()
    c = load("segformer", seed=2).model.state_dict()
    name = next(n for n, t in a.items() if t.is_floating_point() and t.numel() > 100)
    assert torch.equal(a[name], b[name]) and not torch.equal(a[name], c[name])


def test_timm_models_load_offline(no_network):
    loaded = load("timm:resnet18")
    assert loaded.task == "image-classification" and loaded.weights == "random"
    assert loaded.param_count == 11_689_512
    inputs = loaded.inputs(2)
    assert inputs["x"].shape == (2, 3, 224, 224)
    with torch.no_grad():
        assert loaded.model(**inputs).shape == (2, 1000)
    with pytest.raises(ValueError, match="unknown timm model"):
        load("timm:resnet-eighteen")


def test_any_hugging_face_checkpoint_through_the_auto_classes(tmp_path, tiny_vit, no_network):
    from transformers import ViTImageProcessor

    model, _ = tiny_vit
    model.save_pretrained(tmp_path)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(tmp_path)
    loaded = load(str(tmp_path), weights="pretrained")
    assert loaded.weights == "pretrained" and loaded.task == "image-classification"
    assert loaded.param_count == sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        expected = model(**loaded.inputs(1)).logits
        assert torch.allclose(loaded.model(**loaded.inputs(1)).logits, expected)
    with pytest.raises(WeightsUnavailableError, match="need its configuration"):
        load("some-org/not-in-registry", weights="random")


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="unknown weights"):
        load("vit", weights="imagenet")
    with pytest.raises(ValueError, match="unknown dtype 'float8'.*float32"):
        load("vit", dtype="float8")
    with pytest.raises(ValueError, match="unknown task"):
        load("vit", task="captioning")


def test_dtype_the_device_cannot_run_is_a_clear_message(monkeypatch):
    from bench_utils.variants import precision

    def fail(dtype, device):
        raise RuntimeError('"slow_conv2d_cpu" not implemented for \'Half\'')

    monkeypatch.setattr(precision, "_probe", fail)
    precision._support.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"dtype float16 cannot run on cpu.*slow_conv2d_cpu"):
            load("resnet", dtype="fp16")
    finally:
        precision._support.cache_clear()


def test_half_precision_model_and_inputs():
    loaded = load("mobilenet", dtype="bf16")
    assert loaded.dtype == "bfloat16"
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    assert loaded.inputs(1)["pixel_values"].dtype == torch.bfloat16
