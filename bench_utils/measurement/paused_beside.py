"""Processes beside a measurement, stopped through its timed windows (SIGSTOP, then SIGCONT).

Where a host's interference check finds that compiling beside timing moves the figures (``study.runner.
interference_check``), the compile processes must not run while the kernel times. The GPU's token keeps their GPU
work out of the kernel's windows already (``gpu_token``); this keeps their CPU work, memory traffic and page faults
out too: the kernel stops every registered process, with its children (Inductor's compile workers), for the window,
and lets them go on after it.

The processes are files in a folder (``<pid>``), which the runner writes as it starts each compile process
(``register``) and the kernel reads at each window. A process started during a window is stopped as it registers:
the window's marker (``paused``) says a window is open, and one lock around "mark and stop" and "register and
stop if marked" leaves no process running through a window. A kernel that dies inside a window leaves its processes
stopped: the runner lets them go after every kernel (``resume``).

Each window's pause is one line of ``pauses.log`` in the folder (its start and end on ``CLOCK_MONOTONIC``, one clock
for every process): a stopped compile process makes no progress, and what it measures of its own compile takes
its pauses out (``pauses``, ``gpu_token.not_running_s``).
"""

from __future__ import annotations

from contextlib import contextmanager
import fcntl
import json
import os
from pathlib import Path
import signal
import time
from typing import Iterator

import psutil

LOCK, MARKER, PAUSES_LOG = "pause.lock", "paused", "pauses.log"
STOP_WAIT_S = 0.5   # at most, for the processes a window stopped to be stopped


class PausedBeside:
    """The processes registered in ``folder``, stopped while a window is open (``paused``)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.pauses = 0                 # windows this process opened
        self.stopped_last: list[int] = []  # the processes the last window stopped (its tests read them)

    def register(self, pid: int) -> None:
        """A process beside the measurement, from now on; stopped at once where a window is open."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._locked():
            (self.folder / str(pid)).touch()
            if (self.folder / MARKER).exists():
                _signal_trees([pid], signal.SIGSTOP)

    def unregister(self, pid: int) -> None:
        (self.folder / str(pid)).unlink(missing_ok=True)

    def registered(self) -> list[int]:
        try:
            return sorted(int(path.name) for path in self.folder.iterdir() if path.name.isdigit())
        except FileNotFoundError:
            return []

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Every registered process (and its children) stopped for the block, then let go on."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._locked():
            started = time.monotonic()  # from the first signal: a process may stop before the others are signalled
            (self.folder / MARKER).touch()
            self.stopped_last = _signal_trees(self.registered(), signal.SIGSTOP)
        _until_stopped(self.stopped_last)
        self.pauses += 1
        try:
            yield
        finally:
            self.resume()
            with open(self.folder / PAUSES_LOG, "a", encoding="utf-8") as log:  # one line, one write: never torn
                log.write(json.dumps({"start": started, "end": time.monotonic()}) + "\n")

    def resume(self) -> None:
        """No window open: every registered process (and its children) let go on (a stopped one or not)."""
        if not self.folder.exists():
            return
        with self._locked():
            (self.folder / MARKER).unlink(missing_ok=True)
            _signal_trees(self.registered(), signal.SIGCONT)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.folder / LOCK, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def pauses(folder: str | os.PathLike) -> list[tuple[float, float]]:
    """The windows' pauses logged in ``folder``, as (start, end) on ``CLOCK_MONOTONIC`` (a torn line left out)."""
    found = []
    try:
        lines = (Path(folder) / PAUSES_LOG).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
            found.append((float(entry["start"]), float(entry["end"])))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def _until_stopped(pids: list[int], wait_s: float = STOP_WAIT_S) -> None:
    """Until every one of ``pids`` is stopped (a SIGSTOP takes effect when its process next runs, not at once), at
    most ``wait_s``: the window's timing starts with nothing of theirs still running."""
    deadline = time.monotonic() + wait_s
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                    break
            except psutil.Error:
                break
            time.sleep(0.001)


def _signal_trees(pids: list[int], sig: signal.Signals) -> list[int]:
    """``sig`` to each process and its descendants, the pids signalled. On SIGSTOP a parent is stopped before its
    children are listed (a stopped parent starts no child), and the listing repeats until it finds no new one (a
    child may have started one meanwhile). A process gone meanwhile is left out."""
    signalled: list[int] = []
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue
        signalled.append(pid)
        for _ in range(3):
            try:
                children = [child.pid for child in psutil.Process(pid).children(recursive=True)]
            except psutil.Error:
                break
            new = [child for child in children if child not in signalled]
            if not new:
                break
            for child in new:
                try:
                    os.kill(child, sig)
                    signalled.append(child)
                except ProcessLookupError:
                    continue
    return signalled
