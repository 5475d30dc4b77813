"""Markdown for the report: every value shown as text, tables, numbers kept left-to-right inside right-to-left
text, and the names of environments and compile modes in the report's language.

A study's records travel (copied back from a GPU host, sent by a colleague) and its pages are published, so no
string a record or a study folder holds may become markup: ``ltr`` (and ``code``) is the one way such a value
enters the report's Markdown, and it escapes it (``plain``), so that it reads as the same text in the HTML page,
in the README.md a documentation site renders and in a notebook. The catalogs' messages are the only Markdown
the report writes itself.
"""

from __future__ import annotations

import html
import re
from typing import Any, cast

import pandas as pd

from .frame import TORCH_SEPARATOR
from .region_memory import NOT_MEASURABLE
from .i18n import Catalog
from ..vocabulary import Status

LRI, PDI = "\u2066", "\u2069"   # Unicode isolates: keep a run left-to-right in RTL text
WORD_JOINER = "\u2060"  # no line break here, and nothing shown
# Line breaks would end a table row or start a block: each becomes a space; other control characters (a NUL) are
# dropped. Bidirectional controls and other invisible format characters would reorder or hide what a record says
# (U+202E shows "DMA" as "AMD"; a record's U+2069 closes the page's own isolate): shown as their code points.
_LINE_BREAK = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_FORMAT = re.compile(r"[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
# What Markdown (CommonMark, GFM, nbconvert's mistune with math) reads as markup in running text: backslash,
# code, emphasis, links and images, headings, strikethrough, math; ``_`` only where it can open or close
# emphasis (inside a word, as in detr_r50, it is text). ``&``, ``<`` and ``>`` become entities instead.
_MARKUP = re.compile(r"[\\`*\[\]#~$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9]):(?=//)")  # scheme://... would be made a link
_WWW = re.compile(r"(?<![0-9A-Za-z])([wW]{3})\.")  # and www.example.com, under GitHub's Markdown (cmark-gfm)


def visible(value: Any, page_isolates: bool = False) -> str:
    """``value``'s text as a page may show it: one line, no control character, its invisible format characters
    (bidirectional controls, zero-width ones) shown as ``<U+202E>``; with ``page_isolates``, the isolates and word
    joiners ``isolated`` adds kept (a text assembled from isolated values)."""
    text = _CONTROL.sub("", _LINE_BREAK.sub(" ", str(value)))
    return _FORMAT.sub(lambda found: found.group(0) if page_isolates and found.group(0) in (LRI, PDI, WORD_JOINER)
                       else f"<U+{ord(found.group(0)):04X}>", text)


def plain(value: Any) -> str:
    """``value`` as Markdown that reads as exactly its text (``visible``, the page's own isolates kept: a record's
    value is isolated, its own isolates shown, before it joins a text): raw HTML, entities, links, emphasis
    escaped. A table cell's ``|`` is ``markdown_table``'s to escape."""
    text = html.escape(visible(value, page_isolates=True), quote=False)
    text = _MARKUP.sub(lambda found: "\\" + found.group(0), text)
    return _WWW.sub(r"\1\\.", _AUTOLINK.sub("\\:", text))


def isolated(text: Any, catalog: Catalog) -> str:
    """``text`` kept left-to-right inside right-to-left text and unbroken at a hyphen (a narrow Arabic table header
    broke "(reduce-overhead)" after "reduce-", and the line's right-to-left order then put its bracket at the wrong
    end); as it is in a left-to-right language. Not escaped: for plain text (an alt text), which its format escapes."""
    if catalog.direction != "rtl":
        return visible(text)
    return f"{LRI}{visible(text).replace('-', '-' + WORD_JOINER)}{PDI}"


def ltr(text: Any, catalog: Catalog) -> str:
    """A value (a number, a model's or a device's name, a version) shown as text in Markdown (``plain``), kept
    left-to-right in right-to-left text (``isolated``)."""
    return isolated(plain(visible(text)), catalog)  # the value's own isolates shown, then the page's around it


def code(text: Any, catalog: Catalog) -> str:
    """A value as inline code (a file, a field, a record id), left-to-right: a code span shows its content as
    written, so only its fence is chosen, longer than any run of backticks inside (CommonMark)."""
    text = visible(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") or not text.strip() else text
    return isolated(f"{fence}{padded}{fence}", catalog)


def environment_label(environment: str, catalog: Catalog, isolate: bool = True, markdown: bool = True) -> str:
    """An environment as ``frame`` names it (locale-neutral: its names group and sort the rows), its words CPU, GPU
    and unknown the catalog's ``device_*`` messages, names and versions kept left-to-right (``markdown=False``: plain
    text, for alt texts, which their format escapes; ``isolate=False`` too: as written, for figures)."""
    shown = (lambda text: ltr(text, catalog)) if isolate and markdown else (
        (lambda text: isolated(text, catalog)) if isolate else visible)
    device, torch, version = environment.partition(TORCH_SEPARATOR)
    if device == "GPU":
        label = catalog.t("device_gpu")
    elif device.startswith("CPU (") and device.endswith(")"):
        model = device[len("CPU ("):-1]
        label = catalog.t("device_cpu", model=catalog.t("device_unknown") if model == "unknown" else shown(model))
    else:
        label = shown(device)
    return label + (" · " + shown("torch " + version) if torch else "")


def mode_label(mode: str, catalog: Catalog) -> str:
    """A compile mode in the catalog's words, its torch.compile name kept left-to-right."""
    return catalog.mode_name(mode, lambda name: ltr(name, catalog))


def markdown_html(markdown: str) -> str:
    """The report's Markdown as HTML for pages and views made outside nbconvert (the explore notebook, the
    comparison page): mistune, nbconvert's own parser, with raw HTML escaped and harmful links dropped."""
    import mistune

    render = mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])
    return cast(str, render(markdown))  # HTML (mistune's type is any renderer's: the AST one gives a list)


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    def clean(value: str) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(clean, headers)) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(clean, row)) + " |" for row in rows]
    return "\n".join(lines)


