"""The lock (environments/lock-*.txt): exact pins for every dependency, and what make setup installed from it."""

import importlib.metadata
import platform
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench_utils.records.environment_files import read_requirements
from bench_utils.paths import PROJECT_ROOT

MAKEFILE = (PROJECT_ROOT / "Makefile").read_text()
LOCK = PROJECT_ROOT / re.search(r"^LOCK\s*:=\s*(\S+)", MAKEFILE, re.MULTILINE).group(1)


def declared() -> list[Requirement]:
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"] + sum(project["optional-dependencies"].values(), [])]


def test_the_lock_pins_every_declared_dependency_within_its_range():
    pins = read_requirements(LOCK)  # exact name==version lines only, or an error naming the line
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is declared in pyproject.toml but not in the lock: make lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} vs {requirement}"


def installed(name: str) -> str | None:
    """The version an import finds first (setuptools puts its own vendored copies later on the path)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def locked_setup() -> bool:
    stamp = Path(sys.prefix) / ".installed-locked"
    return stamp.exists() and sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64"


@pytest.mark.skipif(not locked_setup(), reason="this environment was not installed from the lock by make setup "
                    "(UNLOCKED=1, make test-compat, or another Python or platform)")
def test_make_setup_installed_exactly_the_locked_versions():
    differ = {name: (version, installed(name)) for name, version in read_requirements(LOCK).items()
              if installed(name) != version}
    assert not differ, f"locked vs installed: {differ}"


def test_setup_and_conda_install_through_the_lock_unless_told_otherwise():
    assert "$(if $(UNLOCKED),,-c $(LOCK))" in MAKEFILE and "$(STAMP): pyproject.toml $(LOCK)" in MAKEFILE
    conda = (PROJECT_ROOT / "environment.yml").read_text()
    assert f"- -c {LOCK.relative_to(PROJECT_ROOT).as_posix()}\n" in conda
