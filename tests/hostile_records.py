"""Records as a hostile or careless colleague might send them: markup in every string a record holds.

A study's ``results.jsonl`` travels (copied back from a GPU host, sent by a colleague) and its pages are
published, so the tests poison every string of real records, one field at a time (the reader keeps the record
or skips it naming that field) and all at once (the pages show each string as text and no element of it).
"""

from __future__ import annotations

import copy
from html.parser import HTMLParser
import json
from pathlib import Path
import re
from typing import Any, Iterator

PROBE = "xss-probe"  # an element no page has: found in a page's DOM, a record made it
# dicts whose keys are free text a record may hold (an error's reasons, a model's output names)
FREE_KEYS = ("compile.break_reasons", "compile.cudagraph_skip_reasons", "parity.per_tensor")


def payload(where: str) -> str:
    """Markup that, were it not escaped, would make an element, run script and link to a script, named by
    ``where`` so that a page showing it says which field it came from."""
    return (f'<{PROBE} data-f="{where}" onerror=alert(1)>[{where}](javascript:alert(1))</{PROBE}>'
            f"<script>alert(1)</script>")


def string_fields(record: Any, path: str = "") -> Iterator[str]:
    """The dotted path of every string value in ``record`` (lists by index)."""
    if isinstance(record, dict):
        for key, value in record.items():
            yield from string_fields(value, f"{path}.{key}" if path else key)
    elif isinstance(record, list):
        for index, value in enumerate(record):
            yield from string_fields(value, f"{path}[{index}]")
    elif isinstance(record, str):
        yield path


def poisoned(record: dict[str, Any], fields: set[str] | None = None, keys: bool = True) -> dict[str, Any]:
    """``record`` with the payload appended to each string value whose path is in ``fields`` (None: all), and
    to the keys of ``FREE_KEYS``' dicts where ``keys``."""
    def walk(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {(name + payload(f"{path}.{name}") if keys and path in FREE_KEYS else name):
                    walk(item, f"{path}.{name}" if path else name) for name, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{path}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, str) and (fields is None or path in fields):
            return value + payload(path)
        return value

    return walk(copy.deepcopy(record), "")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
    return path


def refusal(record: dict[str, Any]) -> str | None:
    """Why a reader skips ``record`` (``records.check.problem``: ``Record.from_json``, as every reader reads), or
    None."""
    from bench_utils.records.schema import problem

    return problem(record)


def all_poisoned(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with markup in every string a reader keeps it with (each field tried alone), and in the keys of
    ``FREE_KEYS``' dicts."""
    kept = {field for field in string_fields(record) if refusal(poisoned(record, {field}, keys=False)) is None}
    return poisoned(record, kept)


def dom(html: str) -> tuple[list[tuple[str, dict]], str]:
    """The elements of ``html`` with their attributes, and its text (Unicode isolates and word joiners, which the
    Arabic page puts around names, taken out)."""
    class Page(HTMLParser):
        def __init__(self):
            super().__init__()
            self.elements, self.text, self.skip = [], [], 0

        def handle_starttag(self, tag, attrs):
            self.elements.append((tag, dict(attrs)))
            self.skip += tag in ("style", "title")

        def handle_endtag(self, tag):
            self.skip -= tag in ("style", "title")

        def handle_data(self, data):
            if not self.skip:
                self.text.append(data)

    page = Page()
    page.feed(html)
    return page.elements, re.sub("[\u2066\u2069\u2060]", "", "".join(page.text))


def assert_no_element_of_a_record(elements: list[tuple[str, dict]], where: str) -> None:
    """No element a record could have made: the probe, a script or frame, an event handler, a link away from the
    page, an image that is not the page's own plot."""
    for tag, attributes in elements:
        assert tag not in (PROBE, "script", "iframe", "object", "embed"), (where, tag, attributes)
        assert not [name for name in attributes if name.lower().startswith("on")], (where, tag, attributes)
        assert (attributes.get("href") or "#").startswith("#"), (where, tag, attributes)  # the page's own anchors
        source = attributes.get("src") or "data:image/png"  # the page's embedded plots, the README's beside it
        assert source.startswith("data:image/png") or re.fullmatch(r"images/[\w.-]+\.png", source), (where, source)