def status_text(status: str, catalog: Catalog) -> str:
    return catalog.t("status_oom") if status == Status.OOM else catalog.t(
        "status_error") if status == Status.ERROR else catalog.t("status_missing")


def ms(value: float, catalog: Catalog) -> str:
    return ltr(catalog.number(value, 2), catalog)


def speedup_cells(row: pd.Series, catalog: Catalog) -> tuple[str, str]:
    if pd.isna(row["speedup"]):
        return "–", "–"
    value = ltr(catalog.number(row["speedup"], 2) + "×", catalog)
    if pd.isna(row["ci_low"]):  # one pair of blocks: no interval exists, none is shown
        return value, "–"
    interval = ltr(f"{catalog.number(row['ci_low'], 2)}–{catalog.number(row['ci_high'], 2)}", catalog)
    return value, interval


def rests_on(row: pd.Series, catalog: Catalog) -> str:
    """What a cell's figure rests on: its timed runs, its processes (replicates) and the GPUs that measured it, of
    all that measured the cell where more did (``frame.with_machines``; "–" where unknown: a CPU's)."""
    runs, processes, machines, every = (row.get(key) for key in ("runs", "replicates", "machines", "machines_all"))
    if any(value is None or pd.isna(value) for value in (runs, processes)):
        return "–"
    shown = "–" if machines is None or pd.isna(machines) else catalog.number(machines, 0)
    if shown != "–" and every is not None and pd.notna(every) and every > machines:
        shown = catalog.t("machines_of", shown=shown, every=catalog.number(every, 0))
    return ltr(f"{catalog.number(runs, 0)} · {catalog.number(processes, 0)} · {shown}", catalog)


def integer(value: Any, catalog: Catalog) -> str:
    if value is None or pd.isna(value):
        return "–"
    return ltr(str(int(value)), catalog)


def number(value: Any, digits: int, catalog: Catalog) -> str:
    """A number, or a dash where nothing was measured."""
    if value is None or pd.isna(value):
        return "–"
    return ltr(catalog.number(value, digits), catalog)


def mib(value: Any, catalog: Catalog) -> str:
    return number(None if value is None else value / 2**20, 1, catalog)


def region_mib(value: Any, method: Any, catalog: Catalog) -> str:
    """A region's memory (``region_memory.region_memory``) in MiB; where it was measured but no figure could
    see it (a CPU's resident memory that did not move), says so rather than 0 or a dash."""
    if method == NOT_MEASURABLE:
        return catalog.t("memory_not_measurable")
    return mib(value, catalog)
