"""Stopping a run cleanly: Ctrl-C and SIGTERM end the running kernels, and no new cell starts (docs/study.md,
*Stopping*). The signal only sets a flag and ends the processes of the cells being measured, whole trees.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from typing import Any, Callable

from ...kernel import end_children, end_tree


class RunningProcesses:
    """The papermill processes of the cells being measured now, one per worker."""

    def __init__(self) -> None:
        self._processes: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def add(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._processes.add(process)

    def discard(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._processes.discard(process)

    def end_all(self) -> None:
        """Kill every running cell's process tree (its kernel included) and reap it."""
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            end_tree(process.pid)


class Interrupt:
    """``with Interrupt() as interrupt:`` Ctrl-C ends this process's children first (a report's kernels: ended
    so, they print nothing), sets ``interrupt.requested``, then raises KeyboardInterrupt. Whatever unwinds after
    it (a kernel's death seen by nbclient) is the interrupt's, not an error of its own."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None  # SIGINT's handler before ours

    def _handle(self, signum, frame) -> None:
        self.requested = True
        end_children()
        raise KeyboardInterrupt

    def __enter__(self) -> "Interrupt":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class StopOnSignal:
    """``with StopOnSignal(on_stop) as stop:``: SIGINT/SIGTERM set ``stop.requested`` and call ``on_stop`` (handlers
    installed in the main thread only, where signals are delivered); a ``time_limit`` (``time_limit.TimeLimit``)
    stops the run the same way at its deadline."""

    def __init__(self, on_stop: Callable[[], None], time_limit=None) -> None:
        self.on_stop = on_stop
        self.requested = threading.Event()
        self.signal: int | None = None
        self.time_limit = time_limit
        self._previous: dict[int, Any] = {}

    def _handle(self, signum, frame) -> None:
        if self.signal is None:
            self.signal = signum
        self.stop_now()

    def stop_now(self) -> None:
        self.requested.set()
        self.on_stop()

    def __enter__(self) -> "StopOnSignal":
        self.requested.clear()  # each run starts unstopped: a runner may run again after a stop
        self.signal, self._previous = None, {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        if self.time_limit is not None:
            self.time_limit.arm(self.stop_now)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.time_limit is not None:
            self.time_limit.disarm()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
