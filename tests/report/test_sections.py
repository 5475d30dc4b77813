import re

import pytest

from bench_utils.report import sections
from bench_utils.report.markdown import mode_label
from bench_utils.report.sections import ReportView

from explore_data import EXAMPLE


@pytest.mark.parametrize("locale", ["ar", "es"])
def test_no_english_device_words_or_mode_names_are_left_in_a_translated_page(locale, monkeypatch):
    shown = []
    monkeypatch.setattr(sections, "display", lambda obj: shown.append(obj.data))
    view = ReportView([EXAMPLE], locale)
    for section in ("header", "summary", "guide_tables", "compile_cost", "memory", "reference", "methodology"):
        getattr(view, section)()
    page = "\n".join(text for text in shown if isinstance(text, str))
    assert "AMD EPYC" in page  # the example's CPU, named as recorded
    english = ["unknown", "n/a"] + (["CPU", "GPU"] if locale == "ar" else [])  # Spanish says CPU and GPU too
    assert not [word for word in english if re.search(rf"\b{re.escape(word)}\b", page)]
    assert mode_label("default", view.catalog) in page and view.catalog.mode_name("default") != "default"
