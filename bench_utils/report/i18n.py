"""Messages and number formats of the reports, per locale.

One JSON catalog per locale (``locales/<locale>.json``); a missing key is an error, never a silent fallback to
English. Numbers are formatted with Babel at render time only; the text direction and the language's own name come
from Babel's locale data (CLDR), not from the catalogs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Callable

from babel import Locale, UnknownLocaleError
from babel.lists import format_list
from babel.numbers import format_decimal, format_percent

from ..errors import UserError

DYNAMIC_BATCH_SUFFIX = "+dynamic-batch"  # a mode compiled once for all batch sizes, as ``frame`` names it
INDUCTOR_SEPARATOR = " + "  # a mode and the Inductor configuration it was compiled with

LOCALES_DIR = Path(__file__).parent / "locales"


def available_locales() -> list[str]:
    return sorted(path.stem for path in LOCALES_DIR.glob("*.json"))


@functools.lru_cache(maxsize=None)
def _load(locale: str) -> dict[str, str]:
    path = LOCALES_DIR / f"{locale}.json"
    if not path.exists():
        raise UserError(f"no catalog for locale {locale!r}: available {', '.join(available_locales())}")
    return json.loads(path.read_text(encoding="utf-8"))


class Catalog:
    """``t(key, **values)`` for messages; ``mode_name`` for compile modes; ``number``, ``percent``
    for figures."""

    def __init__(self, locale: str) -> None:
        self.locale = locale
        self.messages = _load(locale)
        try:
            cldr = Locale.parse(locale)
        except (ValueError, UnknownLocaleError):
            raise ValueError(f"Babel has no locale data for {locale!r} (its text direction and "
                             "name): use a CLDR locale code such as en, ar or es") from None
        self.direction = cldr.text_direction            # "rtl" or "ltr"
        name = cldr.get_display_name()                  # in the language itself: "العربية", "español"
        if name is None:
            raise ValueError(f"Babel has no name for {locale!r} in its own language: use a CLDR locale code "
                             "such as en, ar or es")
        self.language_name = name[:1].upper() + name[1:]  # a label of its own: "Español"

    def t(self, key: str, **values) -> str:
        try:
            message = self.messages[key]
        except KeyError:
            raise KeyError(f"locale {self.locale!r} has no message {key!r}") from None
        return message.format(**values) if values else message

    def plural(self, key: str, number: int, **values) -> str:
        """``t(key)`` where ``number`` is not 1, ``t(key + "_one")`` where it is and the catalog has it ("1 cell")."""
        one = f"{key}_one"
        return self.t(one if number == 1 and one in self.messages else key, **values)

    def status_name(self, status: str) -> str:
        """A cell's status (ok, oom, error, ...) in the locale's words; one the catalog does not know as written."""
        return self.t(f"status_{status}") if f"status_{status}" in self.messages else str(status)

    def mode_name(self, mode: str, code: Callable[[str], str] = str) -> str:
        """A compile mode (torch.compile's ``mode=``, or eager) in the locale's words, with the
        option's own name kept recognisable (``code`` wraps it, e.g. to keep it left-to-right);
        a mode the catalog does not know is shown as written."""
        base, _, option = mode.partition(INDUCTOR_SEPARATOR)
        if option:  # an Inductor configuration beyond the mode's (``frame``): "default + freezing"
            return self.t("mode_with_inductor", mode=self.mode_name(base, code), option=code(option))
        if mode.endswith(DYNAMIC_BATCH_SUFFIX):  # one compilation for all batch sizes (``frame``)
            return self.t("mode_dynamic_batch", mode=self.mode_name(mode[: -len(DYNAMIC_BATCH_SUFFIX)], code))
        key = f"mode_{mode}"
        return self.t(key, mode=code(mode)) if key in self.messages else code(mode)

    def number(self, value: float, digits: int = 2) -> str:
        pattern = "#,##0" + ("." + "0" * digits if digits else "")
        return format_decimal(value, format=pattern, locale=self.locale)

    def alternatives(self, items: list[str]) -> str:
        """``["2", "300"]`` as "2 or 300" in the locale's words (a comma list reads as one number: "2, 300")."""
        return format_list(list(items), style="or", locale=self.locale) if items else "–"

    def percent(self, fraction: float, digits: int = 0) -> str:
        pattern = "#,##0" + ("." + "0" * digits if digits else "") + "%"
        return format_percent(fraction, format=pattern, locale=self.locale)
