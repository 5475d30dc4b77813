"""Compile ahead of the measuring kernel: compile processes on cores of their own, the GPU shared by a token.

On the H200 the kernel that measured a cell spent half of its time compiling (27 compiled cells: 472 s of 935),
the GPU idle and 15 of 16 cores idle through every timed run. Here, while the kernel measures, compile processes
(``study.cell.compile_process``) compile the grid's next cells cold into their kept folders (``variants.kept_caches``),
in the order the kernel will reach them; the kernel then compiles each of them warm, and its record carries the
compile process's cold figures with how they were measured (``compile.cold_measured_in``). A cell the kernel
reaches while a compile process is on it waits for it; one no compile process has reached the kernel compiles
cold itself, as before.

- **Cores apart.** The measuring kernel gets ``MEASURING_CORES`` cores, the compile processes the others, split
  evenly (``device_lock.split_cpus``); each affinity is set before the process starts, so torch's threads and
  Inductor's compile workers follow it.
- **The GPU shared by a token** (``measurement.gpu_token``): the kernel holds it through its measuring windows, a
  compile process through its GPU phases. Its log, and each compile process's lines, are copied into the study
  folder's ``logs/`` at the end (a lease's output).
- **Switched by the machine**: on where the device is a GPU and the host has at least ``MIN_CORES`` cores, off on a
  CPU study (compiling beside timing there would share the cores, caches and memory bandwidth the timing uses);
  ``compile_ahead: true`` or ``false`` at a grid's top forces either way.
- Only a static torch.compile cell's first replicate in the run is compiled ahead (its later replicates find it
  kept; a later one whose first an earlier run measured is the first here), and none held to a share of the GPU's
  memory (``gpu_memory_gib``: a compile process's memory would be outside it).
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
import os
from pathlib import Path
import shutil
import subprocess
import sys
import threading
from typing import Any, Iterator, Sequence

from ...measurement.gpu_token import MEASURING, PAUSE_FOLDER, TOKEN_FILE, holdings, overlaps
from ...measurement.paused_beside import PausedBeside
from ...kernel import end_tree
from ...paths import PROJECT_ROOT
from ...variants.kept_caches import default_root
from ..compile_job import CompileJob
from ..grid.grid_file import Cell
from ..grid.kernel_groups import KernelGroup, compiled_ahead, kernel_groups
from .device_lock import split_cpus
from .papermill_execution import die_with_parent, visible_devices_for

MEASURING_CORES = 4      # the measuring kernel's: its Python thread, the CUDA driver's, the NVML reads, spare
MIN_CORES = 8            # below this, a host keeps every core for the measuring kernel
COMPILE_PROCESSES = 2    # at most: each a model's cells at a time, on an even share of the other cores
LOG_FILE = "compile-ahead.log"


def wanted(cells: Sequence[Cell], cpus: set[int], devices: int = 1) -> bool:
    """Whether a run of ``cells`` on ``devices`` devices compiles ahead: never on several (their kernels share the
    cores already, ``device_lock.split_cpus``); else the grid's ``compile_ahead`` where set, else on a GPU with at
    least ``MIN_CORES`` cores. The runner, the dry run and the time limit ask it alike."""
    if devices > 1:
        return False
    forced = {cell.settings.compile_ahead for cell in cells} - {None}
    if forced:
        return bool(forced.pop())
    return any(cell.device.startswith("cuda") for cell in cells) and len(cpus) >= MIN_CORES


def jobs_for(cells: Sequence[Cell]) -> list[tuple[KernelGroup, list[list[Any]]]]:
    """Each kernel group's cells a compile process compiles, in the order the kernel will reach them: the static
    torch.compile cells that are the first of their replicates in the run (``first_replicates_in``: a later
    replicate whose first an earlier run measured, on a fresh GPU lease, finds no kept caches)."""
    jobs, ahead_of_kernels = [], compiled_ahead(cells)
    for group in kernel_groups(list(cells)):
        ahead = [cell for cell in group.cells if cell in ahead_of_kernels]
        if ahead:
            jobs.append((group, [[cell.compile_mode, cell.batch_size] for cell in ahead]))
    return jobs


class CompileAhead:
    """Compile processes for ``cells``, beside the measuring kernel, while the block runs (``running``)."""

    def __init__(self, cells: Sequence[Cell], out_dir: Path, cpus: set[int], processes: int = COMPILE_PROCESSES,
                 worker: str = "cpu"):
        self.root = default_root(out_dir)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if worker.startswith("cuda"):  # the kernel's GPU, as its CUDA_VISIBLE_DEVICES pins it: never another card
            self.env["CUDA_VISIBLE_DEVICES"] = visible_devices_for(worker, os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.out_dir = out_dir
        measuring = min(MEASURING_CORES, max(1, len(cpus) // 2))
        ordered = sorted(cpus)
        self.measuring_cpus = set(ordered[:measuring])
        others = ordered[measuring:]
        self.compile_cpus = split_cpus(others, min(processes, len(others))) if others else []
        self.jobs = jobs_for(cells)
        self._next = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._processes: set[subprocess.Popen] = set()
        self.beside = PausedBeside(self.root / PAUSE_FOLDER)  # where the kernel stops them through its timed windows
        self.pausing = False  # whether it does (the runner's reading of the interference check)
        self.command = [sys.executable, "-m", "bench_utils.study.cell.compile_process"]  # + the job's file

    @property
    def token(self) -> Path:
        return self.root / TOKEN_FILE

    @property
    def token_log(self) -> Path:
        return self.root / (TOKEN_FILE + ".log")

    def measured_in(self, cpus: set[int]) -> str:
        """How a compile process's cold figures were measured, as its cells' records say."""
        return (f"a compile process beside the measuring kernel ({len(cpus)} cores; {len(self.compile_cpus)} "
                f"compile process(es), {len(self.measuring_cpus)} cores measuring)")

    @contextmanager
    def running(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        for name in (TOKEN_FILE + ".log", LOG_FILE):  # this run's, from its start (an earlier run's are in logs/)
            (self.root / name).unlink(missing_ok=True)
        shutil.rmtree(self.beside.folder, ignore_errors=True)  # pids of an earlier run's processes: none is ours
        threads = [threading.Thread(target=self._work, args=(cpus,), name=f"compile-ahead-{index}", daemon=True)
                   for index, cpus in enumerate(self.compile_cpus)]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            self._stopping.set()
            with self._lock:
                running = list(self._processes)
            self.beside.resume()  # a stopped process would not end
            for process in running:  # with Inductor's compile workers: a compile process left would hold cores
                end_tree(process.pid)
            for thread in threads:
                thread.join()
            self._keep_logs()

    def _take(self) -> tuple[KernelGroup, list[list[Any]]] | None:
        with self._lock:
            if self._stopping.is_set() or self._next >= len(self.jobs):
                return None
            self._next += 1
            return self.jobs[self._next - 1]

    def _work(self, cpus: set[int]) -> None:
        while (taken := self._take()) is not None:
            group, cells = taken
            first = group.first
            job = CompileJob(task=first.task, model=first.model, dtype=first.dtype, device=first.device,
                             settings=first.settings.to_parameters(), cells=cells, caches=str(self.root),
                             measured_in=self.measured_in(cpus), token=str(self.token),
                             log=str(self.root / LOG_FILE),
                             beside={"cores": len(cpus), "compile_processes": len(self.compile_cpus),
                                     "measuring_cores": len(self.measuring_cpus)})
            path = self.root / f"job-{group.group_id}.json"
            job.write(path)
            with open(self.root / f"job-{group.group_id}.out", "wb") as out, self._lock:
                if self._stopping.is_set():
                    return
                process = subprocess.Popen([*self.command, str(path)],
                                           cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT,
                                           env=self.env,
                                           preexec_fn=lambda: _apart(cpus))
                self._processes.add(process)
                self.beside.register(process.pid)  # stopped at once if the kernel is timing now
            process.wait()
            with self._lock:
                self._processes.discard(process)
                self.beside.unregister(process.pid)

    @property
    def while_timing(self) -> str:
        """What the compile processes do through the kernel's timed windows: "pause" or "compile"."""
        return "pause" if self.pausing else "compile"

    def resume(self) -> None:
        """The compile processes let go on, after a kernel (one that died inside a timed window left them stopped)."""
        self.beside.resume()

    def _keep_logs(self) -> None:
        """The token's log and the compile processes' lines, added to the study folder's ``logs/`` (a resumed run's
        after the earlier run's; no path in them)."""
        logs = self.out_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in (TOKEN_FILE + ".log", LOG_FILE):
            if (self.root / name).exists():
                with open(logs / name, "ab") as kept, open(self.root / name, "rb") as this_run:
                    shutil.copyfileobj(this_run, kept)

    def summary(self) -> str:
        """One line for the run's output: what the compile processes did, and whether the token kept them out of
        every measuring window (its log's overlaps, ``gpu_token.overlaps``)."""
        counts = Counter(line.get("status") for line in holdings(self.root / LOG_FILE))  # JSON lines, read as the token's
        entries = holdings(self.root / (TOKEN_FILE + ".log"))
        waited = sum(entry.get("waited_s", 0.0) for entry in entries if entry.get("role") == MEASURING)
        return (f"[run] compile ahead: {counts['kept']} cell(s) compiled cold by compile processes, {counts['skipped']}"
                f" skipped, {counts['failed']} failed, {self.while_timing} through the kernel's timed "
                f"windows; GPU token: {len(overlaps(entries))} overlap(s) of a compile "
                f"phase with a measuring window, the kernel waited {waited:.1f} s for it (logs/{TOKEN_FILE}.log)\n")


def _apart(cpus: set[int]) -> None:
    """In the child, before it execs: dies with the runner, and runs on its own cores only."""
    die_with_parent()
    os.sched_setaffinity(0, cpus)
