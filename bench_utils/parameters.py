"""A task notebook's list parameters, as a person or papermill's command line gives them, and
named choices checked with the closest valid name offered.

``papermill ... -p models vit`` injects the string ``"vit"``, which a loop would take as the models "v", "i" and "t":
every list parameter also accepts one plain string, one item or several separated by commas (``-p models vit,resnet``).
"""

from __future__ import annotations

import difflib
import reprlib
from typing import Any, Sequence

from .errors import UserError

# A value quoted in an error: short whatever it holds (a YAML anchor bomb's 10^5 strings, a 300-character name)
_SHORT = reprlib.Repr()  # its keyword arguments are Python 3.12's
for _name, _limit in dict(maxlevel=2, maxtuple=4, maxlist=4, maxdict=4, maxset=4, maxstring=60, maxlong=40,
                          maxother=60).items():
    setattr(_SHORT, _name, _limit)


def quoted(value: Any) -> str:
    """``repr(value)`` cut short (nested lists, long strings), for one line of an error message."""
    return _SHORT.repr(value)


def text_list(name: str, value: Any) -> list[str]:
    """``value`` as a list of non-empty strings: a list as given, or a string split on commas."""
    if value is None:
        return []
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = [str(part).strip() for part in value]
    else:
        items = [str(value).strip()]
    if any(not item for item in items):
        raise UserError(f"{name}: an empty item in {quoted(value)}")
    return items


def one_of(what: str, value: Any, valid: Sequence[str]) -> str:
    """``value`` if it is one of ``valid``; else a UserError naming the closest valid one."""
    if value not in valid:
        close = difflib.get_close_matches(str(value), list(valid), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UserError(f"unknown {what} {quoted(value)}.{hint} Valid: {', '.join(valid)}")
    return value


def positive_int_list(name: str, value: Any) -> list[int]:
    """``value`` as a list of positive integers (``4``, ``"1,4,16"``, ``[1, 4]`` alike)."""
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else text_list(name, value)
    numbers = []
    for item in items:
        text = str(item)
        if isinstance(item, bool) or not text.isdigit() or int(text) < 1:
            raise UserError(f"{name}: positive integers only, got {quoted(item)} in {quoted(value)}")
        numbers.append(int(text))
    return numbers
