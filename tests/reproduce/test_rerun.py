import json
import shutil

import numpy as np
import pytest

from bench_utils.records.environment_files import StudyEnvironment, environment_of
from bench_utils.paths import REPORTS_DIR
from bench_utils.report.regressions import ratio_interval
from bench_utils.reproduce import environment_build
from bench_utils.reproduce.rerun import choose_environment, reproduce
from bench_utils.records.schema import Record

EXAMPLE = REPORTS_DIR / "example-tiny"  # the checked-in published study (params/example-tiny.yaml)


def compiled_speedup(folder):
    for line in (folder / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["cell"]["compile_mode"] != "eager":
            speedup = record["speedup"]
            return speedup["mean"], *speedup["mean_ci95"], speedup["pairs"]


def example_is_this_environment() -> bool:
    record = json.loads((EXAMPLE / "results.jsonl").read_text().splitlines()[0])
    environment = environment_of(Record.from_json(record))
    return environment_build.matches_running(environment.packages, environment.python_version)


@pytest.mark.skipif(not example_is_this_environment(), reason="the example was measured with the lock's versions "
                    "(make setup); this environment differs, and building that one takes torch's download")
def test_reproducing_the_example_study_ends_with_verdicts_from_the_intervals(tmp_path):
    study = shutil.copytree(EXAMPLE, tmp_path / "example-tiny", ignore=shutil.ignore_patterns("environments"))
    done = reproduce(study, locales=("en", "es"), say=lambda line: None)
    assert done.run_status == 0 and done.folder == tmp_path / "example-tiny-reproduced"
    assert (study / "environments").is_dir() and (done.folder / "grid.yaml").read_text() == (study / "grid.yaml").read_text()
    (row,) = done.comparison.itertuples()
    base, cand = compiled_speedup(study), compiled_speedup(done.folder)
    ratio, low, high = (float(value) for value in ratio_interval(*base, *cand))
    assert np.isclose(row.speedup_ratio, ratio) and np.isclose(row.ratio_low, low) and np.isclose(row.ratio_high, high)
    expected = ("regression" if high < 1 and ratio < 0.9 else "improvement" if low > 1 and ratio > 1 / 0.9
                else "same")
    assert row.verdict == expected
    words = {"same": "the same within the intervals", "regression": "slower", "improvement": "faster"}[expected]
    line = next(line for line in (done.folder / "comparison" / "en" / "README.md").read_text().splitlines()
                if line.startswith("- "))
    assert line.startswith(f"- timm:resnet18, batch 1, default, float32: {words} ")
    assert f"95 % interval {low:.2f} to {high:.2f}" in line
    assert (done.folder / "comparison" / "es" / "index.html").exists()


def test_a_study_of_several_environments_asks_which(tmp_path):
    one, two = (StudyEnvironment("3.11.7", "x86_64", {"torch": version}, True, records)
                for version, records in (("2.14.1", 4), ("2.11.0+cu130", 2)))
    with pytest.raises(ValueError, match=r"2 environments: choose one with --environment \(py3.11-x86_64-torch2.14.1-"):
        choose_environment([one, two], None)
    assert choose_environment([one, two], two.identity) == two
    with pytest.raises(ValueError, match="no environment 'nope'"):
        choose_environment([one, two], "nope")


def test_a_study_folder_without_its_grid_or_records_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="is not a study folder"):
        reproduce(tmp_path / "missing")
    (tmp_path / "old").mkdir()
    with pytest.raises(ValueError, match="no results at"):
        reproduce(tmp_path / "old")
    (tmp_path / "old" / "results.jsonl").write_text((EXAMPLE / "results.jsonl").read_text())
    with pytest.raises(ValueError, match="keeps no grid.yaml"):
        reproduce(tmp_path / "old")


def test_an_out_that_is_a_file_is_one_line_before_any_environment_is_built(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    said = []
    with pytest.raises(ValueError, match=r"^--out .*a-file is a file, not a study folder$"):
        reproduce(EXAMPLE, out=tmp_path / "a-file", builds_dir=tmp_path / "builds", say=said.append)
    assert said == [] and not (tmp_path / "builds").exists()  # nothing built, nothing run


def test_a_study_whose_versions_cannot_be_installed_fails_in_one_line_naming_the_package(tmp_path, capsys,
                                                                                        monkeypatch):
    from bench_utils.cli import main

    study = shutil.copytree(EXAMPLE, tmp_path / "gone", ignore=shutil.ignore_patterns("environments"))
    records = [json.loads(line) for line in (study / "results.jsonl").read_text().splitlines()]
    for record in records:  # as if measured with a release the registry has since removed
        record["environment"]["packages"]["annotated-types"] = "0.0.404"
    (study / "results.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    monkeypatch.setattr(environment_build, "BUILDS_DIR", tmp_path / "builds")
    status = main(["reproduce", str(study)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err[-1].startswith("error: cannot build the study's environment: annotated-types==0.0.404 "
                                              "is not on the package index")
    assert "Traceback" not in "\n".join(err) and not (tmp_path / "gone-reproduced").exists()
