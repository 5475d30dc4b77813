"""Kernels started ahead: the next kernel group's kernel boots while the current one measures.

A kernel's start costs its GPU 6 to 8 s of boot (papermill, ipykernel, torch's and transformers' imports) and Inductor's
compile-worker pool (~8.5 s): ~6 min of a 38-minute study of 36 kernels. With compile ahead on (``compile_ahead``:
one device, cores to spare), the runner starts the next group's kernel as soon as the current one has started, on the
compile processes' cores, with a start gate (``study.start_gate``): it does the host's work only, then waits.
When the runner reaches that group (its first attempt, the device lock held, its cells fitted to the time limit and
cleared of out-of-memory rulings as any kernel's), it moves the kernel to the measuring cores (papermill's process
and the kernel's, every thread of each; the kernel's own children, Inductor's compile workers, stay on the compile
cores) and opens the gate with the cells to measure. From there it is followed as any kernel
(``papermill_execution.wait_for_papermill``). It starts as soon as the current kernel has started, not once it
measures: the two boot on disjoint cores, and a short kernel still hides the next one's boot. A kernel started ahead
and not used (a stop request, no cell left by the time limit, the run's end) is ended; its log is kept as
``<group>.unused-ahead.log``, its notebook removed: neither is any cell's evidence.
"""

from __future__ import annotations

import os
from pathlib import Path
import queue
import threading
from typing import Any, Callable

import psutil

from ...kernel import end_tree
from ...paths import PROJECT_ROOT, scrub_file
from ..grid.kernel_groups import KernelGroup
from ..start_gate import gate_path, write_gate
from .clean_stop import RunningProcesses
from ...measurement.paused_beside import PausedBeside
from .compile_ahead import CompileAhead
from .papermill_execution import StartedKernel, start_papermill, wait_for_papermill

UNUSED_LOG = "{group}.unused-ahead.log"


