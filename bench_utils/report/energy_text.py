"""An energy figure as the page shows it, with what ``energy_readings`` found beside it: its window's pace where it
differs from the timed latency, and the throttle reasons the GPU reported."""

from __future__ import annotations

from typing import Any

from .energy_readings import pace_differs
from .i18n import Catalog
from .markdown import ltr, number


def joules_text(joules: float | None, window: float, timed_ms: float, throttled: Any, catalog: Catalog) -> str:
    """A joules figure as the page shows it: with its window's pace beside the timed latency where they differ
    (``pace_differs``), and the throttle reasons read around its window."""
    text = number(joules, 3, catalog)
    if text == "–":
        return text
    if pace_differs(window, timed_ms):
        text += " " + catalog.t("energy_pace_differs", window=ltr(catalog.number(window, 2), catalog),
                                timed=ltr(catalog.number(timed_ms, 2), catalog))
    flag = throttled_flag(throttled, catalog)
    return f"{text} ({flag})" if flag else text


def throttled_flag(reasons: Any, catalog: Catalog) -> str:
    """"throttled: SwPowerCap" where ``reasons`` (a frame's ``throttled`` columns) names any; else empty."""
    if not isinstance(reasons, tuple) or not reasons:
        return ""
    return catalog.t("flag_throttled", reasons=ltr(", ".join(reasons), catalog))
