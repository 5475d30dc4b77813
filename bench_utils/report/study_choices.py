"""The studies a reader can pick in the exploration notebook: every study folder under ``reports/`` that holds
records (the published ones, and those a user's ``make report`` or ``run --out reports/<study>`` made), the
notebooks' examples, and whatever the notebook was pointed at besides.

Each choice is named by its path from the project root (what ``results_paths`` takes) and how many records it
holds, counted by lines: reading a large study's records only to label it would slow the notebook's first cell.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path
from typing import Iterable

from ..paths import PROJECT_ROOT

RESULTS_FILE = "results.jsonl"   # a study folder's records
EXAMPLES = Path("notebooks") / "examples"
STUDIES = Path("reports")


@dataclass(frozen=True)
class StudyChoice:
    path: str      # from the project root where it lies under it, else as given
    records: int   # lines of its results file

    @property
    def label(self) -> str:
        return f"{self.path} ({self.records})"


def relative(path: str | os.PathLike, root: Path | None = None) -> str:
    """``path`` from ``root`` (the project's, by default) where it lies under it (the notebook's paths are the
    project's), else absolute."""
    root = PROJECT_ROOT if root is None else root
    resolved = (root / path).resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def study_choices(given: Iterable[str | os.PathLike] = (), root: Path | None = None) -> list[StudyChoice]:
    """The examples first, then the study folders under ``reports/`` (of ``root``, the project by default) by name,
    then the ``given`` paths not among them; a folder whose name starts with "_" or "." (scratch) is left out, as is
    one without records."""
    root = PROJECT_ROOT if root is None else root
    found: dict[str, Path] = {}
    for example in sorted((root / EXAMPLES).glob("*.jsonl")):
        found[relative(example, root)] = example
    for folder in sorted(path for path in (root / STUDIES).glob("*") if path.is_dir()):
        if not folder.name.startswith(("_", ".")) and (folder / RESULTS_FILE).is_file():
            found[relative(folder, root)] = folder / RESULTS_FILE
    for path in given:
        name = relative(path, root)
        target = root / name
        found.setdefault(name, target / RESULTS_FILE if target.is_dir() else target)
    return [StudyChoice(name, _lines(file)) for name, file in found.items()]


def _lines(file: Path) -> int:
    try:
        with open(file, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0
