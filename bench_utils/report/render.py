"""Rendering the report: ``notebooks/report.ipynb`` executed by papermill once per locale, then nbconvert's HTML
page and Markdown README per locale, and an index linking them (docs/report.md says what each holds).

The records are read in the report kernel only. The lines it skips are handed back in its header's
output metadata (``SKIPPED_LINES_KEY``; the kernel's stderr is kept out of what is published), and
warned of here once each, named as they were given, so that the command prints them.
"""

from __future__ import annotations

import dataclasses
import html
import os
from pathlib import Path
import shutil
import tempfile
from typing import Any, Iterable
import warnings

from ..errors import UserError
from ..kernel import KERNEL_DIR_ENV, KERNEL_NAME, KERNEL_STDERR_ENV, ensure_kernel, register_engine
from ..paths import PROJECT_ROOT, make_folder, scrub
from ..records.results_file import CorruptRecordWarning, SkippedLine, check_readable
from .frame import results_files
from .i18n import Catalog, available_locales
from .markdown import plain
from .provenance import read_corrections
from .sanitize import CONTENT_SECURITY_POLICY, sanitized

REPORT_NOTEBOOK = PROJECT_ROOT / "notebooks" / "report.ipynb"
TEMPLATES = Path(__file__).parent / "templates"
FORMATS = ("html", "md")
HIDDEN_TAGS = {"parameters", "injected-parameters"}
SKIPPED_LINES_KEY = "bench_utils.skipped_lines"  # an output's metadata: the lines the report kernel skipped


def _exporter(exporter_class, template: str):
    """An nbconvert exporter of one of ``TEMPLATES`` that shows no code, no prompt and no parameters cell."""
    from traitlets.config import Config

    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_cell_tags = HIDDEN_TAGS
    config.TemplateExporter.exclude_input = True
    config.TemplateExporter.exclude_input_prompt = True
    config.TemplateExporter.exclude_output_prompt = True
    exporter = exporter_class(config=config, template_name=template, extra_template_basedirs=[str(TEMPLATES)])
    exporter.register_preprocessor("nbconvert.preprocessors.TagRemovePreprocessor", enabled=True)
    return exporter


def to_html(notebook, catalog: Catalog) -> str:
    from nbconvert import HTMLExporter

    exporter = _exporter(HTMLExporter, "study_report")
    exporter.language_code = catalog.locale
    exporter.register_filter("sanitized", sanitized)
    body, _ = exporter.from_notebook_node(notebook, resources={"direction": catalog.direction,
                                                               "content_security_policy": CONTENT_SECURITY_POLICY})
    return body


def to_markdown(notebook, catalog: Catalog) -> tuple[str, dict[str, bytes]]:
    from nbconvert import MarkdownExporter

    exporter = _exporter(MarkdownExporter, "study_markdown")
    exporter.register_filter("plain", plain)
    body, resources = exporter.from_notebook_node(notebook, resources={"unique_key": "README",
                                                                       "output_files_dir": "images"})
    if catalog.direction == "rtl":  # Markdown has no direction of its own: an HTML wrapper
        body = f'<div dir="rtl" lang="{catalog.locale}">\n\n{body.strip()}\n\n</div>\n'
    return body, resources.get("outputs", {})


def index_page(locales: list[str], formats: Iterable[str]) -> str:
    english = Catalog("en")
    items = []
    for locale in locales:
        catalog = Catalog(locale)
        links = [f'<a href="{locale}/{page}">{name}</a>' for fmt, page, name in
                 (("html", "index.html", "HTML"), ("md", "README.md", "Markdown")) if fmt in formats]
        items.append(f'<li lang="{locale}" dir="{catalog.direction}">{html.escape(catalog.language_name)}: '
                     f'{" · ".join(links)}</li>')
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">\n'
            f"<title>{html.escape(english.t('index_title'))}</title>\n</head>\n<body>\n"
            f"<h1>{html.escape(english.t('index_title'))}</h1>\n<p>{html.escape(english.t('index_text'))}</p>\n"
            f"<ul>\n{chr(10).join(items)}\n</ul>\n</body>\n</html>\n")


def skipped_lines_metadata(skipped: Iterable[SkippedLine]) -> dict[str, Any]:
    """An output's metadata that hands ``skipped`` (the report kernel's) to ``say_skipped_lines``."""
    return {SKIPPED_LINES_KEY: [dataclasses.asdict(line) for line in skipped]}


def say_skipped_lines(notebook, files: list[Path], said: set[SkippedLine]) -> None:
    """Warn (``CorruptRecordWarning``) of each line the executed ``notebook``'s kernel skipped and ``said`` does
    not hold yet, its file named as in ``files`` (the kernel's path may be spelt otherwise), then add it to
    ``said``: each line once, whatever the locales that read it."""
    given = {os.path.realpath(path): path for path in files}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            for line in output.get("metadata", {}).get(SKIPPED_LINES_KEY, []):
                skipped = SkippedLine(str(given.get(os.path.realpath(line["path"]), line["path"])), line["line"],
                                      line["reason"])
                if skipped not in said:
                    said.add(skipped)
                    warnings.warn(CorruptRecordWarning(skipped), stacklevel=2)


