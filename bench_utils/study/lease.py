"""One runner per study folder, and kernels that never outlive their runner (``docs/study.md``, "Crash safety").

An exclusive ``flock`` on ``DIR/.runner.lock`` (released when the runner dies, even by SIGKILL) holds a fresh run id,
written under the results file's lock: a notebook appends only while it is its own; a watchdog ends an orphan.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
import threading
import time
import uuid

from ..errors import UserError
from ..paths import make_folder
from ..records.results_file import locked

LOCK_NAME = ".runner.lock"
WATCHDOG_INTERVAL_S = 0.5
ORPHAN_EXIT_CODE = 75


class LeaseHeldError(UserError):
    """Another runner is working on the same study folder: the user asked for a second run of it (one line)."""


class RunnerLease:
    """``with RunnerLease(directory, results_path) as lease: ... lease.run_id``."""

    def __init__(self, directory: str | os.PathLike, results_path: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.results_path = Path(results_path)
        self.run_id = uuid.uuid4().hex
        self._fd: int | None = None

    def __enter__(self) -> "RunnerLease":
        make_folder(self.directory, "the study folder")
        try:
            fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a folder the user cannot write in: bad input, said before anything runs
            raise UserError(f"cannot write in the study folder {self.directory}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                holder = _read_lease(self.directory).get("pid", "?")
                raise LeaseHeldError(f"another runner (pid {holder}) is running the study in "
                                     f"{self.directory}; wait for it or stop it first") from None
            raise
        self._fd = fd
        with locked(self.results_path):  # no notebook appends while the run id changes
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{self.run_id} {os.getpid()}\n".encode("ascii"), 0)
            os.fsync(fd)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read_lease(directory: str | os.PathLike) -> dict[str, str]:
    try:
        fields = (Path(directory) / LOCK_NAME).read_text(encoding="ascii").split()
    except OSError:
        return {}
    return {"run_id": fields[0], "pid": fields[1]} if len(fields) == 2 else {}


def lease_is_current(directory: str | os.PathLike, run_id: str) -> bool:
    """True while ``run_id`` is the run id of the study folder's lease."""
    return _read_lease(directory).get("run_id") == run_id


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def start_watchdog(runner_pid: int, directory: str | os.PathLike, run_id: str,
                   interval_s: float = WATCHDOG_INTERVAL_S) -> threading.Thread:
    """End this process when its runner dies or a new runner takes the study over."""
    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if not process_alive(runner_pid) or not lease_is_current(directory, run_id):
                os._exit(ORPHAN_EXIT_CODE)

    thread = threading.Thread(target=watch, name="runner-watchdog", daemon=True)
    thread.start()
    return thread
