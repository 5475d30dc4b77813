"""Memory formats: the guide's default (contiguous, NCHW) and ``channels_last`` (NHWC) (docs/variants.md).

A ``channels_last`` cell converts the model's 4-D weights and its 4-D floating inputs before anything is measured,
so that eager, the fp64 reference and the compiled model all run in that layout.
"""

from __future__ import annotations

import torch

from ..vocabulary import MemoryFormat, check_memory_format

CONTIGUOUS, CHANNELS_LAST = MemoryFormat.CONTIGUOUS, MemoryFormat.CHANNELS_LAST


def apply_to_model(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """``model`` with its 4-D parameters and buffers in ``name``'s layout (in place)."""
    if check_memory_format(name) == CHANNELS_LAST:
        model = model.to(memory_format=torch.channels_last)
    return model


def apply_to_inputs(inputs: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    """The 4-D floating inputs (images) in ``name``'s layout; ids and masks as they are."""
    if check_memory_format(name) != CHANNELS_LAST:
        return inputs
    return {key: value.contiguous(memory_format=torch.channels_last)
            if value.dim() == 4 and value.is_floating_point() else value
            for key, value in inputs.items()}

