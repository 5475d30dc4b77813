import re

import pytest

from bench_utils.records import environment_files
from bench_utils.records.environment_files import read_requirements, study_environments, write_environment_files

from sample_records import ENV, ok_record, R, Rs

PACKAGES = {"torch": "2.14.1", "numpy": "2.4.6", "Jinja2": "3.1.6"}


def record(packages=PACKAGES, **environment):
    return ok_record(environment={**ENV, "python_version": "3.11.7", "machine": "x86_64", "packages": packages,
                                  **environment})


def test_a_study_environment_file_round_trips_to_the_versions_its_records_carry(tmp_path):
    records = [record(), record(), record({**PACKAGES, "numpy": "2.5.0"})]
    written = write_environment_files(tmp_path, Rs(records), "test")
    assert [path.parent.name for path in written] == ["environments", "environments"]
    by_records = {environment.records: environment for environment in study_environments(Rs(records))}
    first = read_requirements(written[0])
    assert first == {"jinja2": "3.1.6", "numpy": "2.4.6", "torch": "2.14.1"} == by_records[2].packages
    assert read_requirements(written[1])["numpy"] == "2.5.0"
    assert written[0].name.startswith("py3.11-x86_64-torch2.14.1-") and written[0].name != written[1].name
    assert "2 record(s) of study test" in written[0].read_text()


def test_a_file_of_an_environment_the_records_no_longer_hold_is_removed(tmp_path):
    stale = tmp_path / "environments" / "py3.10-x86_64-torch2.0-000000.txt"
    stale.parent.mkdir()
    stale.write_text("torch==2.0\n")
    (written,) = write_environment_files(tmp_path, Rs([record()]), "test")
    assert not stale.exists() and written.exists()


def test_a_cuda_build_names_the_index_that_serves_it(tmp_path):
    (written,) = write_environment_files(tmp_path, Rs([record({"torch": "2.11.0+cu130", "six": "1.17.0"})]), "gpu")
    text = written.read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cu130\n" in text and "torch==2.11.0+cu130\n" in text
    assert read_requirements(written) == {"torch": "2.11.0+cu130", "six": "1.17.0"}
    assert "torch2.11.0-cu130" in written.name


def test_records_before_the_package_list_pin_their_main_versions_and_say_so(tmp_path):
    old = ok_record(environment={**ENV, "transformers_version": "5.17.0", "timm_version": "1.0.30"})
    (written,) = write_environment_files(tmp_path, Rs([old]), "old")
    assert read_requirements(written) == {"torch": "2.15.0", "transformers": "5.17.0", "timm": "1.0.30"}
    assert "only these main versions were recorded" in written.read_text()
    assert not environment_files.environment_of(R(old)).complete


def test_a_line_that_is_not_an_exact_pin_is_refused_with_its_place(tmp_path):
    path = tmp_path / "env.txt"
    path.write_text("# header\ntorch==2.14.1\nnumpy>=2\n")
    with pytest.raises(ValueError, match=r"env.txt:3: not an exact pin \(name==version\): numpy>=2"):
        read_requirements(path)


def test_a_file_name_holds_only_what_a_file_name_may_whatever_the_environment_says():
    from bench_utils.records.environment_files import StudyEnvironment

    odd = StudyEnvironment("3.12.1", "x86/64 ../..", {"torch": "2.14.1+cu130"}, True)
    assert re.fullmatch(r"py3\.12-x86_64_.._..-torch2\.14\.1-cu130-[0-9a-f]{6}", odd.identity), odd.identity


def test_with_an_out_folder_the_environment_files_go_there_and_nowhere_else(tmp_path):
    import shutil
    from pathlib import Path

    from bench_utils.records.environment_files import write_study_environments

    studies = []
    for name in ("example-tiny", "gpu-check-h200"):  # two studies merged into one page
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(Path(__file__).parents[2] / "reports" / name / "results.jsonl", folder)
        studies.append(folder / "results.jsonl")
    written = write_study_environments(studies, tmp_path / "page")
    assert written and all(path.parent == tmp_path / "page" / "environments" for path in written)
    assert len(written) == 2  # each study's environment, neither removing the other's
    assert all(sorted(p.name for p in folder.parent.iterdir()) == ["results.jsonl"] for folder in studies)
    own = write_study_environments(studies)  # no out: each study folder's own
    assert sorted(path.parent.parent.name for path in own) == ["example-tiny", "gpu-check-h200"]
