"""The model zoo's table: the guide's 12 models, by key, label, task and checkpoint.

Looking a model up needs no torch: the grid validates model names and the report
labels its rows from here without loading any framework.
"""

from __future__ import annotations

from dataclasses import dataclass
import difflib
from typing import Any

from ..errors import UserError
from ..vocabulary import Weights, names
from .architectures import ARCHITECTURES

TASKS = ("image-classification", "image-segmentation", "object-detection")
WEIGHTS = names(Weights)
TIMM_PREFIX = "timm:"


@dataclass(frozen=True)
class ModelSpec:
    key: str
    label: str        # the guide's table row
    task: str
    checkpoint: str


REGISTRY: dict[str, ModelSpec] = {spec.key: spec for spec in (
    ModelSpec("vit", "ViT", "image-classification", "google/vit-base-patch16-224"),
    ModelSpec("beit", "BeiT", "image-classification", "microsoft/beit-base-patch16-224-pt22k-ft22k"),
    ModelSpec("convnext", "ConvNeXT", "image-classification", "facebook/convnext-large-224"),
    ModelSpec("resnet", "ResNet", "image-classification", "microsoft/resnet-50"),
    ModelSpec("segformer", "Segformer", "image-segmentation", "nvidia/segformer-b0-finetuned-ade-512-512"),
    ModelSpec("mask2former", "Mask2former", "image-segmentation",
              "facebook/mask2former-swin-tiny-coco-panoptic"),
    ModelSpec("maskformer", "Maskformer", "image-segmentation", "facebook/maskformer-swin-base-ade"),
    ModelSpec("mobilenet", "MobileNet", "image-segmentation", "google/deeplabv3_mobilenet_v2_1.0_513"),
    ModelSpec("owlvit", "OwlViT", "object-detection", "google/owlvit-base-patch32"),
    ModelSpec("detr", "DETR", "object-detection", "facebook/detr-resnet-50"),
    ModelSpec("detr-resnet-101", "Resnet-101", "object-detection", "facebook/detr-resnet-101"),
    ModelSpec("conditional-detr", "Conditional-DETR", "object-detection",
              "microsoft/conditional-detr-resnet-50"),
)}

# The Auto class that resolves each task for an arbitrary Hugging Face checkpoint.
AUTO_CLASSES = {
    "image-classification": ("AutoModelForImageClassification",),
    "image-segmentation": ("AutoModelForSemanticSegmentation", "AutoModelForUniversalSegmentation",
                           "AutoModelForInstanceSegmentation"),
    "object-detection": ("AutoModelForObjectDetection", "AutoModelForZeroShotObjectDetection"),
}


def list_models() -> list[dict[str, Any]]:
    """The registry: key, label, task, checkpoint and parameter count of each model."""
    return [{"key": spec.key, "label": spec.label, "task": spec.task,
             "checkpoint": spec.checkpoint, "param_count": ARCHITECTURES[spec.key].param_count}
            for spec in REGISTRY.values()]


def resolve_key(key: str) -> ModelSpec | None:
    """The registry entry for ``key`` (also found by label or checkpoint), None for
    other checkpoints and timm models, UserError with the closest match otherwise."""
    if not isinstance(key, str) or not key:
        raise UserError(f"model key must be a non-empty string, got {key!r}")
    if key in REGISTRY:
        return REGISTRY[key]
    for spec in REGISTRY.values():
        if key.lower() in (spec.label.lower(), spec.checkpoint.lower()):
            return spec
    if key.startswith(TIMM_PREFIX) or "/" in key:
        return None  # a timm model or any Hugging Face checkpoint (or local folder)
    close = difflib.get_close_matches(key.lower(), list(REGISTRY), n=1, cutoff=0.4)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UserError(f"unknown model {key!r}.{hint} Known keys: {', '.join(REGISTRY)}; "
                    f"or a Hugging Face checkpoint 'org/name', or 'timm:<name>'.")


def label_of(model: str) -> str:
    """The guide's row label of a registry key; other models are named by their key."""
    return REGISTRY[model].label if model in REGISTRY else model
