"""The GPU shared by a token between the measuring kernel and the compile processes beside it.

While one process times a cell, others may compile the next cells (``study.runner.compile_ahead``). Compiling
touches the GPU (the first calls, Triton's autotuning, pad-mm's benchmarks), and another process's kernels on the
GPU would move the figures being taken. So the GPU has a token: the measuring kernel holds it through every window
whose figures another process's work would change (warm-up and timed runs, energy windows, memory probes, the
profile), and a compile process holds it through each of its GPU phases; neither runs its part without it.

The token is an ``flock`` on a file beside the kept caches (the kernel releases it when its holder dies). Each
holding is one JSON line in ``<token>.log``: the role, the process, what it held the token for, and its start and
end on the host's monotonic clock (``CLOCK_MONOTONIC``, one clock for every process): ``overlaps`` reads it back,
and a lease keeps it, so that it shows that no compile process's GPU phase overlapped a measuring window.

A process uses the token once it is told where (``use``); ``window`` is then the token held, and nothing
elsewhere (a kernel of a study without compile processes, a notebook run by hand). Holdings nest: an inner window
inside an outer one is the outer one's.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
import fcntl
import json
import os
from pathlib import Path
import threading
import time
from typing import Any, ContextManager, Iterable, Iterator

MEASURING, COMPILING = "measuring", "compiling"   # the holders' roles
TOKEN_FILE = "gpu.token"                          # its file, in the kept caches' folder of a study


@dataclass
class GpuToken:
    """The token at ``path``, held by this process in ``role``."""

    path: Path
    role: str

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self._depth = 0
        self._lock = threading.Lock()   # one thread of the process holds it at a time
        self.waited_s = 0.0             # in all, waiting for another process to release it

    @property
    def log_path(self) -> Path:
        return self.path.with_name(self.path.name + ".log")

    @contextmanager
    def held(self, what: str) -> Iterator[None]:
        """The token held for ``what``, waited for as long as another process holds it; logged once released."""
        if self._depth:  # inside a window of this process already
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with self._lock, open(self.path, "a+b") as handle:
            asked = time.monotonic()
            fcntl.flock(handle, fcntl.LOCK_EX)
            start = time.monotonic()
            self.waited_s += start - asked
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0
                end = time.monotonic()
                self._log({"role": self.role, "pid": os.getpid(), "what": what, "waited_s": round(start - asked, 6),
                           "start": start, "end": end})
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _log(self, entry: dict[str, Any]) -> None:
        # one write of one line, appended: lines of several processes never interleave
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")


_current: GpuToken | None = None


def use(path: str | os.PathLike | None, role: str) -> None:
    """Take the token at ``path`` in ``role`` for this process's windows from now on (None: no token)."""
    global _current
    _current = GpuToken(Path(path), role) if path else None


def window(what: str) -> ContextManager[None]:
    """The token held for ``what`` where this process uses one; nothing where it does not."""
    return _current.held(what) if _current is not None else nullcontext()


def waited_s() -> float:
    """Seconds this process has waited for the token so far (0 where it uses none): a wait inside a timed call is
    no part of what the call costs (``variants.compile_cost``)."""
    return _current.waited_s if _current is not None else 0.0


def holdings(log_path: str | os.PathLike) -> list[dict[str, Any]]:
    """The token's log, one entry per holding (an unreadable line, from a holder killed mid-write, left out)."""
    entries = []
    try:
        lines = Path(log_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def overlaps(entries: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every compile phase and measuring window that overlapped in time: none, where the token did its work."""
    entries = list(entries)
    measuring = [entry for entry in entries if entry["role"] == MEASURING]
    compiling = [entry for entry in entries if entry["role"] == COMPILING]
    return [(compile_phase, window_) for compile_phase in compiling for window_ in measuring
            if compile_phase["start"] < window_["end"] and window_["start"] < compile_phase["end"]]
