"""Compile caches kept between processes: a cell's cold compilation leaves its caches, and what it cost, for the
cell's next replicates, which then compile warm from them.

A cell measured in replicates (fresh kernels, ``replicates`` in a grid) compiled cold in every one of them, though
its page shows the first replicate's compile figures only: on a GPU a cold compile is 8-78 s, most of a cell. Here
the first replicate compiles cold into a folder kept under the study's caches (``KeptCaches``: one folder per
cell, its replicate left out of the name, its settings in a hash), with inductor's and Triton's on-disk caches
(FX graph, AOTAutograd, Triton kernels, autotuning) and ``cold.json``, the cold compilation's calls and report.
A later replicate (or a cell measured again, ``study.runner.unsteady``) finds that file and compiles warm from the
folder, as a second process on the machine would (``compile_cost.compile_warm``); its record carries the cold
figures with the replicate that measured them (``cold_measured_in``). Where no cold compile was kept (the first
replicate failed before it; another machine, whose temporary folder is empty) the cell compiles cold, as before.

``cold.json`` is written after the cold compilation ends (atomically: a kernel killed in it leaves none, and the
folder is emptied before the next cold compile), so a folder without it never serves as warm. Inductor's own
cache keys decide a hit: a warm compile that misses compiles anew, and its record's cache hits say so.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
import hashlib
import json
import os
from pathlib import Path
import shutil
import tempfile
from typing import Any, Iterator

COLD_FILE = "cold.json"


@dataclass(frozen=True)
class KeptCold:
    """A kept cold compilation: its compiling calls (ms), its report (graphs, breaks, CUDA graphs...) and which
    process measured it (``"replicate r1"``)."""

    calls_ms: list[float]
    stats: dict[str, Any]
    measured_in: str


@dataclass(frozen=True)
class KeptCell:
    """One cell's kept caches: the folder its cold compilation wrote, and ``cold.json`` once that ended."""

    folder: Path

    def cold(self) -> KeptCold | None:
        """The cold compilation kept here; None where none ended here (or its file cannot be read)."""
        try:
            data = json.loads((self.folder / COLD_FILE).read_text(encoding="utf-8"))
            return KeptCold([float(value) for value in data["calls_ms"]], dict(data["stats"]),
                            str(data["measured_in"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @contextmanager
    def emptied(self) -> Iterator[Path]:
        """The folder, empty, for a cold compilation (what a killed one left is gone)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        yield self.folder

    def keep(self, calls_ms: list[float], stats: dict[str, Any], measured_in: str) -> None:
        """Record the cold compilation that just filled the folder, so that later processes compile warm here."""
        data = {"calls_ms": list(calls_ms), "stats": _json_safe(stats), "measured_in": measured_in}
        partial = self.folder / (COLD_FILE + ".partial")
        partial.write_text(json.dumps(data), encoding="utf-8")
        os.replace(partial, self.folder / COLD_FILE)


def _json_safe(stats: dict[str, Any]) -> dict[str, Any]:
    """The report as JSON can hold it: values it cannot hold as their text."""
    return json.loads(json.dumps(stats, default=str))


class KeptCaches:
    """A study's kept compile caches, under ``root``: one folder per cell (``cell``)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def cell(self, cell_name: str, settings_key: dict[str, Any]) -> KeptCell:
        """The folder of the cell named ``cell_name`` (its replicate left out), measured with ``settings_key`` (its
        settings, the replicate's own left out): another setting, another folder."""
        digest = hashlib.sha256(json.dumps(settings_key, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return KeptCell(self.root / f"{cell_name}-{digest}")


def default_root(study_folder: str | os.PathLike) -> Path:
    """Where a study's kept caches go by default: the machine's temporary folder (a GPU lease keeps it between its
    commands, and nothing there is published), one folder per study folder."""
    study = Path(study_folder).resolve()
    digest = hashlib.sha256(str(study).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "bench_utils-compile-caches" / f"{study.name}-{digest}"
