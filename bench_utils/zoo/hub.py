"""Pretrained weights from the Hugging Face hub, and a quick answer where it is out of reach.

Offline (the study's normal case) every pretrained load fails at once with one
line naming the checkpoint, instead of waiting through the hub client's retries.
"""

from __future__ import annotations

import functools
from pathlib import Path
import socket
import urllib.parse

from ..errors import UserError

HUB_PROBE_TIMEOUT_S = 3.0


class WeightsUnavailableError(UserError):
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
    """Why the model hub cannot be reached (None if it can), found out quickly and once (not through the hub
    client's retries, about half a minute each)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    host = urllib.parse.urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"cannot connect to the hub ({exc.strerror or type(exc).__name__})"
    return None


def expected_weights(requested: str, model_key: str) -> str:
    """The weights a load of ``model_key`` will measure for ``requested``, known before loading it (the
    runner's resume needs it: a cell asked for ``auto`` is the same measurement as one asked for
    ``random`` wherever ``auto`` comes to random). ``auto`` is random where the hub cannot be reached and
    the checkpoint is no local folder, as ``from_hub`` and timm's load decide; else pretrained (a hub
    without the checkpoint still falls back to random: the record says so, and resume measures it again)."""
    if requested != "auto":
        return requested
    from .registry import TIMM_PREFIX, resolve_key

    if not model_key.startswith(TIMM_PREFIX):
        try:
            spec = resolve_key(model_key)
        except UserError:  # an unknown name: the load says so
            spec = None
        if Path(spec.checkpoint if spec else model_key).is_dir():
            return "pretrained"
    return "random" if hub_unreachable_reason() else "pretrained"


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
