"""A study's environment built in a folder of its own (``.venv-reproduce/<id>/``), from its requirements file.

pip does the work (docs/reproducing.md); where the running interpreter already holds exactly those versions nothing
is built. A pin the registry cannot serve fails the build in one line that names it, not pip's resolver output.
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ..errors import UserError
from ..records.environment_files import read_requirements
from ..environment.packages import measured_with
from ..kernel import KERNEL_NAME
from ..paths import PROJECT_ROOT

BUILDS_DIR = PROJECT_ROOT / ".venv-reproduce"
STAMP = ".built-from"
# pip's words for a pin it cannot find: the requirement follows them
_NOT_FOUND = re.compile(r"(?:No matching distribution found for|Could not find a version that satisfies the "
                        r"requirement) (\S+)")


class EnvironmentBuildError(UserError):
    """The study's environment cannot be built here (a pin the index does not serve, a --python it cannot
    use); the message is one line naming pip's reason."""


def matches_running(pins: dict[str, str], python_version: str | None) -> bool:
    """Whether this interpreter is already the study's environment: the same Python (major.minor) and exactly
    the pinned versions of the project's dependencies, no more and no fewer."""
    if python_version and python_version.split(".")[:2] != platform.python_version().split(".")[:2]:
        return False
    return measured_with() == pins


def _pip_failure(output: str, requirements: Path) -> str:
    """One line for a failed ``pip install -r``: the pin it could not find, else pip's last error line."""
    found = _NOT_FOUND.search(output)
    if found:
        return (f"cannot build the study's environment: {found.group(1)} is not on the package index "
                f"(pinned in {requirements.name}: the registry no longer serves it, has no build of it for this "
                "platform, or cannot be reached)")
    errors = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR")]
    last = errors[-1] if errors else (output.strip().splitlines() or ["no output"])[-1]
    return f"cannot build the study's environment from {requirements.name}: {last}"


def _run(command: list[str], requirements: Path, say: Callable[[str], None]) -> None:
    say("[reproduce] " + " ".join(str(part) for part in command))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise EnvironmentBuildError(_pip_failure(result.stdout + result.stderr, requirements))


def build_environment(requirements: Path, *, python_version: str | None = None, builds_dir: Path | None = None,
                      base_python: str | None = None, say: Callable[[str], None] = print) -> Path:
    """The interpreter of the study's environment: this one where it matches the pins, else one built (once:
    a folder built from the same file is reused) in ``builds_dir/<file's stem>/``."""
    pins = read_requirements(requirements)
    if matches_running(pins, python_version):
        say(f"[reproduce] this environment already holds exactly the {len(pins)} pinned versions: using it")
        return Path(sys.executable)
    folder = (builds_dir or BUILDS_DIR) / requirements.stem
    python = folder / "bin" / "python"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = folder / STAMP
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == digest:
        say(f"[reproduce] {folder} was built from this file: using it")
        return python
    say(f"[reproduce] building the study's environment in {folder} ({len(pins)} pinned versions; torch is large)")
    base = base_python or sys._base_executable  # type: ignore[attr-defined]  # CPython's; typeshed lacks it
    _run([base, "-m", "venv", "--clear", str(folder)], requirements, say)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-r", str(requirements)], requirements, say)
    # the project's code as this checkout has it, the pins held: a dependency they lack (old records named only
    # the main versions; this checkout may need a package the study did not) comes at its newest
    _run([*pip, "-c", str(requirements), "-e", str(PROJECT_ROOT)], requirements, say)
    stamp.write_text(digest + "\n", encoding="utf-8")
    return python


def install_kernel(python: Path, requirements: Path, say: Callable[[str], None] = print) -> None:
    """The project's notebook kernel inside a built environment (``--sys-prefix``: papermill, run by that
    environment's ``bench_utils``, finds it there, and it runs that environment's interpreter)."""
    _run([str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME], requirements, say)
