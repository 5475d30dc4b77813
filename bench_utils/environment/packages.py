"""The installed version of every package the project measures with: its dependencies' closure, as records carry it.

A study's environment file is derived from this (docs/reproducing.md): the closure of the project's own dependencies,
not of its ``test`` or ``ray`` extras (they never run inside a cell), each at the version installed here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..paths import PROJECT_ROOT

PROJECT = "bench-utils"


def project_requirements() -> list[Requirement]:
    """The project's own dependencies: its checkout's ``pyproject.toml`` (the code that runs: a GPU host runs
    the project from ``PYTHONPATH``, not installed), else the installed distribution's metadata, whose extras'
    entries carry their markers (``measured_with`` leaves those out)."""
    pyproject = PROJECT_ROOT / "pyproject.toml"
    if pyproject.is_file():
        with pyproject.open("rb") as file:
            return [Requirement(text) for text in tomllib.load(file)["project"]["dependencies"]]
    try:
        requires = importlib.metadata.requires(PROJECT) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [Requirement(text) for text in requires]


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    """Whether a dependency applies here, for a distribution installed with ``extras``."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras | {""})


def _distribution(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def dependency_closure(requirements: list[Requirement]) -> dict[str, str]:
    """{normalized name: installed version} of ``requirements`` and everything they need, transitively, as
    installed here (a dependency that is not installed, such as one for another platform, is left out)."""
    versions: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(requirement, frozenset(requirement.extras)) for requirement in requirements]
    while pending:
        requirement, extras = pending.pop()
        name = canonicalize_name(requirement.name)
        if (name, extras) in seen or name == PROJECT:
            continue
        seen.add((name, extras))
        distribution = _distribution(name)
        if distribution is None:
            continue
        metadata = distribution.metadata  # parsed anew on each access (a kernel's start parsed 1,462 for 162 packages)
        versions[name] = metadata["Version"]
        # a package that needs nothing has no Requires-Dist; ``requires`` parses again: only for an egg's requires.txt
        needs = metadata.get_all("Requires-Dist") or (distribution.read_text("requires.txt") and distribution.requires)
        for text in needs or []:
            dependency = Requirement(text)
            if _applies(dependency, set(extras)):
                pending.append((dependency, frozenset(dependency.extras)))
    return dict(sorted(versions.items()))


@functools.lru_cache(maxsize=1)
def measured_with() -> dict[str, str]:
    """What this process measures with: the closure of the project's dependencies (read once per process)."""
    return dependency_closure([requirement for requirement in project_requirements() if _applies(requirement, set())])
