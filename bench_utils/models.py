"""The model zoo: the guide's 12 models, any Hugging Face checkpoint, any timm model.

``load(key, weights=..., dtype=..., device=...)`` returns a ``LoadedModel``: the
model in eval mode with its task, key, label, checkpoint, parameter count, the
weights it really has, and ``inputs(batch_size)`` for one forward pass.

Weights policy:
- ``random``: the checkpoint's exact architecture with random weights, built from
  a configuration, fully offline (the registry's 12 and ``timm:<name>``);
- ``pretrained``: the checkpoint from the hub; where the hub cannot be reached,
  one clear line naming the checkpoint and suggesting ``weights="random"``;
- ``auto``: pretrained where possible, else random, saying so.
"""

from __future__ import annotations

import difflib
import functools
import socket
import urllib.parse
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from . import inputs as inputs_module
from .model_configs import ARCHITECTURES, Architecture
from .precision import check_dtype_supported, parse_dtype

TASKS = ("image-classification", "image-segmentation", "object-detection")
WEIGHTS = ("random", "pretrained", "auto")
TIMM_PREFIX = "timm:"
HUB_PROBE_TIMEOUT_S = 3.0


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


class WeightsUnavailableError(ValueError):
    """Pretrained weights were asked for and cannot be had here."""


@dataclass
class LoadedModel:
    """A model ready for timing, and what a record needs to know about it."""

    model: torch.nn.Module
    key: str
    label: str
    task: str
    checkpoint: str
    weights: str                     # the weights it really has: random or pretrained
    dtype: str
    device: str
    param_count: int
    make_inputs: Callable[[int], dict[str, torch.Tensor]] = field(repr=False)
    input_info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def inputs(self, batch_size: int) -> dict[str, torch.Tensor]:
        """Keyword arguments of one forward pass at ``batch_size``, on the device."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        return self.make_inputs(batch_size)

    def info(self) -> dict[str, Any]:
        """The facts a result record carries about this model."""
        return {"key": self.key, "label": self.label, "task": self.task,
                "checkpoint": self.checkpoint, "weights": self.weights, "dtype": self.dtype,
                "param_count": self.param_count, **self.input_info,
                **({"notes": self.notes} if self.notes else {})}


# --- lookup ---------------------------------------------------------------------------

def list_models() -> list[dict[str, Any]]:
    """The registry: key, label, task, checkpoint and parameter count of each model."""
    return [{"key": spec.key, "label": spec.label, "task": spec.task,
             "checkpoint": spec.checkpoint, "param_count": ARCHITECTURES[spec.key].param_count}
            for spec in REGISTRY.values()]


def resolve_key(key: str) -> ModelSpec | None:
    """The registry entry for ``key`` (also found by label or checkpoint), None for
    other checkpoints and timm models, ValueError with the closest match otherwise."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"model key must be a non-empty string, got {key!r}")
    if key in REGISTRY:
        return REGISTRY[key]
    for spec in REGISTRY.values():
        if key.lower() in (spec.label.lower(), spec.checkpoint.lower()):
            return spec
    if key.startswith(TIMM_PREFIX) or "/" in key:
        return None  # a timm model or any Hugging Face checkpoint (or local folder)
    close = difflib.get_close_matches(key.lower(), list(REGISTRY), n=1, cutoff=0.4)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown model {key!r}.{hint} Known keys: {', '.join(REGISTRY)}; "
                     f"or a Hugging Face checkpoint 'org/name', or 'timm:<name>'.")


# --- building ---------------------------------------------------------------------------

def _transformers_class(name: str):
    import transformers

    return getattr(transformers, name)


def _random_from_architecture(arch: Architecture) -> torch.nn.Module:
    config = _transformers_class(arch.config_class)(**arch.config)
    return _transformers_class(arch.model_class)(config)


def _offline_processor(arch: Architecture):
    return _transformers_class(arch.processor_class)(**arch.processor)


def _hub_error(checkpoint: str, exc: Exception) -> WeightsUnavailableError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return WeightsUnavailableError(
        f"cannot load pretrained weights for {checkpoint}: the model hub cannot be reached "
        f"or has no such checkpoint ({reason[:200]}); use weights='random' to run offline")


@functools.lru_cache(maxsize=1)
def hub_unreachable_reason() -> str | None:
    """Why the model hub cannot be reached (None if it can), found out quickly and once.

    Without this, every pretrained load on an offline machine waits through the hub
    client's retries (about half a minute each).
    """
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    host = urllib.parse.urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"cannot connect to the hub ({exc.strerror or type(exc).__name__})"
    return None


def _pretrained(checkpoint: str, model_class_names: tuple[str, ...]):
    """Model, image processor and (for OwlViT) tokenizer from the hub or a local folder."""
    from transformers import AutoImageProcessor

    if not Path(checkpoint).is_dir():
        reason = hub_unreachable_reason()
        if reason:
            raise _hub_error(checkpoint, OSError(reason))
    errors = []
    for name in model_class_names:
        try:
            model = _transformers_class(name).from_pretrained(checkpoint)
            break
        except (OSError, ValueError, KeyError) as exc:
            errors.append(exc)
    else:
        raise _hub_error(checkpoint, errors[0])
    try:
        processor = AutoImageProcessor.from_pretrained(checkpoint)
    except (OSError, ValueError) as exc:
        raise _hub_error(checkpoint, exc) from None
    tokenizer = None
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    except Exception:
        pass  # image-only checkpoints have none
    return model, processor, tokenizer