def move_tree(pid: int, cpus: set[int]) -> None:
    """``pid`` and its direct children (papermill's process and its kernel), every thread of each, onto ``cpus``;
    their own children (Inductor's compile workers) stay where they are. A thread that ended meanwhile is passed
    over."""
    try:
        family = [pid, *(child.pid for child in psutil.Process(pid).children())]
    except psutil.NoSuchProcess:
        return
    for process in family:
        try:
            threads = os.listdir(f"/proc/{process}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                os.sched_setaffinity(int(tid), cpus)
            except (ProcessLookupError, OSError):
                pass


class KernelsAhead:
    """One worker's kernels started ahead: at most the next group's, beside the kernel measuring now.

    ``execute`` is the runner's executor (``grid_runner.Executor``) while it is on; a kernel started ahead and not used
    is ended when the next kernel starts, or at the end of the ``with`` block (``end_all``)."""

    def __init__(self, out_dir: Path, running: RunningProcesses, ahead_cpus: set[int], measuring_cpus: set[int],
                 parameters: Callable[[KernelGroup, Path], dict[str, Any]],
                 next_group: Callable[[], KernelGroup | None] = lambda: None, beside: PausedBeside | None = None):
        self.out_dir, self.running = out_dir, running
        # the runner's notebook parameters of a group's first kernel (``Runner.parameters``), for the one started ahead
        self.parameters = parameters
        # until its gate opens a kernel started ahead is one more process beside the measuring kernel: stopped with
        # the compile processes through its timed windows, where they pause (``compile_ahead``)
        self.paused_beside = beside
        self.ahead_cpus, self.measuring_cpus = ahead_cpus or measuring_cpus, measuring_cpus
        self.next_group = next_group   # the worker's next group, not taken (``following``)
        self._started: dict[str, StartedKernel] = {}
        self._lock = threading.Lock()

    @classmethod
    def beside(cls, ahead: CompileAhead, out_dir: Path, running: RunningProcesses,
               parameters: Callable[[KernelGroup, Path], dict[str, Any]]) -> "KernelsAhead":
        """Kernels started ahead on the compile processes' cores, run on the measuring kernel's, with the runner's
        ``parameters``."""
        return cls(out_dir, running, set().union(*ahead.compile_cpus), ahead.measuring_cpus, parameters,
                   beside=ahead.beside)

    def __enter__(self) -> "KernelsAhead":
        return self

    def __exit__(self, *exc: object) -> None:
        self.end_all()

    def following(self, groups: queue.Queue) -> None:
        """Peek at ``groups`` (the one worker's queue) for the next group."""
        def peek() -> KernelGroup | None:
            with groups.mutex:
                return groups.queue[0] if groups.queue else None
        self.next_group = peek

    def started_for(self, group_id: str) -> bool:
        """Whether a kernel was started ahead for ``group_id`` (the time limit then prices only what follows its
        gate)."""
        with self._lock:
            return group_id in self._started

    def execute(self, group: KernelGroup, device: str, parameters: dict[str, Any], out_dir: Path,
                poll: Callable[[], bool], attempt: int) -> tuple[int, Path]:
        """Run ``group``'s kernel: the one started ahead for it (a first attempt), its gate opened with the cells of
        ``parameters``, else one started now; the next group's started ahead meanwhile."""
        with self._lock:
            started = self._started.pop(group.group_id, None) if attempt == 1 else None
            unused = [other for other in self._started if other != group.group_id]
        for other in unused:  # its group ran no kernel: no cell fitted the time limit, its cells were ruled out
            self.discard(other)
        gated = started is not None
        if started is None:
            started = start_papermill(group, device, parameters, out_dir, attempt=attempt, cpus=self.measuring_cpus,
                                      running=self.running)
        try:
            if gated:
                if self.paused_beside is not None:  # the measuring kernel now: never stopped by a window
                    self.paused_beside.resume()
                    self.paused_beside.unregister(started.process.pid)
                move_tree(started.process.pid, self.measuring_cpus)  # first: its first touch of the device is there
                write_gate(gate_path(out_dir, group.group_id), parameters["only_cells"])
            try:
                self._start_next(device, out_dir)
            except Exception:  # never the measuring kernel's failure: the next group's kernel then starts as ever
                pass
        except BaseException:  # never leave a kernel behind the runner's back
            end_tree(started.process.pid)
            raise
        try:
            return wait_for_papermill(started, out_dir, poll=poll, running=self.running)
        finally:
            gate_path(out_dir, group.group_id).unlink(missing_ok=True)

    def _start_next(self, device: str, out_dir: Path) -> None:
        """The next group's kernel, started with a gate on the cores apart from the measuring ones."""
        following = self.next_group()
        with self._lock:
            if following is None or following.group_id in self._started:
                return
        gate = gate_path(out_dir, following.group_id)
        gate.unlink(missing_ok=True)
        nested = self.parameters(following, out_dir / "logs" / f"{following.group_id}.1.progress")
        nested["start_gate"] = os.path.relpath(gate, PROJECT_ROOT)
        started = start_papermill(following, device, nested, out_dir, cpus=self.ahead_cpus, running=self.running)
        with self._lock:
            self._started[following.group_id] = started
        if self.paused_beside is not None:
            self.paused_beside.register(started.process.pid)

    def discard(self, group_id: str) -> None:
        """End ``group_id``'s kernel started ahead if it was not used; its log kept under a name of its own."""
        with self._lock:
            started = self._started.pop(group_id, None)
        if started is None:
            return
        if self.paused_beside is not None:
            self.paused_beside.resume()  # a stopped process would not end
            self.paused_beside.unregister(started.process.pid)
        end_tree(started.process.pid)
        started.process.wait()
        self.running.discard(started.process)
        gate_path(self.out_dir, group_id).unlink(missing_ok=True)
        started.executed.unlink(missing_ok=True)
        if started.log_path.exists():
            unused = started.log_path.replace(started.log_path.with_name(UNUSED_LOG.format(group=group_id)))
            scrub_file(unused, {str(self.out_dir): ".."})

    def end_all(self) -> None:
        """End every kernel started ahead and not used (the run's end, a stop, a failure)."""
        with self._lock:
            left = list(self._started)
        for group_id in left:
            self.discard(group_id)
