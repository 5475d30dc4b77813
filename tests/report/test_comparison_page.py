import pytest

from bench_utils.report import comparison_page, regressions
from bench_utils.report.i18n import Catalog

from explore_data import example_records, remeasured, write_study


def compared(published, reproduced):
    data = comparison_page.both_studies(published, reproduced)
    return regressions.compare_environments(data, comparison_page.PUBLISHED, comparison_page.REPRODUCED)


@pytest.fixture
def studies(tmp_path):
    """The checked-in example as published, and a re-run where Segformer lost a third, DETR gained and
    ResNet moved within the tolerance (the example: ResNet 1.07x, Segformer 1.81x, DETR 1.18x)."""
    published = write_study(tmp_path / "example", example_records())
    again = write_study(tmp_path / "example-reproduced",
                        remeasured(speedups={"resnet": 1.04, "segformer": 1.2, "detr": 1.5}))
    return published, again


def test_each_cell_gets_the_verdict_its_intervals_give(studies):
    table = compared(*studies).set_index("model")
    assert table.loc["ResNet", "verdict"] == "same"
    assert table.loc["Segformer", "verdict"] == "regression" and table.loc["Segformer", "ratio_high"] < 1
    assert table.loc["DETR", "verdict"] == "improvement" and table.loc["DETR", "ratio_low"] > 1
    # two folders measured under the same environment label are still two sides: named by folder, not torch
    same_label = write_study(studies[1].parent / "same-label", example_records())
    assert set(compared(studies[0], same_label)["verdict"]) == {"same"}


def test_the_page_says_one_line_per_cell_in_every_locale_with_regressions_in_red(studies):
    table, pages = comparison_page.render_comparison(*studies)
    assert sorted(p.relative_to(studies[1]).as_posix() for p in pages) == [
        f"comparison/{locale}/{name}" for locale in ("ar", "en", "es") for name in ("README.md", "index.html")]
    english = (studies[1] / "comparison" / "en" / "README.md").read_text(encoding="utf-8")
    lines = [line for line in english.splitlines() if line.startswith("- ")]
    assert len(lines) == len(table) == 3
    segformer = next(line for line in lines if "Segformer" in line)
    assert "slower" in segformer and "1.81x published, 1.20x re-run" in segformer
    assert any("ResNet" in line and "the same within the intervals" in line for line in lines)
    assert "1 the same within the intervals, 1 faster, 1 slower" in english
    page = (studies[1] / "comparison" / "en" / "index.html").read_text(encoding="utf-8")
    assert "#f8d7da" in page and "#d4edda" in page  # the regression red, the improvement green
    assert set(table["why"]) == {"", "speed-up 34% lower", "speed-up 27% higher"}  # the table returned: English
    for locale in ("ar", "es"):
        catalog = Catalog(locale)
        text = (studies[1] / "comparison" / locale / "README.md").read_text(encoding="utf-8")
        assert catalog.t("reproduce_slower") in text and catalog.t("reproduce_faster") in text
        assert (studies[1] / "comparison" / locale / "index.html").read_text(
            encoding="utf-8").startswith(f'<!DOCTYPE html>\n<html lang="{locale}" dir="{catalog.direction}">')


def test_a_folder_without_records_is_refused(studies, tmp_path):
    empty = write_study(tmp_path / "empty", [])
    with pytest.raises(ValueError, match="holds no record"):
        compared(studies[0], empty)


def test_a_records_markup_is_text_on_the_comparison_page(tmp_path):
    import mistune

    from hostile_records import all_poisoned, assert_no_element_of_a_record, dom, payload

    hostile = [all_poisoned(record) for record in example_records()]
    published = write_study(tmp_path / "example", hostile)
    again = write_study(tmp_path / "again", [{**record, "record_id": record["record_id"] + "x"} for record in hostile])
    _, pages = comparison_page.render_comparison(published, again)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        html = text if page.suffix == ".html" else mistune.create_markdown(escape=False)(text)
        elements, shown = dom(html)
        assert_no_element_of_a_record([item for item in elements if item[0] != "div"], str(page))
        assert payload("cell.model") in shown or payload("model.label") in shown, page
