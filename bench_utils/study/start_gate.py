"""The start gate: the runner tells a kernel it started ahead that the device is its own now, and which cells.

A kernel started ahead (``runner.kernel_ahead``) does the host's work, then waits for this file
(``task.run(start_gate=...)``, ``cell.kernel_start``): ``{"only_cells": [[mode, batch], ...], "opened_at": <epoch
seconds>}``, the cells to measure now (a subset of those it was started for: a time limit or an out-of-memory ruling
may have dropped some meanwhile; none: it measures nothing). The runner writes it whole, so a kernel never reads half.
"""

from __future__ import annotations

import json
from pathlib import Path
import time
from typing import Any

from ..errors import UserError


def gate_path(out_dir: Path, group_id: str) -> Path:
    """The start gate of a kernel group's first kernel, beside its progress file."""
    return out_dir / "logs" / f"{group_id}.1.gate"


def write_gate(path: str | Path, cells: list[list[Any]]) -> None:
    """Open the gate at ``path`` (the runner): the cells, and when it opened."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"only_cells": cells, "opened_at": time.time()}), encoding="utf-8")
    partial.replace(path)


def read_gate(path: str | Path) -> tuple[list[tuple[str, int]], float | None]:
    """The cells an opened gate names, and when it opened (None where it does not say)."""
    gate = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = gate.get("only_cells")
    if not isinstance(cells, list) or any(isinstance(item, str) or len(item) != 2 for item in cells):
        raise UserError(f"{path}: only_cells: a list of [compile_mode, batch_size], got {cells!r}")
    opened = gate.get("opened_at")
    return [(str(mode), int(batch)) for mode, batch in cells], float(opened) if opened is not None else None
