import re

import pytest

from bench_utils.report import sections
from bench_utils.report.markdown import mode_label
from bench_utils.report.render import SKIPPED_LINES_KEY
from bench_utils.report.sections import ReportView

from explore_data import EXAMPLE


@pytest.mark.parametrize("locale", ["ar", "es"])
def test_no_english_device_words_or_mode_names_are_left_in_a_translated_page(locale, monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: shown.append(obj.data))
    view = ReportView([EXAMPLE], locale)
    for section in ("header", "summary", "guide_tables", "compile_cost", "memory", "losses", "reference", "record_notes",
                    "methodology"):
        getattr(view, section)()
    page = "\n".join(text for text in shown if isinstance(text, str))
    assert "AMD EPYC" in page  # the example's CPU, named as recorded
    english = ["unknown", "n/a"] + (["CPU", "GPU"] if locale == "ar" else [])  # Spanish says CPU and GPU too
    assert not [word for word in english if re.search(rf"\b{re.escape(word)}\b", page)]
    assert mode_label("default", view.catalog) in page and view.catalog.mode_name("default") != "default"


def damaged_copy(folder):
    """The example study with a byte-order mark before its first line and a line torn at its end."""
    folder.mkdir()
    text = EXAMPLE.read_text(encoding="utf-8")
    (folder / "results.jsonl").write_text(text + text.splitlines()[0][:40], encoding="utf-8-sig")
    return folder, len(text.splitlines()) + 1


@pytest.mark.parametrize("locale, words", [("en", "Lines of"), ("ar", "أسطر من"), ("es", "Líneas de")])
def test_the_header_counts_the_lines_skipped_per_file_and_the_lines_are_listed(locale, words, tmp_path,
                                                                               monkeypatch, capsys):
    shown, handed = [], []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: (shown.append(obj.data),
                                                                          handed.append(metadata)))
    study, torn = damaged_copy(tmp_path / "study")
    view = ReportView([study], locale)
    view.header()
    assert len(view.data) == torn - 1  # every record, the first one behind the mark included
    assert f"{study / 'results.jsonl'}:{torn}: skipped: not valid JSON" in capsys.readouterr().err
    # (the example's records were measured before switch calls: a note after the results says so, not the header)
    assert shown[0].startswith("# ")  # the title, then the results' picture, then the notes on them
    text = "\n\n".join(item for item in shown if isinstance(item, str))
    skipped = [line for line in text.split("\n\n") if line.startswith("> ") and words in line]
    assert len(skipped) == 1 and "study/results.jsonl" in skipped[0]
    assert re.search(r"\b1\b", skipped[0])
    # handed to the command that renders the notebook, in the header's output metadata
    [line] = handed[0][SKIPPED_LINES_KEY]
    assert line["path"] == str(study / "results.jsonl") and line["line"] == torn
    assert line["reason"].startswith("not valid JSON")


def test_the_header_says_nothing_of_skipped_lines_where_none_were(monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: shown.append(obj.data))
    view = ReportView([EXAMPLE], "en")
    view.header()
    text = "\n\n".join(item for item in shown if isinstance(item, str))
    assert "Lines of" not in text and "skipped" not in text
    # the title, every compiled cell's speed-up in one picture, then what changes what it means (the guide's caveats)
    assert shown[0].startswith("# ") and isinstance(shown[1], bytes) and shown[1].startswith(b"\x89PNG")
    assert view.catalog.t("difference_weights_random") in shown[2]


def test_a_results_file_with_no_record_is_one_line_in_the_notebook_and_the_command(tmp_path):
    import subprocess
    import sys
    from bench_utils.paths import PROJECT_ROOT
    from bench_utils.records.results_file import NoRecordsError

    (tmp_path / "results.jsonl").write_text("")
    with pytest.raises(NoRecordsError, match="is empty"):
        ReportView([tmp_path], "en")
    done = subprocess.run([sys.executable, "-m", "bench_utils", "report", str(tmp_path), "--locales", "en"],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == f"error: {tmp_path / 'results.jsonl'} is empty: no cell " \
        "has been measured into it yet (run a grid into its folder)"
    assert list(tmp_path.iterdir()) == [tmp_path / "results.jsonl"]  # nothing written


@pytest.mark.parametrize("locale, pairs", [("en", "pairs of blocks"), ("ar", "أزواج الكتل"), ("es", "pares de bloques")])
def test_the_summary_defines_the_speed_up_it_prints_and_the_methodology_what_its_interval_covers(locale, pairs,
                                                                                                monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: shown.append(obj.data))
    view = ReportView([EXAMPLE], locale)
    view.summary()
    # the geometric mean of the pairs' ratios of block means (measurement.paired), not a ratio of mean latencies
    summary = shown[-1]
    assert pairs in summary
    if locale == "en":
        assert "(eager mean latency / compiled mean latency)" not in summary
    view.methodology()
    assert view.catalog.t("methodology_interval") in shown[-1]  # one run's pairs: not the spread between runs


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_the_page_opens_with_what_differs_from_the_guide_and_keeps_the_records_bookkeeping_for_after_the_results(
        locale, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: shown.append(obj.data))
    study = tmp_path / "study"
    study.mkdir()
    (study / "results.jsonl").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    (study / "corrections.yaml").write_text("- field: environment.git_commit\n  records: all\n"
                                            "  reason: enclosing_repository\n")
    view = ReportView([study], locale)
    view.header()
    header = shown[-1]
    assert view.catalog.t("difference_weights_random") in header  # the random-weights caveat, at the top
    assert "environment.git_commit" not in header  # a wrong commit is no opening
    notes = view.record_notes_text()
    assert len(notes) == 2  # the correction, and the cells measured before switch calls (the example's are)
    assert not [note for note in notes if note in header]
    view.record_notes()
    assert shown[-1].startswith(f"## {view.catalog.t('record_notes_heading')}")
    assert all(note in shown[-1] for note in notes)


def test_records_with_nothing_to_note_make_no_section(monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj, metadata=None: shown.append(obj.data))
    view = ReportView([EXAMPLE], "en")
    monkeypatch.setattr(view, "record_notes_text", lambda: [])
    view.record_notes()
    assert shown == []
