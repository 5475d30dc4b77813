"""The progress file: the kernel names the cell it begins, the runner reads it when the kernel ends.

A kernel writes it before each cell (``task.run(progress_file=...)``); so when a kernel dies, the
runner knows the cell it was on, and tells a kernel that began no cell apart (its start failed).
"""

from __future__ import annotations

import json
from pathlib import Path


def write_progress(path: str | Path, compile_mode: str, batch_size: int) -> None:
    """Say which cell the kernel begins now (written whole: a reader never sees half of it)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"compile_mode": compile_mode, "batch_size": batch_size}))
    partial.replace(path)


def read_progress(path: str | Path) -> tuple[str | None, int | None] | None:
    """``(compile_mode, batch_size)`` of the cell the kernel said it began (None for what it did not say); None
    if it said none."""
    try:
        said = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (said.get("compile_mode"), said.get("batch_size")) if isinstance(said, dict) else None