def _auto_task(model: torch.nn.Module) -> str:
    name = type(model).__name__
    if "Classification" in name:
        return "image-classification"
    if "Detection" in name:
        return "object-detection"
    if "Segmentation" in name:
        return "image-segmentation"
    raise ValueError(f"cannot tell the task of {name}: use a classification, segmentation or "
                     "detection checkpoint")


def load(key: str, *, weights: str = "random", dtype: str | torch.dtype = torch.float32,
         device: str | torch.device = "cpu", task: str | None = None,
         seed: int = 0) -> LoadedModel:
    """Build ``key`` with ``weights`` in ``dtype`` on ``device``, in eval mode."""
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}: use one of {', '.join(WEIGHTS)}")
    if task is not None and task not in TASKS:
        raise ValueError(f"unknown task {task!r}: use one of {', '.join(TASKS)}")
    dtype_name, torch_dtype = parse_dtype(dtype)
    device = torch.device(device)
    check_dtype_supported(torch_dtype, device)
    spec = resolve_key(key)
    notes: list[str] = []
    torch.manual_seed(seed)  # random weights are the same for the same seed

    if key.startswith(TIMM_PREFIX):
        model, make_raw_inputs, meta = _load_timm(key, weights, notes)
    else:
        model, make_raw_inputs, meta = _load_transformers(key, spec, weights, task, notes)

    model = model.to(device=device, dtype=torch_dtype).eval()
    model.requires_grad_(False)  # inference only: no autograd state in any timing

    def make_inputs(batch_size: int) -> dict[str, torch.Tensor]:
        return inputs_module.to_device(make_raw_inputs(batch_size), device, torch_dtype)

    return LoadedModel(
        model=model, key=meta["key"], label=meta["label"], task=meta["task"],
        checkpoint=meta["checkpoint"], weights=meta["weights"], dtype=dtype_name,
        device=str(device), param_count=sum(p.numel() for p in model.parameters()),
        make_inputs=make_inputs, input_info=meta["input_info"], notes=notes)


def _fallback(checkpoint: str, exc: Exception, notes: list[str]) -> None:
    message = f"pretrained weights for {checkpoint} unavailable; falling back to random weights ({exc})"
    warnings.warn(message, stacklevel=3)
    notes.append(message)


def _load_transformers(key: str, spec: ModelSpec | None, weights: str, task: str | None,
                       notes: list[str]):
    checkpoint = spec.checkpoint if spec else key
    arch = ARCHITECTURES.get(spec.key) if spec else None
    tokenizer = None
    model = processor = None
    if weights in ("pretrained", "auto"):
        classes = (arch.model_class,) if arch else AUTO_CLASSES.get(task, sum(AUTO_CLASSES.values(), ()))
        try:
            model, processor, tokenizer = _pretrained(checkpoint, classes)
            used = "pretrained"
        except WeightsUnavailableError as exc:
            if weights == "pretrained":
                raise
            _fallback(checkpoint, exc, notes)
    if model is None:
        if arch is None:
            raise WeightsUnavailableError(
                f"random weights for {checkpoint} need its configuration, which only the hub has; "
                f"use a registry key ({', '.join(REGISTRY)}) or 'timm:<name>' offline")
        model, processor, used = _random_from_architecture(arch), _offline_processor(arch), "random"

    resolved_task = spec.task if spec else (task or _auto_task(model))
    text_queries = (arch.text_queries if arch else "OwlViT" in type(model).__name__ or
                    "OwlV2" in type(model).__name__)
    input_info: dict[str, Any] = {**inputs_module.sample_image_info()}
    if text_queries:
        input_info["text_queries"] = list(inputs_module.OWLVIT_QUERIES)
        input_info["text_source"] = "tokenizer" if tokenizer is not None else "fixed-token-ids"

    def make_raw_inputs(batch_size: int) -> dict[str, torch.Tensor]:
        tensors = inputs_module.image_inputs(processor, batch_size)
        if text_queries:
            text, _ = inputs_module.owlvit_text_inputs(batch_size, tokenizer)
            tensors.update(text)
        return tensors

    meta = {"key": spec.key if spec else key, "label": spec.label if spec else key,
            "task": resolved_task, "checkpoint": checkpoint, "weights": used,
            "input_info": input_info}
    return model, make_raw_inputs, meta


def _load_timm(key: str, weights: str, notes: list[str]):
    import timm

    name = key[len(TIMM_PREFIX):]
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=1)
        hint = f" Did you mean 'timm:{close[0]}'?" if close else ""
        raise ValueError(f"unknown timm model {name!r}.{hint}")
    model, used = None, "random"
    if weights in ("pretrained", "auto"):
        try:
            reason = hub_unreachable_reason()
            if reason:
                raise OSError(reason)
            model, used = timm.create_model(name, pretrained=True), "pretrained"
        except Exception as exc:  # timm raises many kinds when the hub is out of reach
            error = _hub_error(f"timm:{name}", exc)
            if weights == "pretrained":
                raise error from None
            _fallback(f"timm:{name}", error, notes)
    if model is None:
        model = timm.create_model(name, pretrained=False)
    meta = {"key": key, "label": name, "task": "image-classification", "checkpoint": key,
            "weights": used, "input_info": inputs_module.sample_image_info()}
    return model, (lambda batch_size: inputs_module.timm_image_inputs(model, batch_size)), meta
