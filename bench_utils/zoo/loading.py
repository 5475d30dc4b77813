"""The model zoo: the guide's 12 models, any Hugging Face checkpoint, any timm model (docs/models.md).

``load(key, weights=..., dtype=..., device=...)`` returns a ``LoadedModel``: the model in eval mode with its task,
key, label, checkpoint, parameter count, the weights it really has (``random``, ``pretrained``, or ``auto``:
pretrained where possible, else random, saying so), and ``inputs(batch_size)`` for one forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import difflib
from typing import Any, Callable
import warnings

import torch

from ..errors import UserError
from . import inputs as inputs_module
from ..variants.memory_format import CONTIGUOUS, apply_to_inputs, apply_to_model, check_memory_format
from ..variants.precision import check_dtype_supported, parse_dtype
from .architectures import ARCHITECTURES
from .hub import WeightsUnavailableError, from_hub, hub_error, hub_unreachable_reason, transformers_class
from .registry import AUTO_CLASSES, REGISTRY, TASKS, TIMM_PREFIX, WEIGHTS, ModelSpec, resolve_key


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
    memory_format: str = CONTIGUOUS  # the layout of its 4-D weights and image inputs

    def inputs(self, batch_size: int) -> dict[str, torch.Tensor]:
        """Keyword arguments of one forward pass at ``batch_size``, on the device."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        return self.make_inputs(batch_size)

    def info(self) -> dict[str, Any]:
        """The facts a result record carries about this model."""
        return {"key": self.key, "label": self.label, "task": self.task,
                "checkpoint": self.checkpoint, "weights": self.weights, "dtype": self.dtype,
                "param_count": self.param_count, "memory_format": self.memory_format, **self.input_info,
                **({"notes": self.notes} if self.notes else {})}


def _auto_task(model: torch.nn.Module) -> str:
    name = type(model).__name__
    if "Classification" in name:
        return "image-classification"
    if "Detection" in name:
        return "object-detection"
    if "Segmentation" in name:
        return "image-segmentation"
    raise UserError(f"cannot tell the task of {name}: use a classification, segmentation or "
                    "detection checkpoint")


def load(key: str, *, weights: str = "random", dtype: str | torch.dtype = torch.float32,
         device: str | torch.device = "cpu", task: str | None = None,
         seed: int = 0, memory_format: str = CONTIGUOUS) -> LoadedModel:
    """Build ``key`` with ``weights`` in ``dtype`` on ``device``, in eval mode, its weights and
    image inputs in ``memory_format`` (``variants.memory_format``); random weights are drawn on the host."""
    if weights not in WEIGHTS:
        raise UserError(f"unknown weights {weights!r}: use one of {', '.join(WEIGHTS)}")
    if task is not None and task not in TASKS:
        raise UserError(f"unknown task {task!r}: use one of {', '.join(TASKS)}")
    dtype_name, torch_dtype = parse_dtype(dtype)
    device = torch.device(device)
    check_memory_format(memory_format)
    check_dtype_supported(torch_dtype, device)
    spec = resolve_key(key)
    notes: list[str] = []
    torch.manual_seed(seed)  # random weights are the same for the same seed

    if key.startswith(TIMM_PREFIX):
        model, make_raw_inputs, meta = _load_timm(key, weights, notes)
    else:
        model, make_raw_inputs, meta = _load_transformers(key, spec, weights, task, notes)
    model = apply_to_model(model.to(device=device, dtype=torch_dtype).eval(), memory_format)
    model.requires_grad_(False)  # inference only: no autograd state in any timing

    def make_inputs(batch_size: int) -> dict[str, torch.Tensor]:
        return apply_to_inputs(inputs_module.to_device(make_raw_inputs(batch_size), device, torch_dtype),
                               memory_format)

    return LoadedModel(
        model=model, key=meta["key"], label=meta["label"], task=meta["task"],
        checkpoint=meta["checkpoint"], weights=meta["weights"], dtype=dtype_name,
        device=str(device), param_count=sum(p.numel() for p in model.parameters()),
        make_inputs=make_inputs, input_info=meta["input_info"], notes=notes, memory_format=memory_format)


def _fallback(checkpoint: str, exc: Exception, notes: list[str]) -> None:
    message = f"pretrained weights for {checkpoint} unavailable; falling back to random weights ({exc})"
    warnings.warn(message, stacklevel=3)
    notes.append(message)


def _load_transformers(key: str, spec: ModelSpec | None, weights: str, task: str | None,
                       notes: list[str]):
    checkpoint = spec.checkpoint if spec else key
    arch = ARCHITECTURES.get(spec.key) if spec else None
    model = processor = tokenizer = None
    if weights in ("pretrained", "auto"):
        classes: tuple[str, ...]
        if arch:
            classes = (arch.model_class,)
        else:  # the task's Auto classes; every task's where it is not known
            every = sum(AUTO_CLASSES.values(), ())
            classes = AUTO_CLASSES.get(task, every) if task is not None else every
        try:
            model, processor, tokenizer = from_hub(checkpoint, classes)
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
        model = transformers_class(arch.model_class)(transformers_class(arch.config_class)(**arch.config))
        processor, used = transformers_class(arch.processor_class)(**arch.processor), "random"

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
        raise UserError(f"unknown timm model {name!r}.{hint}")
    model, used = None, "random"
    if weights in ("pretrained", "auto"):
        try:
            reason = hub_unreachable_reason()
            if reason:
                raise OSError(reason)
            model, used = timm.create_model(name, pretrained=True), "pretrained"
        except Exception as exc:  # timm raises many kinds when the hub is out of reach
            error = hub_error(f"timm:{name}", exc)
            if weights == "pretrained":
                raise error from None
            _fallback(f"timm:{name}", error, notes)
    if model is None:
        model = timm.create_model(name, pretrained=False)
    meta = {"key": key, "label": name, "task": "image-classification", "checkpoint": key,
            "weights": used, "input_info": inputs_module.sample_image_info()}
    return model, (lambda batch_size: inputs_module.timm_image_inputs(model, batch_size)), meta