def publishable(notebook, folders: dict[str, str]):
    """The executed report notebook as it may be published: no stderr output (warnings are the
    kernel's, not the report's), no skipped lines handed back, and no absolute path of this machine
    in any output."""
    for cell in notebook.cells:
        if cell.get("cell_type") != "code":
            continue
        cell.outputs = [output for output in cell.get("outputs", [])
                        if not (output.get("output_type") == "stream" and output.get("name") == "stderr")]
        for output in cell.outputs:
            output.get("metadata", {}).pop(SKIPPED_LINES_KEY, None)
    import nbformat  # here: the report kernel imports this module (skipped_lines_metadata), never nbformat (2.3 s)

    text = scrub(nbformat.writes(notebook), folders)
    return nbformat.reads(text, as_version=4)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a reader never sees half a page."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def render(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike | None = None, *,
           locales: Iterable[str] = ("en", "ar", "es"), formats: Iterable[str] = FORMATS,
           progress=print, coverage: list[dict[str, Any]] | None = None) -> list[Path]:
    """Write every locale's report; return the paths written. ``coverage``: per study folder and environment,
    its grid's cells and how many are measured (``study.runner.coverage``), said at the top."""
    paths = list(paths)
    files = results_files(paths)
    check_readable(files)  # a file no record can be read from: one line, before any kernel starts
    read_corrections(paths)  # a corrections file it cannot say: one line naming it, before any kernel starts
    locales, formats = list(locales), list(formats)
    if not locales:
        raise UserError(f"no locale given: name one or more of {', '.join(available_locales())}")
    if not formats:
        raise UserError(f"no format given: use {', '.join(FORMATS)}")
    for locale in locales:
        if locale not in available_locales():
            raise UserError(f"unknown locale {locale!r}: available {', '.join(available_locales())}")
    for fmt in formats:
        if fmt not in FORMATS:
            raise UserError(f"unknown format {fmt!r}: use {', '.join(FORMATS)}")
    out = Path(out_dir) if out_dir else (Path(paths[0]) if Path(paths[0]).is_dir() else files[0].parent)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder")
    ensure_kernel()
    # in the command's kernel folder where there is one: a command killed outright leaves it to the next to remove
    kernel_log = tempfile.NamedTemporaryFile(prefix="report-kernel-", suffix=".log", delete=False,
                                             dir=os.environ.get(KERNEL_DIR_ENV))
    kernel_log.close()
    to_remove: str | None = kernel_log.name  # None: kept for the user to read
    os.environ[KERNEL_STDERR_ENV] = kernel_log.name  # the kernels' own lines, not the command's to print
    try:
        written = _render_locales(files, out, locales, formats, progress, coverage)
    except Exception:  # what the kernels said may explain it: kept outside the kernel folder, and named
        if Path(kernel_log.name).stat().st_size:
            kept = shutil.move(kernel_log.name, Path(tempfile.gettempdir()) / Path(kernel_log.name).name)
            progress(f"[report] the report kernels' own output: {kept}")
            to_remove = None
        raise
    finally:
        os.environ.pop(KERNEL_STDERR_ENV, None)
        if to_remove is not None:
            os.unlink(to_remove)
    index = out / "index.html"
    write_atomically(index, index_page(locales, formats).encode("utf-8"))
    written.append(index)
    return written


def _render_locales(files: list[Path], out: Path, locales: list[str], formats: list[str], progress,
                    coverage: list[dict[str, Any]] | None) -> list[Path]:
    """Each locale's notebook executed, then its pages written; the paths written."""
    import nbformat
    import papermill

    # Each results folder is named, in what is published, relative to the report's folder.
    folders = {str(f.parent.resolve()): os.path.relpath(f.parent.resolve(), out.resolve()) for f in files}
    folders[str(out.resolve())] = "."
    written: list[Path] = []
    said: set[SkippedLine] = set()
    for locale in locales:
        catalog = Catalog(locale)
        locale_dir = out / locale
        make_folder(locale_dir, "the report's folder")
        executed = locale_dir / "report.ipynb"
        running = locale_dir / ".report.partial.ipynb"  # papermill writes as it goes: never the published name
        try:
            papermill.execute_notebook(
                str(REPORT_NOTEBOOK), str(running), kernel_name=KERNEL_NAME, engine_name=register_engine(),
                cwd=str(PROJECT_ROOT),
                parameters={"results_paths": [os.path.relpath(f.resolve(), PROJECT_ROOT) for f in files],
                            "locale": locale, "reference_csv": "", "coverage": coverage or []},
                progress_bar=False, log_output=False, request_save_on_cell_execute=False)
            notebook = nbformat.read(running, as_version=4)
        except papermill.PapermillExecutionError:  # written up to the failing cell: what it skipped is said
            say_skipped_lines(nbformat.read(running, as_version=4), files, said)
            raise
        finally:  # an interrupted or failed execution leaves nothing under the locale's folder
            running.unlink(missing_ok=True)
        say_skipped_lines(notebook, files, said)
        notebook = publishable(notebook, folders)
        notebook.metadata["title"] = catalog.t("title")
        write_atomically(executed, nbformat.writes(notebook).encode("utf-8"))  # kept for audit, published too
        if "html" in formats:
            page = locale_dir / "index.html"
            write_atomically(page, to_html(notebook, catalog).encode("utf-8"))
            written.append(page)
        if "md" in formats:
            body, images = to_markdown(notebook, catalog)
            for name, data in images.items():
                image = locale_dir / name
                image.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(image, data)
            readme = locale_dir / "README.md"
            write_atomically(readme, body.encode("utf-8"))
            written.append(readme)
        progress(f"[report] {locale}: " + ", ".join(str(p) for p in written if p.parent == locale_dir))
    return written
