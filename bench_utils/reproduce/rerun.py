"""``python -m bench_utils reproduce STUDY``: a published study re-run in the versions it was measured with.

The four steps of docs/reproducing.md: ``environment_files``, ``environment_build``, the study's own ``grid.yaml`` run
by that environment's ``bench_utils run``, and ``report.comparison_page``.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from ..errors import UserError
from ..records.environment_files import FOLDER, StudyEnvironment, requirements_text, study_environments
from ..report.comparison_page import render_comparison
from ..report.frame import latest_records, results_files
from ..study.grid.grid_file import GRID_COPY
from .environment_build import build_environment, install_kernel


@dataclass
class Reproduction:
    """What a re-run left: its study folder, the comparison table and the pages written."""

    folder: Path
    comparison: pd.DataFrame
    pages: list[Path]
    run_status: int


def choose_environment(environments: list[StudyEnvironment], wanted: str | None) -> StudyEnvironment:
    """The study's one environment, or the one ``wanted`` names where it holds several."""
    names = ", ".join(f"{environment.identity} ({environment.records} records)" for environment in environments)
    if wanted:
        for environment in environments:
            if environment.identity == wanted:
                return environment
        raise UserError(f"the study has no environment {wanted!r}; it has: {names}")
    if len(environments) > 1:
        raise UserError(f"the study was measured in {len(environments)} environments: choose one with "
                        f"--environment ({names})")
    return environments[0]


def reproduce(study: Path, *, out: Path | None = None, environment: str | None = None, force: bool = False,
              locales: Iterable[str] = ("en", "ar", "es"), tolerance: float = 0.10, base_python: str | None = None,
              builds_dir: Path | None = None, say: Callable[[str], None] = print) -> Reproduction:
    """Re-run ``study`` (a study folder) in its recorded environment into ``out`` (default: a sibling folder
    ``<study>-reproduced``) and render the comparison there. Bad input: UserError, in one line."""
    study = Path(study)
    grid = study / GRID_COPY
    if not study.is_dir():
        raise UserError(f"{study} is not a study folder")
    files = results_files([study])  # a folder without results.jsonl: UserError, said by results_files
    if not grid.is_file():
        raise UserError(f"{study} keeps no {GRID_COPY} (studies run before the grid was kept beside the records): "
                        f"copy the grid file it was run from there")
    records = latest_records(files)
    if not records:
        raise UserError(f"{study} holds no record: nothing to reproduce")
    out = Path(out) if out else study.parent / f"{study.name}-reproduced"
    if out.exists() and not out.is_dir():  # at the door, before an environment is built
        raise UserError(f"--out {out} is a file, not a study folder")
    chosen = choose_environment(study_environments(records), environment)
    requirements = study / FOLDER / f"{chosen.identity}.txt"
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text(requirements_text(chosen, records[0].cell.study), encoding="utf-8")
    if not chosen.complete:
        say(f"[reproduce] note: these records name only {len(chosen.packages)} versions (records before the full "
            "package list): the rest are installed at their newest")
    python = build_environment(requirements, python_version=chosen.python_version, base_python=base_python,
                               builds_dir=builds_dir, say=say)
    if python != Path(sys.executable):
        install_kernel(python, requirements, say)
    command = [str(python), "-m", "bench_utils", "run", str(grid), "--out", str(out), *(["--force"] if force else [])]
    say("[reproduce] " + " ".join(command))
    status = subprocess.run(command, check=False).returncode
    table, pages = render_comparison(study, out, locales=locales, tolerance=tolerance)
    say(f"[reproduce] comparison: {', '.join(str(page) for page in pages if page.name == 'index.html')}")
    return Reproduction(out, table, pages, status)
