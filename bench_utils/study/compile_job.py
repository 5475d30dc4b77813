"""What a compile process is given to compile: the file the runner writes and the compile process reads.

The runner (``study.runner.compile_ahead``) writes one job a kernel group; the compile process
(``study.cell.compile_process``) compiles its cells cold into their kept caches. Neither side imports the other:
this file is all they share. No torch is imported here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import json
import os
from pathlib import Path
from typing import Any


@dataclass
class CompileJob:
    """What one compile process compiles: a kernel group's compiled cells, in the order the kernel measures them."""

    task: str
    model: str
    dtype: str
    device: str
    settings: dict[str, Any]             # the cells' settings (``Settings.to_parameters``)
    cells: list[list[Any]]               # [compile_mode, batch_size] pairs
    caches: str                          # the kept caches' root (``variants.kept_caches.KeptCaches``)
    measured_in: str                     # how the cold figures were measured, as the records will say
    token: str | None = None             # the GPU token's file (None: no token, as on a CPU study alone)
    log: str | None = None               # where each cell's line goes (None: stdout)
    beside: dict[str, Any] = field(default_factory=dict)   # how it compiles: its cores, the other processes

    @classmethod
    def read(cls, path: str | os.PathLike) -> CompileJob:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))

    def write(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(asdict(self)), encoding="utf-8")
