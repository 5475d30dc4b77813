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

Compile processes fill the same folders ahead of the kernel (``study.cell.compile_process``): whoever compiles a cell
cold holds its claim (``KeptCell.claimed``, an ``flock`` released when its holder dies), so a kernel that reaches a
cell a compile process is compiling waits for it, then compiles warm, and a compile process passes over a cell
the kernel has claimed.
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
import time
from typing import Any, Iterable, Iterator

from ..records.key import cell_file_name
from ..settings import Settings
from ..vocabulary import Replicate

COLD_FILE = "cold.json"
# how the runner schedules a cell, not what it compiles: the kernel is told them, a compile process is not, and the
# two must find one folder (a kernel told to pause the compile processes missed every cache they kept)
NOT_KEYED = ("compile_ahead", "pause_compiles", "remeasure_unsteady")
CLAIM_WAIT_S = 900.0   # the longest a kernel waits for another process's cold compile (a hung compile process)


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
    def claimed(self, wait: bool = True, wait_s: float = CLAIM_WAIT_S) -> Iterator[bool]:
        """The cell claimed by this process for the block (True), waited for while another holds it, at most
        ``wait_s``; with ``wait`` False, or after ``wait_s``, False (the block then compiles nothing here)."""
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        with open(self.folder.with_name(self.folder.name + ".claim"), "a+b") as handle:
            deadline = time.monotonic() + (wait_s if wait else 0.0)
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.1)
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

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


@contextmanager
def all_claimed(cells: Iterable[KeptCell], wait_s: float = CLAIM_WAIT_S) -> Iterator[list[KeptCell]]:
    """The cells claimed by this process for the block, one after another in their order (a row's modes: the
    same order wherever they are claimed), each waited for while another process holds it, at most ``wait_s`` in
    all: those claimed (one another process held longer compiles without its kept folder, cold)."""
    deadline = time.monotonic() + wait_s
    with ExitStack() as stack:
        yield [cell for cell in cells
               if stack.enter_context(cell.claimed(wait_s=max(0.0, deadline - time.monotonic())))]


def kept_cell(caches: KeptCaches, task: str, model: str, batch_size: int, mode: str, settings: Settings, dtype: str,
              device: str) -> KeptCell:
    """The kept folder of a cell, whichever replicate measures it or compiles it ahead: named as the cell's first
    replicate (its notebook's name), keyed by that replicate's settings."""
    first = replace(settings, replicate=Replicate.R1.value)
    name = cell_file_name(task, model, batch_size, mode, first.variant(), dtype, device.split(":")[0])
    return caches.cell(name, {key: value for key, value in first.to_parameters().items() if key not in NOT_KEYED})


def default_root(study_folder: str | os.PathLike) -> Path:
    """Where a study's kept caches go by default: the machine's temporary folder (a GPU lease keeps it between its
    commands, and nothing there is published), one folder per study folder."""
    study = Path(study_folder).resolve()
    digest = hashlib.sha256(str(study).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "bench_utils-compile-caches" / f"{study.name}-{digest}"
