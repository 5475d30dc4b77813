"""Task-level agreement: does the compiled model still give eager's answers? (docs/variants.md)

Tensor parity (``parity.py``) asks whether the numbers match; this asks whether the top-1 class, each pixel's class
or each query's label and box does. Outputs are HF ModelOutputs, plain dicts of them or, for classifiers such as
timm's, a bare logits tensor; shapes that are not recognised give ``None`` rather than a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

TASKS = ("image-classification", "image-segmentation", "object-detection")
BOX_IOU_THRESHOLD = 0.9  # a query's box agrees when IoU(eager, compiled) >= this


def _field(outputs: Any, name: str) -> torch.Tensor | None:
    """``outputs[name]`` when it is a tensor; a bare tensor stands for ``logits``."""
    if isinstance(outputs, torch.Tensor):
        return outputs if name == "logits" else None
    if isinstance(outputs, Mapping):
        value = outputs.get(name)
        return value if isinstance(value, torch.Tensor) else None
    return None


def _pair(eager: Any, compiled: Any, name: str,
          ndim: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The ``name`` tensors of both, as float32 on one device, when both have ``ndim`` dims."""
    first, second = _field(eager, name), _field(compiled, name)
    if first is None or second is None or first.ndim != ndim or first.shape != second.shape:
        return None
    if not first.is_floating_point():
        return None
    return first.detach().float(), second.detach().to(device=first.device, dtype=torch.float32)


def _result(task: str, metric: str, agree: torch.Tensor, **extra: Any) -> dict[str, Any]:
    count = agree.numel()
    value = float(agree.float().mean()) if count else 1.0
    return {"task": task, "metric": metric, "value": value, "count": count, **extra}


def semantic_map(class_queries_logits: torch.Tensor,
                 masks_queries_logits: torch.Tensor) -> torch.Tensor:
    """MaskFormer/Mask2Former's per-pixel class scores [B, C, H, W].

    softmax over the C + 1 classes of each query, the last ("no object") dropped,
    weighted by each query's sigmoid mask: as HF's post_process_semantic_segmentation
    does, before its resize to the image size.
    """
    classes = class_queries_logits.float().softmax(dim=-1)[..., :-1]
    masks = masks_queries_logits.float().sigmoid()
    return torch.einsum("bqc,bqhw->bchw", classes, masks)


def _classification(eager: Any, compiled: Any) -> dict[str, Any] | None:
    pair = _pair(eager, compiled, "logits", 2)
    if pair is None:
        return None
    agree = pair[0].argmax(dim=-1) == pair[1].argmax(dim=-1)
    return _result("image-classification", "top1_agreement", agree)


def _segmentation(eager: Any, compiled: Any) -> dict[str, Any] | None:
    classes = _pair(eager, compiled, "class_queries_logits", 3)
    masks = _pair(eager, compiled, "masks_queries_logits", 4)
    scores: tuple[torch.Tensor, torch.Tensor] | None
    if classes is not None and masks is not None:
        if classes[0].shape[:2] != masks[0].shape[:2] or classes[0].shape[-1] < 2:
            return None
        scores = (semantic_map(classes[0], masks[0]), semantic_map(classes[1], masks[1]))
        source = "class_queries_logits x masks_queries_logits"
    else:
        scores = _pair(eager, compiled, "logits", 4)
        if scores is None:
            return None
        source = "logits"
    agree = scores[0].argmax(dim=1) == scores[1].argmax(dim=1)
    return _result("image-segmentation", "pixel_agreement", agree, source=source)


def box_iou_cxcywh(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Element-wise IoU of boxes [..., 4] given as (cx, cy, w, h); two empty boxes
    at the same place have IoU 1."""
    def corners(boxes: torch.Tensor) -> torch.Tensor:
        cx, cy, w, h = boxes.unbind(-1)
        return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1)

    a, b = corners(first.double()), corners(second.double())
    low, high = torch.maximum(a[..., :2], b[..., :2]), torch.minimum(a[..., 2:], b[..., 2:])
    inter = (high - low).clamp(min=0).prod(dim=-1)
    area_a = ((a[..., 2] - a[..., 0]).clamp(min=0) * (a[..., 3] - a[..., 1]).clamp(min=0))
    area_b = ((b[..., 2] - b[..., 0]).clamp(min=0) * (b[..., 3] - b[..., 1]).clamp(min=0))
    union = area_a + area_b - inter
    same = (a == b).all(dim=-1)
    iou = torch.where(union > 0, inter / union.clamp(min=torch.finfo(torch.float64).tiny),
                      torch.zeros_like(union))
    return torch.where(same & (union <= 0), torch.ones_like(iou), iou)


def _detection(eager: Any, compiled: Any) -> dict[str, Any] | None:
    logits = _pair(eager, compiled, "logits", 3)
    boxes = _pair(eager, compiled, "pred_boxes", 3)
    if logits is None or boxes is None or boxes[0].shape[-1] != 4:
        return None
    if logits[0].shape[:2] != boxes[0].shape[:2]:
        return None
    labels = logits[0].argmax(dim=-1) == logits[1].argmax(dim=-1)
    placed = box_iou_cxcywh(boxes[0], boxes[1]) >= BOX_IOU_THRESHOLD
    count = labels.numel()
    return _result("object-detection", "query_agreement", labels & placed,
                   label_agreement=float(labels.float().mean()) if count else 1.0,
                   box_agreement=float(placed.float().mean()) if count else 1.0,
                   iou_threshold=BOX_IOU_THRESHOLD)


def task_agreement(task: str, eager_outputs: Any, compiled_outputs: Any) -> dict[str, Any] | None:
    """How often the compiled model's answers equal eager's, for ``task``.

    Returns ``{"task", "metric", "value", "count", ...}``: ``value`` is the fraction
    in [0, 1] of ``count`` items that agree: images (``top1_agreement``), pixels
    (``pixel_agreement``, plus ``source``) or queries whose argmax label agrees
    and whose boxes overlap with IoU >= 0.9 (``query_agreement``, plus
    ``label_agreement``, ``box_agreement`` and ``iou_threshold``). ``None`` for
    a task not in ``TASKS`` or outputs of shapes it does not recognise.
    """
    judge = {"image-classification": _classification, "image-segmentation": _segmentation,
             "object-detection": _detection}.get(task)
    return judge(eager_outputs, compiled_outputs) if judge is not None else None
