"""The inputs of a forward pass: one real photo, preprocessed, repeated to the batch (docs/models.md, *Inputs*).

scikit-image's ``chelsea`` (a cat) stands for the guide's COCO photo, resized to its 640x480 so that processors that
keep the aspect ratio give the guide's input shapes. Preprocessing happens here, once per cell, outside any timed
region.
"""

from __future__ import annotations

import functools
from typing import Any

from PIL import Image
import torch

GUIDE_IMAGE_SIZE = (640, 480)  # width, height of COCO val2017 000000039769.jpg
OWLVIT_QUERIES = ("a photo of a cat", "a photo of a dog")
OWLVIT_TEXT_LENGTH = 16  # OwlViT's processor pads every query to 16 tokens
# CLIP BPE ids (start, tokens, end) of the two queries, as CLIP's tokenizer gives them
# (checked against open_clip's copy of the vocabulary); OwlViT pads with id 0.
OWLVIT_QUERY_IDS = {
    "a photo of a cat": [49406, 320, 1125, 539, 320, 2368, 49407],
    "a photo of a dog": [49406, 320, 1125, 539, 320, 1929, 49407],
}


@functools.lru_cache(maxsize=1)
def sample_image() -> Image.Image:
    """scikit-image's cat photo, resized to the guide's image size (RGB, 640x480)."""
    from skimage import data

    photo = Image.fromarray(data.chelsea()).convert("RGB")
    return photo.resize(GUIDE_IMAGE_SIZE, Image.Resampling.BICUBIC)


def sample_image_info() -> dict[str, Any]:
    return {"image": "scikit-image data.chelsea (a cat photo)",
            "image_size": list(GUIDE_IMAGE_SIZE),
            "image_note": "resized to the size of the guide's COCO val2017 000000039769.jpg"}


def owlvit_text_inputs(batch_size: int, tokenizer: Any = None) -> tuple[dict[str, torch.Tensor], str]:
    """input_ids and attention_mask of the two queries for each image of the batch, and their source: the
    tokenizer where given (the checkpoint's, where the hub is reachable), else the fixed token ids above."""
    queries = list(OWLVIT_QUERIES) * batch_size
    if tokenizer is not None:
        encoded = tokenizer(queries, padding="max_length", max_length=OWLVIT_TEXT_LENGTH,
                            truncation=True, return_tensors="pt")
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}, \
            "tokenizer"
    ids = torch.zeros(len(queries), OWLVIT_TEXT_LENGTH, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, query in enumerate(queries):
        tokens = OWLVIT_QUERY_IDS[query]
        ids[row, : len(tokens)] = torch.tensor(tokens)
        mask[row, : len(tokens)] = 1
    return {"input_ids": ids, "attention_mask": mask}, "fixed-token-ids"


def image_inputs(processor: Any, batch_size: int) -> dict[str, torch.Tensor]:
    """The processor's tensors for the sample image, repeated to ``batch_size``."""
    processed = processor(images=sample_image(), return_tensors="pt")
    tensors = {name: value for name, value in processed.items() if isinstance(value, torch.Tensor)}
    # A real copy per sample (not a stride-0 view), as a batch of distinct images would be.
    return {name: value.repeat(batch_size, *([1] * (value.dim() - 1)))
            for name, value in tensors.items()}


def to_device(inputs: dict[str, torch.Tensor], device: torch.device | str,
              dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Floating tensors to ``dtype``; integer ones (ids, masks) keep theirs."""
    return {name: value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
            for name, value in inputs.items()}


def timm_image_inputs(model: torch.nn.Module, batch_size: int) -> dict[str, torch.Tensor]:
    """The sample image through timm's own evaluation transform for ``model``."""
    import timm.data

    config = timm.data.resolve_data_config({}, model=model)
    transform = timm.data.create_transform(**config)
    pixels = transform(sample_image()).unsqueeze(0)
    return {"x": pixels.repeat(batch_size, 1, 1, 1)}

