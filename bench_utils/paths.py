"""Where the project's folders are: its root, the notebooks and the published reports.

Resolved once, from this file, so that every layer (the runner, the notebooks'
kernels, the report) agrees on them whatever the working directory is.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"
