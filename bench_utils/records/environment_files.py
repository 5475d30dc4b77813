"""A study's own environments: the exact versions its records were measured with, one pip requirements file each
(``environments/<id>.txt``, which ``report`` writes and ``reproduce`` installs), from the records alone, never from
the machine that renders them. Records from before the full package list pin only the main versions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import UserError
from .key import latest_per_key
from .results_file import read_records
from .schema import Record

FOLDER = "environments"
# what records carried before the full list, under their distribution names
MAIN_VERSIONS = {"torch_version": "torch", "torchvision_version": "torchvision", "transformers_version": "transformers",
                 "timm_version": "timm", "triton_version": "triton", "numpy_version": "numpy"}
# a local version label such as +cu130 or +cpu names the PyTorch index that serves that build
PYTORCH_INDEX = "https://download.pytorch.org/whl/{label}"
_PYTORCH_LABEL = re.compile(r"cu\d+|cpu|rocm[\d.]+|xpu")


@dataclass(frozen=True)
class StudyEnvironment:
    """One environment a study's records were measured in: its Python and the packages' versions."""

    python_version: str | None
    machine: str | None
    packages: dict[str, str] = field(hash=False)
    complete: bool                 # False: old records, only the main versions were recorded
    records: int = field(default=0, compare=False)

    @property
    def identity(self) -> str:
        """A file name that says what it is and tells two package sets apart: py3.11-x86_64-torch2.14.1-1a2b3c."""
        digest = hashlib.sha256(repr(sorted(self.packages.items())).encode()).hexdigest()[:6]
        python = ".".join((self.python_version or "unknown").split(".")[:2])
        torch = self.packages.get("torch", "none").replace("+", "-")
        # the record check holds these to a version and a machine's name; a file name takes nothing else anyway
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"py{python}-{self.machine or 'unknown'}-torch{torch}")[:120] + f"-{digest}"


def environment_of(record: Record) -> StudyEnvironment:
    """The environment a record says it was measured in."""
    environment = record.environment
    packages = environment.packages
    complete = bool(packages)
    if not packages:
        packages = {name: getattr(environment, key) for key, name in MAIN_VERSIONS.items()
                    if getattr(environment, key, None)}
    return StudyEnvironment(environment.python_version, environment.machine,
                            {canonicalize_name(name): str(version) for name, version in sorted(packages.items())},
                            complete)


def study_environments(records: Iterable[Record]) -> list[StudyEnvironment]:
    """Each distinct environment of the records, with how many records it holds, the most used first."""
    counts: dict[StudyEnvironment, int] = {}
    for record in records:
        environment = environment_of(record)
        counts[environment] = counts.get(environment, 0) + 1
    found = [StudyEnvironment(e.python_version, e.machine, e.packages, e.complete, count) for e, count in counts.items()]
    return sorted(found, key=lambda environment: (-environment.records, environment.identity))


def requirements_text(environment: StudyEnvironment, study: str) -> str:
    """The environment as a pip requirements file (``pip install -r``), with what it is in its header."""
    lines = [f"# The exact versions that {environment.records} record(s) of study {study} were measured with,",
             f"# on Python {environment.python_version or 'unknown'} ({environment.machine or 'unknown'}); "
             "written by `bench_utils report` from the records.",
             "# Install: pip install -r this file. Re-run the study in it: make reproduce STUDY=<study folder>."]
    if not environment.complete:
        lines.append("# These records predate the full package list: only these main versions were recorded.")
    labels = sorted({version.split("+", 1)[1] for version in environment.packages.values()
                     if "+" in version and _PYTORCH_LABEL.fullmatch(version.split("+", 1)[1])})
    lines += [f"--extra-index-url {PYTORCH_INDEX.format(label=label)}" for label in labels]
    lines += [f"{name}=={version}" for name, version in sorted(environment.packages.items())]
    return "\n".join(lines) + "\n"


def read_requirements(path: Path) -> dict[str, str]:
    """{name: version} of a requirements file of exact pins (such as ``requirements_text`` writes); anything
    other than comments, index options and ``name==version`` lines is an error naming its line."""
    pins: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split(" #", 1)[0].strip()
        if not text or text.startswith(("#", "--extra-index-url", "--index-url")):
            continue
        try:
            requirement = Requirement(text)
            (specifier,) = requirement.specifier
            if specifier.operator != "==" or "*" in specifier.version:
                raise ValueError
            Version(specifier.version)
        except (InvalidRequirement, InvalidVersion, ValueError):
            raise UserError(f"{path}:{number}: not an exact pin (name==version): {line.strip()}") from None
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def write_environment_files(study_folder: Path, records: list[Record], study: str) -> list[Path]:
    """``environments/<id>.txt`` in the study folder for each environment of its records (files of environments
    the records no longer hold are removed: the folder is derived). The paths written."""
    folder = study_folder / FOLDER
    environments = study_environments(records)
    wanted = {f"{environment.identity}.txt": environment for environment in environments}
    if folder.is_dir():
        for stale in folder.glob("*.txt"):
            if stale.name not in wanted:
                stale.unlink()
    written = []
    for name, environment in wanted.items():
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text(requirements_text(environment, study), encoding="utf-8")
        written.append(path)
    return written


def write_study_environments(results: list[Path], out: Path | None = None) -> list[Path]:
    """The environment files of each study folder of ``results`` (``results.jsonl`` files), from the latest record
    of each measurement it holds, named by the folder (which may hold records of several study names); with
    ``out`` (``report --out``), those of all of them in ``out`` alone: nothing is written where the user did not
    ask."""
    written = []
    for folder, files in ([(out, results)] if out is not None else [(file.parent, [file]) for file in results]):
        records = latest_per_key(read_records(files))
        written += write_environment_files(folder, records, folder.name) if records else []
    return written
