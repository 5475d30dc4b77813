import pytest
import torch

from bench_utils.variants import modes as compile_module
from bench_utils.variants.agreement import (BOX_IOU_THRESHOLD, box_iou_cxcywh, semantic_map,
                                            task_agreement)


def test_classification_top1_agreement_from_hf_logits_or_a_bare_tensor():
    eager = torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 5.0], [0.0, 0.0, 1.0]])
    compiled = eager.clone()
    compiled[1, 2] = 9.0  # one image changes its top-1 class
    result = task_agreement("image-classification", {"logits": eager}, {"logits": compiled})
    assert result == {"task": "image-classification", "metric": "top1_agreement",
                      "value": 0.75, "count": 4}
    assert task_agreement("image-classification", eager, compiled)["value"] == 0.75  # timm
    assert task_agreement("image-classification", eager, eager.clone())["value"] == 1.0


def test_segmentation_pixel_agreement_from_logits():
    torch.manual_seed(0)
    eager = torch.randn(2, 5, 4, 4)
    compiled = eager.clone()
    compiled[0, :, 1, 2] = 0.0
    compiled[0, 0, 1, 2] = 100.0 if eager[0, :, 1, 2].argmax() != 0 else -100.0
    result = task_agreement("image-segmentation", {"logits": eager}, {"logits": compiled})
    assert result["metric"] == "pixel_agreement" and result["source"] == "logits"
    assert result["count"] == 32 and result["value"] == pytest.approx(31 / 32)


def maskformer_outputs(right_class=1):
    """Query 0: class 0 on the left half; query 1: ``right_class`` on the right; query 2: no object."""
    classes = torch.full((1, 3, 5), -20.0)  # 4 classes + "no object"
    classes[0, 0, 0] = classes[0, 1, right_class] = classes[0, 2, 4] = 20.0
    masks = torch.full((1, 3, 4, 4), -20.0)
    masks[0, 0, :, :2] = masks[0, 1, :, 2:] = 20.0
    masks[0, 2] = 20.0  # everywhere, but it is "no object"
    return {"class_queries_logits": classes, "masks_queries_logits": masks}


def test_maskformer_outputs_become_a_semantic_map():
    outputs = maskformer_outputs()
    scores = semantic_map(outputs["class_queries_logits"], outputs["masks_queries_logits"])
    assert scores.shape == (1, 4, 4, 4)
    labels = scores.argmax(dim=1)[0]
    assert (labels[:, :2] == 0).all() and (labels[:, 2:] == 1).all()


def test_maskformer_pixel_agreement():
    eager = maskformer_outputs()
    same = task_agreement("image-segmentation", eager, maskformer_outputs())
    assert same["value"] == 1.0 and same["count"] == 16
    assert same["source"] == "class_queries_logits x masks_queries_logits"
    moved = task_agreement("image-segmentation", eager, maskformer_outputs(right_class=2))
    assert moved["value"] == 0.5


def detection_outputs():
    logits = torch.tensor([[[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]])
    boxes = torch.tensor([[[0.5, 0.5, 0.2, 0.2], [0.3, 0.3, 0.1, 0.2], [0.7, 0.6, 0.3, 0.3],
                           [0.2, 0.8, 0.1, 0.1]]])
    return {"logits": logits, "pred_boxes": boxes}


def test_detection_query_agreement_when_one_box_moves_or_one_label_flips():
    eager = detection_outputs()
    assert task_agreement("object-detection", eager, detection_outputs())["value"] == 1.0
    moved = detection_outputs()
    moved["pred_boxes"][0, 2, 0] += 0.1  # a third of its width: IoU 0.5
    result = task_agreement("object-detection", eager, moved)
    assert result["metric"] == "query_agreement" and result["count"] == 4
    assert result["value"] == 0.75 and result["box_agreement"] == 0.75
    assert result["label_agreement"] == 1.0 and result["iou_threshold"] == BOX_IOU_THRESHOLD
    moved["logits"][0, 0, 1] = 9.0
    assert task_agreement("object-detection", eager, moved)["value"] == 0.5
    nudged = detection_outputs()
    nudged["pred_boxes"][0, 2, 0] += 0.003  # 1 % of its width: still the same box
    assert task_agreement("object-detection", eager, nudged)["value"] == 1.0


def test_box_iou():
    a = torch.tensor([[0.5, 0.5, 0.2, 0.2], [0.5, 0.5, 0.0, 0.0], [0.1, 0.1, 0.1, 0.1]])
    b = torch.tensor([[0.6, 0.5, 0.2, 0.2], [0.5, 0.5, 0.0, 0.0], [0.9, 0.9, 0.1, 0.1]])
    assert box_iou_cxcywh(a, b).tolist() == pytest.approx([1 / 3, 1.0, 0.0])


def test_unknown_tasks_and_shapes_give_none():
    logits = torch.randn(2, 3)
    assert task_agreement("depth-estimation", logits, logits) is None
    assert task_agreement("image-classification", torch.randn(2, 3, 4), torch.randn(2, 3, 4)) is None
    assert task_agreement("image-classification", logits, torch.randn(2, 4)) is None
    assert task_agreement("image-segmentation", {"logits": logits}, {"logits": logits}) is None
    assert task_agreement("object-detection", {"logits": torch.randn(1, 4, 3)},
                          {"logits": torch.randn(1, 4, 3)}) is None
    assert task_agreement("object-detection", logits, logits) is None


def test_real_tiny_models(tiny_vit):
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    model, inputs = tiny_vit
    with torch.no_grad():
        eager = compile_module.clone_outputs(model(**inputs))  # a plain dict, as the study keeps it
        other = model(**inputs)  # a ModelOutput
    result = task_agreement("image-classification", eager, other)
    assert result["value"] == 1.0 and result["count"] == 2
    torch.manual_seed(0)
    config = SegformerConfig(num_encoder_blocks=1, depths=[1], sr_ratios=[1], hidden_sizes=[8],
                             num_attention_heads=[1], patch_sizes=[3], strides=[2], mlp_ratios=[2],
                             decoder_hidden_size=8, num_labels=3)
    segformer = SegformerForSemanticSegmentation(config).eval()
    pixels = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        first, second = segformer(pixel_values=pixels), segformer(pixel_values=pixels)
    result = task_agreement("image-segmentation", first, second)
    assert result["value"] == 1.0 and result["count"] == 2 * 8 * 8
