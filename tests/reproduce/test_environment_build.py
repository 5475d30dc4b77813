import subprocess
import sys

import pytest

from bench_utils.environment.packages import measured_with
from bench_utils.reproduce import environment_build
from bench_utils.reproduce.environment_build import EnvironmentBuildError, build_environment


def small_project(folder):
    """A stand-in for the checkout (building the real one would install torch): the project's name, two
    dependencies, one of which the study's pins lack."""
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=68"]\n'
                                           'build-backend = "setuptools.build_meta"\n[project]\nname = "bench-utils"\n'
                                           'version = "0.1.0"\ndependencies = ["six", "iniconfig"]\n'
                                           '[tool.setuptools]\npy-modules = []\n')
    return folder


def test_an_environment_is_built_in_a_folder_of_its_own_once(tmp_path, monkeypatch):
    monkeypatch.setattr(environment_build, "PROJECT_ROOT", small_project(tmp_path / "project"))
    requirements = tmp_path / "py-six.txt"
    requirements.write_text("# a study's pins\nsix==1.16.0\n")
    said = []
    python = build_environment(requirements, builds_dir=tmp_path / "builds", say=said.append)
    assert python == tmp_path / "builds" / "py-six" / "bin" / "python"
    shown = subprocess.run([str(python), "-c", "import six, importlib.metadata as m; "
                            "print(six.__version__, m.version('bench-utils'), m.version('iniconfig'))"],
                           capture_output=True, text=True, check=True).stdout.split()
    # the pin held although the project asks for any six; the project; the dependency the pins lack
    assert shown[:2] == ["1.16.0", "0.1.0"] and len(shown) == 3
    said.clear()
    assert build_environment(requirements, builds_dir=tmp_path / "builds", say=said.append) == python
    assert said == [f"[reproduce] {python.parent.parent} was built from this file: using it"]  # no pip run again


def test_a_pin_the_registry_does_not_serve_fails_in_one_line_naming_it(tmp_path):
    requirements = tmp_path / "gone.txt"
    requirements.write_text("six==0.0.404\n")
    with pytest.raises(EnvironmentBuildError) as failure:
        build_environment(requirements, builds_dir=tmp_path / "builds", say=lambda line: None)
    message = str(failure.value)
    assert "\n" not in message and "six==0.0.404 is not on the package index" in message


def test_pips_last_error_line_is_said_where_no_pin_is_named(tmp_path):
    output = "Collecting x\nERROR: first problem\n  detail\nERROR: Could not install packages due to an OSError\n"
    said = environment_build._pip_failure(output, tmp_path / "env.txt")
    assert said == "cannot build the study's environment from env.txt: ERROR: Could not install packages due to an OSError"


def test_this_interpreter_is_used_where_it_already_holds_exactly_the_pins(tmp_path):
    pins = measured_with()
    requirements = tmp_path / "same.txt"
    requirements.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
    assert build_environment(requirements, builds_dir=tmp_path / "builds", say=lambda line: None) == \
        environment_build.Path(sys.executable)
    assert not (tmp_path / "builds").exists()
    assert not environment_build.matches_running(pins, "3.10.4")                 # another Python
    assert not environment_build.matches_running({**pins, "torch": "0.1"}, None)  # another version
    assert not environment_build.matches_running({**pins, "six-extra": "1"}, None)  # one more package
