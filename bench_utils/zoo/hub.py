"""Pretrained weights from the Hugging Face hub, and a quick answer where it is out of reach.

Offline (the study's normal case) every pretrained load fails at once with one
line naming the checkpoint, instead of waiting through the hub client's retries.
"""

from __future__ import annotations

import functools
from pathlib import Path
import socket
import urllib.parse

HUB_PROBE_TIMEOUT_S = 3.0


class WeightsUnavailableError(ValueError):
    """Pretrained weights were asked for and cannot be had here."""


def transformers_class(name: str):
    """The transformers class of that name (transformers is imported only when needed)."""
    import transformers

    return getattr(transformers, name)


def hub_error(checkpoint: str, exc: Exception) -> WeightsUnavailableError:
    """One line saying why the checkpoint cannot be had, and what to use instead."""
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


def from_hub(checkpoint: str, model_class_names: tuple[str, ...]):
    """Model, image processor and (for OwlViT) tokenizer from the hub or a local folder."""
    from transformers import AutoImageProcessor

    if not Path(checkpoint).is_dir():
        reason = hub_unreachable_reason()
        if reason:
            raise hub_error(checkpoint, OSError(reason))
    errors = []
    for name in model_class_names:
        try:
            model = transformers_class(name).from_pretrained(checkpoint)
            break
        except (OSError, ValueError, KeyError) as exc:
            errors.append(exc)
    else:
        raise hub_error(checkpoint, errors[0])
    try:
        processor = AutoImageProcessor.from_pretrained(checkpoint)
    except (OSError, ValueError) as exc:
        raise hub_error(checkpoint, exc) from None
    tokenizer = None
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    except Exception:
        pass  # image-only checkpoints have none
    return model, processor, tokenizer
