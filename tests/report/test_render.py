import base64
import warnings
from pathlib import Path
import re
import shutil
import subprocess

import pytest

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from bench_utils.paths import PROJECT_ROOT
from bench_utils.report.render import SKIPPED_LINES_KEY, publishable, render, say_skipped_lines, skipped_lines_metadata
from bench_utils.records.results_file import CorruptRecordWarning, SkippedLine

FIXTURE = Path(__file__).parents[1] / "fixtures" / "smoke-results.jsonl"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    written = render([FIXTURE], out, locales=["en", "ar", "es"], formats=["html", "md"],
                     progress=lambda line: None)
    return out, written


def test_every_locale_gets_a_page_a_readme_and_the_index_links_them(rendered):
    out, written = rendered
    for locale in ("en", "ar", "es"):
        assert (out / locale / "index.html") in written and (out / locale / "README.md") in written
    index = (out / "index.html").read_text(encoding="utf-8")
    assert all(f'href="{locale}/index.html"' in index for locale in ("en", "ar", "es"))
    assert "العربية" in index and "Español" in index


def test_arabic_page_is_right_to_left_utf8_and_intact(rendered):
    out, _ = rendered
    page = (out / "ar" / "index.html").read_bytes().decode("utf-8")  # strict: fails on bad bytes
    assert re.search(r'<html[^>]*\bdir="rtl"', page) and re.search(r'<html[^>]*\blang="ar"', page)
    assert '<meta charset="utf-8"' in page.lower()
    assert "تسريع الاستدلال باستخدام torch.compile" in page and "تصنيف الصور" in page
    assert "\ufffd" not in page  # no replacement characters: the Arabic text came through whole


def test_pages_are_standalone_with_embedded_images_and_no_code(rendered):
    out, _ = rendered
    for locale in ("en", "ar", "es"):
        page = (out / locale / "index.html").read_text(encoding="utf-8")
        images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
        assert len(images) >= 3 and base64.b64decode(images[0])[:4] == b"\x89PNG"
        assert "ReportView" not in page and "results_paths" not in page  # no code, no parameters
        assert "injected-parameters" not in page
        assert not re.search(r'<script[^>]+src="https?://', page)  # nothing fetched online


def test_markdown_has_pipe_tables_and_the_plots_beside_it(rendered):
    out, _ = rendered
    for locale in ("en", "ar", "es"):
        readme = (out / locale / "README.md").read_text(encoding="utf-8")
        assert re.search(r"^\| .+ \|$\n^\|---", readme, re.MULTILINE)
        linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", readme)
        assert len(linked) >= 3 and all((out / locale / link).is_file() for link in linked)
    assert (out / "ar" / "README.md").read_text(encoding="utf-8").startswith('<div dir="rtl" lang="ar">')
    english = (out / "en" / "README.md").read_text(encoding="utf-8")
    assert "| timm:resnet18 | OOM |" in english and "eager cell: error" in english


def test_every_plot_says_what_it_shows_in_the_pages_language(rendered):
    # nbconvert's English "No description has been provided for this image" was every image's alt text
    from bench_utils.report.i18n import Catalog
    out, _ = rendered
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        page = (out / locale / "index.html").read_text(encoding="utf-8")
        alts = re.findall(r'<img[^>]*\balt="([^"]*)"', page)
        assert len(alts) >= 3 and "No description" not in page
        first_words = catalog.t("alt_batch_comparison", device="X", mode="Y").split("X")[0]
        assert any(alt.startswith(first_words) for alt in alts)
        readme = (out / locale / "README.md").read_text(encoding="utf-8")
        described = re.findall(r"!\[([^\]]*)\]\([^)]+\.png\)", readme)
        assert described and all(text and text != "png" for text in described)


def test_unknown_locale_or_format_is_refused():
    with pytest.raises(ValueError, match="unknown locale 'fr'"):
        render([FIXTURE], locales=["fr"])
    with pytest.raises(ValueError, match="unknown format 'pdf'"):
        render([FIXTURE], formats=["pdf"])


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")
def test_arabic_page_renders_in_headless_chromium(rendered, tmp_path):
    out, _ = rendered
    shot = tmp_path / "ar.png"
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--window-size=1280,2000", f"--screenshot={shot}", (out / "ar" / "index.html").as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    errors = [line for line in console if "Uncaught" in line or "Failed to load" in line or ":ERROR:" in line]
    assert not errors, errors


