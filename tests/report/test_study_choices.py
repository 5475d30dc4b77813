"""The studies the exploration notebook offers (``report.study_choices``)."""

from bench_utils.paths import PROJECT_ROOT
from bench_utils.report.study_choices import relative, study_choices


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def test_examples_then_the_studies_under_reports_then_what_was_given(tmp_path):
    write(tmp_path / "notebooks" / "examples" / "b.jsonl", ["{}", "{}"])
    write(tmp_path / "reports" / "zeta" / "results.jsonl", ["{}"])
    write(tmp_path / "reports" / "alpha" / "results.jsonl", ["{}", "", "{}", "{}"])
    write(tmp_path / "reports" / "_scratch" / "results.jsonl", ["{}"])   # scratch: left out
    (tmp_path / "reports" / "empty").mkdir()                             # no records: left out
    write(tmp_path / "elsewhere" / "mine.jsonl", ["{}"])
    outside = tmp_path.parent / "outside-study.jsonl"
    choices = study_choices(["elsewhere/mine.jsonl", "reports/alpha", outside], root=tmp_path)
    assert [(choice.path, choice.records) for choice in choices] == [
        ("notebooks/examples/b.jsonl", 2), ("reports/alpha", 3), ("reports/zeta", 1),
        ("elsewhere/mine.jsonl", 1), (outside.resolve().as_posix(), 0)]
    assert choices[1].label == "reports/alpha (3)"


def test_the_projects_own_studies_are_offered_on_a_fresh_clone():
    paths = [choice.path for choice in study_choices()]
    assert "notebooks/examples/explore-example.jsonl" in paths and "reports/hf-guide-h200" in paths
    assert relative(PROJECT_ROOT / "reports" / "x") == "reports/x" and relative("reports/x") == "reports/x"
