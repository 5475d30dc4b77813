"""Where a study's records, notebooks and logs go: ``--out``, or ``reports/<study>/``."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import UserError
from ...paths import REPORTS_DIR
from ..grid.grid_file import Grid


def study_folder(grid: Grid, out_dir: str | os.PathLike | None) -> Path:
    """``--out`` resolved once (kernels run from the project root), or ``reports/<study>/``; UserError in one line
    for a path no folder can be at (an empty one, a file, a name too long)."""
    if out_dir is not None and not str(out_dir).strip():
        raise UserError("--out is empty: name the study folder")
    folder = Path(out_dir).resolve() if out_dir else REPORTS_DIR / grid.study
    try:
        is_file = folder.exists() and not folder.is_dir()
    except OSError as exc:  # ENAMETOOLONG, say
        raise UserError(f"--out {folder}: not a usable folder ({exc.strerror or exc})") from None
    if is_file:
        raise UserError(f"--out {folder} is a file, not a study folder")
    return folder