def test_published_files_hold_no_absolute_path_no_home_and_no_warning(tmp_path, capfd):
    from bench_utils.paths import PROJECT_ROOT

    study = tmp_path / "study"
    study.mkdir()
    # a torn line: the report kernel warns about it (naming the file), which must not be published;
    # render says it in its own process (where the command prints it)
    (study / "results.jsonl").write_bytes(FIXTURE.read_bytes() + b'{"schema_version": 1, "torn')
    with pytest.warns(CorruptRecordWarning, match=r"results\.jsonl:10: skipped: not valid JSON") as caught:
        render([study], locales=["en", "ar"], formats=["html", "md"], progress=lambda line: None)
    # read by each locale's kernel, said here once, named as given
    said = [str(w.message) for w in caught if w.category is CorruptRecordWarning]
    assert len(said) == 1 and said[0].startswith(f"{study / 'results.jsonl'}:10: skipped: not valid JSON"), said
    assert "WARNING" not in capfd.readouterr().err  # the kernels' own log (ipykernel's TCP warning)
    published = [path for path in study.rglob("*") if path.suffix in (".html", ".md", ".ipynb")]
    assert len(published) == 2 * 3 + 1  # per locale: page, README, executed notebook; the index
    for path in published:
        text = path.read_text(encoding="utf-8")
        for leak in (str(tmp_path), str(PROJECT_ROOT), str(Path.home()) + "/", "Warning"):
            assert leak not in text, (path.name, leak)


def kernel_notebook(*skipped: SkippedLine):
    """An executed report notebook whose header hands back ``skipped``, with the kernel's stderr beside it."""
    header = new_output("display_data", data={"text/markdown": "# Report"}, metadata=skipped_lines_metadata(skipped))
    stderr = new_output("stream", name="stderr", text="".join(f"{line}\n" for line in skipped))
    return new_notebook(cells=[new_code_cell("view.header()", outputs=[header, stderr])])


def test_the_lines_a_kernel_skipped_are_said_once_named_as_given_and_never_published(tmp_path):
    given = tmp_path / "study" / "results.jsonl"
    given.parent.mkdir()
    given.write_text("", encoding="utf-8")
    # the kernel reads it as the project's relative path resolves it: another spelling of the same file
    spelt = PROJECT_ROOT / Path(*[".."] * len(PROJECT_ROOT.parts[1:])) / given.relative_to("/")
    torn, other = SkippedLine(str(spelt), 7, "not valid JSON (x)"), SkippedLine("elsewhere.jsonl", 2, "older")
    said = set()
    with pytest.warns(CorruptRecordWarning) as caught:
        for _ in ("en", "ar"):  # each locale's kernel skips the same lines
            say_skipped_lines(kernel_notebook(torn, other), [given], said)
    assert [str(w.message) for w in caught] == [f"{given}:7: skipped: not valid JSON (x)",
                                                "elsewhere.jsonl:2: skipped: older"]
    published = publishable(kernel_notebook(torn), {})
    [header] = published.cells[0].outputs  # the stderr goes, and the lines handed back with it
    assert SKIPPED_LINES_KEY not in header.metadata and str(PROJECT_ROOT) not in nbformat.writes(published)


def test_ctrl_c_during_a_report_is_one_line_exit_130_and_leaves_no_kernel_nor_half_written_file(tmp_path):
    import shutil
    import sys

    import psutil

    from bench_utils.paths import PROJECT_ROOT
    from ctrl_c import interrupt_once_a_kernel_runs, start

    study = tmp_path / "study"
    study.mkdir()
    shutil.copyfile(FIXTURE, study / "results.jsonl")
    process = start([sys.executable, "-m", "bench_utils", "report", str(study), "--locales", "en,ar"], cwd=PROJECT_ROOT)
    interrupt_once_a_kernel_runs(process)  # the kernel is executing the report
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted: report stopped")
    assert "Traceback" not in err and "IPKernelApp" not in err
    assert not list(study.rglob("*partial*"))
    assert not psutil.Process().children(recursive=True) or all(
        "ipykernel" not in " ".join(child.cmdline()) for child in psutil.Process().children(recursive=True))


