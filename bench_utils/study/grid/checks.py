"""The checks a grid file goes through: each mistake a ``GridError`` of one line naming file and key."""

from __future__ import annotations

import difflib
import re
from typing import Any, Callable

from ...errors import UserError
from ...parameters import quoted


class GridError(UserError):
    """A grid file that cannot be run; the message is one line naming file and key."""


def fail(path: str, key: str, message: str) -> GridError:
    return GridError(f"{path}: {key}: {message}")


def check_type(path: str, key: str, value: Any, expected) -> None:
    if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise fail(path, key, f"must be an integer, got {quoted(value)}")
    if expected is list and not isinstance(value, list):
        raise fail(path, key, f"must be a list, got {quoted(value)}")
    if expected not in (int, list) and not isinstance(value, expected):
        names = (" or ".join(t.__name__ for t in expected) if isinstance(expected, tuple)
                 else expected.__name__)
        raise fail(path, key, f"must be {names}, got {quoted(value)}")


def unknown_keys(path: str, where: str, mapping: dict, known) -> None:
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key)[:100], list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise fail(path, f"{where}{quoted(key) if not isinstance(key, str) or len(key) > 60 else key}",
                       f"unknown key{hint}; known keys: {', '.join(known)}")


def non_empty(path: str, key: str, values: list) -> None:
    if not values:
        raise fail(path, key, "must not be empty")


def _names_listed_once(path: str, key: str, values: list, pattern: str, not_a_name: Callable[[Any], str],
                       once_because: str | None = None) -> list[str]:
    """``values``, a non-empty list under ``key``: each a string matching ``pattern`` (else ``not_a_name(value)``
    says why not), each once (``once_because`` says why, where given)."""
    non_empty(path, key, values)
    checked: list[str] = []
    for value in values:
        if not isinstance(value, str) or not re.fullmatch(pattern, value):
            raise fail(path, key, not_a_name(value))
        if value in checked:
            raise fail(path, key, f"{value} is listed twice" + (f": {once_because}" if once_because else ""))
        checked.append(value)
    return checked


def check_devices(path: str, devices: list) -> list[str]:
    """The devices cells run on: kinds (cpu, cuda) or pinned devices (cuda:N), each once."""
    return _names_listed_once(path, "devices", devices, r"cpu|cuda(:\d+)?",
                              lambda device: f"unknown device {quoted(device)}: use cpu, cuda or cuda:N",
                              once_because="one worker per device")


def check_accelerators(path: str, kinds: list) -> list[str]:
    """A cluster's accelerator types to cover, as Ray names them (H100, A100, L4, or a node's own
    custom kind): non-empty names, each once."""
    return _names_listed_once(path, "accelerators", kinds, r"[A-Za-z0-9][A-Za-z0-9_.+-]*",
                              lambda kind: f"{quoted(kind)} is not an accelerator type name (such as H100, A100, L4)")


def check_timm(path: str, where: str, model: str) -> str:
    import timm  # only for grids that name a timm model

    name = model[len("timm:"):]
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=1)
        hint = f" Did you mean 'timm:{close[0]}'?" if close else ""
        raise fail(path, where + "models", f"unknown timm model {name!r}.{hint}")
    return model


def checked_names(path: str, key: str, values: list, check) -> list[str]:
    non_empty(path, key, values)
    try:
        return list(dict.fromkeys(str(check(str(value))) for value in values))
    except UserError as exc:
        raise fail(path, key, str(exc)) from None
