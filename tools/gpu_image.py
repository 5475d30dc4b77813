"""What the GPU machines' image has, and which of the project's dependencies must travel to it as wheels."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
import re
import sys
import tomllib

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
IMAGE_PACKAGES = ROOT / "environments" / "gpu-image-packages.txt"
# Not needed to measure on a GPU host, and too large to carry (what travels is <= 64 MiB): the cluster engine,
# the browser driver of the tests, JupyterLab (make lab), and the type checker with its stubs (make typecheck runs
# where make test does, never on a GPU host). What only they need stays behind with them.
LEFT_OUT = frozenset({"ray", "playwright", "jupyterlab",
                      "mypy", "types-pyyaml", "types-psutil", "types-tqdm", "types-bleach"})
# The host's own installer, never the project's to bring.
TOOLING = frozenset({"pip", "setuptools", "wheel"})


def normalize(name: str) -> str:
    """A distribution's name as PyPI compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = IMAGE_PACKAGES) -> set[str]:
    """The distributions the image has: one name a line, # comments."""
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {normalize(line) for line in lines if line}


def project_requirements(pyproject: Path = ROOT / "pyproject.toml", extras: Iterable[str] = ()) -> list[Requirement]:
    """The project's dependencies (and those of the named extras), without the ones left out."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    texts = list(project["dependencies"])
    for extra in extras:
        texts += project["optional-dependencies"][extra]
    requirements = [Requirement(text) for text in texts]
    return [r for r in requirements if normalize(r.name) not in LEFT_OUT]


def _applies(requirement: Requirement, python_version: str, extras: Iterable[str]) -> bool:
    if requirement.marker is None:
        return True
    environment = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    return any(requirement.marker.evaluate({**environment, "extra": extra}) for extra in (*extras, ""))


def travelling(requirements: Iterable[Requirement], image: set[str], python_version: str,
               find: Callable[[str], metadata.Distribution] = metadata.distribution) -> tuple[list[str], list[str]]:
    """``name==version`` (as installed here) of every distribution the requirements need, directly or not, that
    the image lacks; and the names needed but not installed here. The image's packages bring their own."""
    todo = [(r, frozenset()) for r in requirements]
    skip = image | LEFT_OUT | TOOLING
    seen: set[tuple[str, frozenset]] = set()  # a distribution asked for again with other extras needs more
    pins: dict[str, str] = {}
    missing: set[str] = set()
    while todo:
        requirement, parent_extras = todo.pop()
        name, extras = normalize(requirement.name), frozenset(requirement.extras)
        if (name, extras) in seen or name in skip or not _applies(requirement, python_version, parent_extras):
            continue
        seen.add((name, extras))
        try:
            distribution = find(name)
        except metadata.PackageNotFoundError:
            missing.add(name)
            continue
        pins[name] = f"{name}=={distribution.version}"
        todo += [(Requirement(text), extras) for text in distribution.requires or ()]
    return sorted(pins.values()), sorted(missing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["requirements"],
                        help="requirements: the project's dependencies a GPU host installs (make test-compat)")
    parser.add_argument("--extra", action="append", default=[], help="add this optional dependency group")
    args = parser.parse_args(argv)
    for requirement in project_requirements(extras=args.extra):
        print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main())