# --- a page no record can script ----------------------------------------------------------------------------------

LOCALES = ("en", "ar", "es")
SHOWN = ("cell.model", "environment.cpu_model", "environment.torch_git_version")  # fields every page shows


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A study whose records hold markup in every string the reader keeps (``hostile_records``: the rest are
    skipped, each naming its field), rendered in every locale and format."""
    from hostile_records import all_poisoned, read_jsonl, write_jsonl

    folder = tmp_path_factory.mktemp("hostile") / "study"
    records = [*read_jsonl(FIXTURE), *read_jsonl(PROJECT_ROOT / "reports" / "example-tiny" / "results.jsonl")]
    write_jsonl(folder / "results.jsonl", [all_poisoned(record) for record in records])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        render([folder], locales=list(LOCALES), formats=["html", "md"], progress=lambda line: None)
    assert not [w for w in caught if w.category is CorruptRecordWarning]  # every record shown, none skipped
    return folder


def test_a_records_markup_is_text_on_every_page_in_every_language(hostile):
    import mistune

    from hostile_records import assert_no_element_of_a_record, dom, payload

    for locale in LOCALES:
        elements, text = dom((hostile / locale / "index.html").read_text(encoding="utf-8"))
        assert_no_element_of_a_record(elements, f"{locale}/index.html")
        csp = [attributes for tag, attributes in elements if attributes.get("http-equiv") == "Content-Security-Policy"]
        assert csp and "default-src 'none'" in csp[0]["content"]
        for field in SHOWN:
            assert payload(field) in text, (locale, field)
        # the README as a documentation site renders it, raw HTML allowed
        markdown = (hostile / locale / "README.md").read_text(encoding="utf-8")
        elements, text = dom(mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])(markdown))
        assert_no_element_of_a_record([item for item in elements if item != ("div", {"dir": "rtl", "lang": "ar"})],
                                f"{locale}/README.md")
        for field in SHOWN:
            assert payload(field) in text, (locale, field)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")
def test_a_records_markup_runs_nothing_in_headless_chromium(hostile, tmp_path):
    from playwright.sync_api import sync_playwright

    from hostile_records import PROBE, payload

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            for locale in LOCALES:
                page, dialogs, errors = browser.new_page(), [], []
                page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
                page.on("console", lambda message: message.type == "error" and errors.append(message.text))
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto((hostile / locale / "index.html").as_uri())
                page.wait_for_load_state("load")
                found = page.evaluate(f"""() => ({{
                    made: document.querySelectorAll('{PROBE}, script, iframe, [onerror], [onclick]').length,
                    away: [...document.querySelectorAll('a[href]')].filter(a => !a.getAttribute('href').startsWith('#')).length,
                    text: document.body.innerText.replace(/[\\u2066\\u2069\\u2060]/g, ''),
                }})""")
                assert found["made"] == 0 and found["away"] == 0, (locale, found["made"], found["away"])
                assert payload("cell.model") in found["text"], locale
                assert not dialogs and not errors, (locale, dialogs, errors)
                page.close()
        finally:
            browser.close()


@pytest.mark.parametrize("study", sorted(path.parent.parent.name for path in (PROJECT_ROOT / "reports").glob("*/en/README.md")))
def test_a_committed_studys_page_is_what_its_records_render_to_now(study, tmp_path):
    # the published page and the code agree: a change to how records are read or shown that moves a committed
    # page shows here (and the page is rendered again, with the change, in the same commit)
    from bench_utils.study.runner.coverage import grid_coverage

    folder = PROJECT_ROOT / "reports" / study
    render([folder], tmp_path, locales=["en"], formats=["md"], progress=lambda line: None,
           coverage=grid_coverage(folder))
    published = (folder / "en" / "README.md").read_text(encoding="utf-8")
    assert (tmp_path / "en" / "README.md").read_text(encoding="utf-8") == published
