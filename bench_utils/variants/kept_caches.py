"""Compile caches kept between processes: a cell's cold compilation leaves its caches, and what it cost, for the
cell's next replicates, which then compile warm from them (docs/study.md, *Later replicates compile warm*).

One folder per cell holds inductor's and Triton's caches, ``artifacts.bin`` (the portable artifacts: what travels
to another host) and ``cold.json``, written atomically once the cold compilation ended, so a folder without it never
serves as warm. Whoever compiles a cell cold holds its claim (an ``flock``); a second kernel compiles cold without
keeping it: nobody waits.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
import fcntl
import hashlib
import json
import os
from pathlib import Path
import shutil
import tempfile
from typing import Any, Iterable, Iterator

from ..records.key import cell_file_name
from ..settings import Settings
from ..vocabulary import Replicate

COLD_FILE = "cold.json"
ARTIFACTS_FILE = "artifacts.bin"   # the portable cache artifacts: what travels, with COLD_FILE
ROOT_ENV = "BENCH_UTILS_COMPILE_CACHES"
# how the runner schedules a cell, not what it compiles: one folder either way
NOT_KEYED = ("remeasure_unsteady",)


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

    @contextmanager
    def claimed(self) -> Iterator[bool]:
        """The cell claimed by this process for the block (True), or held by another (False: the block keeps
        nothing here)."""
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        with open(self.folder.with_name(self.folder.name + ".claim"), "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def artifacts(self) -> bytes | None:
        """The cold compilation's portable cache artifacts, where it kept them."""
        try:
            return (self.folder / ARTIFACTS_FILE).read_bytes() or None
        except OSError:
            return None

    def keep(self, calls_ms: list[float], stats: dict[str, Any], measured_in: str,
             artifacts: bytes | None = None) -> None:
        """Record the cold compilation that just filled the folder, with its portable artifacts, so that later
        processes compile warm here, on this host or another."""
        if artifacts:
            (self.folder / ARTIFACTS_FILE).write_bytes(artifacts)
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


@contextmanager
def all_claimed(cells: Iterable[KeptCell]) -> Iterator[list[KeptCell]]:
    """The cells claimed by this process for the block, in their order: those no other process holds."""
    with ExitStack() as stack:
        yield [cell for cell in cells if stack.enter_context(cell.claimed())]


def kept_cell(caches: KeptCaches, task: str, model: str, batch_size: int, mode: str, settings: Settings, dtype: str,
              device: str) -> KeptCell:
    """The kept folder of a cell, whichever replicate measures it or compiles it ahead: named as the cell's first
    replicate (its notebook's name), keyed by that replicate's settings."""
    first = replace(settings, replicate=Replicate.R1.value)
    name = cell_file_name(task, model, batch_size, mode, first.variant(), dtype, device.split(":")[0])
    return caches.cell(name, {key: value for key, value in first.to_parameters().items() if key not in NOT_KEYED})


def default_root(study_folder: str | os.PathLike) -> Path:
    """Where a study's kept caches go: under ``BENCH_UTILS_COMPILE_CACHES`` where set (a GPU lease's carried folder:
    one folder per study name, whatever path the study has on the host), else the machine's temporary folder (a
    GPU lease keeps it between its commands, and nothing there is published), one folder per study folder."""
    study = Path(study_folder).resolve()
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]) / study.name
    digest = hashlib.sha256(str(study).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "bench_utils-compile-caches" / f"{study.name}-{digest}"
