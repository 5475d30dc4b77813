"""What the runner tells the person watching: progress per cell, and the run's outcome."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
import signal
import threading
import time
from typing import Callable, Protocol

from ..grid.grid_file import Cell
from ...vocabulary import Status


@dataclass
class Outcome:
    """How one cell of this run ended."""

    cell: Cell
    status: str            # ok, oom, error; "skipped" for cells not run after an OOM
    seconds: float
    device: str
    message: str = ""


@dataclass
class RunOutcome:
    """Every cell of one run of a grid: those run now, and those resumed from earlier runs."""

    outcomes: list[Outcome] = field(default_factory=list)
    resumed: int = 0
    total: int = 0
    not_run: int = 0                 # pending cells never started (the run was stopped)
    signal: int | None = None        # SIGINT or SIGTERM, if one stopped the run
    worker_errors: list[str] = field(default_factory=list)
    again: int = 0                   # of the outcomes: unsteady cells measured once more (``unsteady``)

    def exit_status(self) -> int:
        """128 + the signal that stopped the run; 1 if a worker failed or a cell errored; else 0."""
        if self.signal is not None:
            return 128 + self.signal
        return 1 if self.worker_errors or self.counts().get("error") else 0

    def counts(self) -> Counter:
        return Counter(outcome.status for outcome in self.outcomes)


class ProgressView(Protocol):
    """What the runner tells the person watching (``Progress``; a cluster node's events): a cell begun, one
    ended, the run over; ``limit_left``, where a time limit is set, the seconds it leaves."""

    limit_left: Callable[[], float] | None

    def start(self, cell: Cell, device: str) -> None: ...

    def finish(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...


class Progress:
    """One bar over all cells (tqdm on a terminal; one plain line per cell in logs), with what each
    worker (a device, or a cluster node) is measuring now."""

    def __init__(self, total: int, stream) -> None:
        self.total, self.stream, self.done = total, stream, 0
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.running: dict[str, str] = {}   # worker -> the cell it is measuring
        # seconds until a --time-limit stops the run (the runner sets it): an ETA past it says so, since the
        # grid's ETA after one long cell (Mask2Former's first, on the H200: 77 min) is not when this run ends
        self.limit_left: Callable[[], float] | None = None
        self.bar = None
        if getattr(stream, "isatty", lambda: False)():
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=stream, unit="cell", dynamic_ncols=True)

    def start(self, cell: Cell, device: str) -> None:
        with self.lock:
            variant = "".join(f" {part}" for part in cell.variant)  # channels_last, dynamic
            text = f"{cell.model} bs{cell.batch_size} {cell.compile_mode}{variant} {cell.dtype} on {device}"
            self.running[device] = text
            if self.bar is not None:
                self.bar.set_description(text if len(self.running) == 1 else
                                         f"{len(self.running)} running; {text}")
            else:
                print(f"[{self.done + 1}/{self.total}] measuring {text}", file=self.stream, flush=True)

    def idle(self, worker: str) -> None:
        """``worker`` measures nothing now (a cluster node lost mid-cell)."""
        with self.lock:
            self.running.pop(worker, None)

    def resolve(self, count: int) -> None:
        """``count`` cells of the total turned out to be measured already (a cluster node's resume)."""
        with self.lock:
            self.total -= count
            if self.bar is not None:
                self.bar.total = self.total
                self.bar.refresh()

    def finish(self, outcome: Outcome) -> None:
        with self.lock:
            self.done += 1
            self.running.pop(outcome.device, None)
            if self.bar is not None:
                self.bar.update(1)
                return
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.done * (self.total - self.done)
            detail = f": {outcome.message}" if outcome.message and outcome.status != Status.OK else ""
            running = (f"; running: {'; '.join(self.running.values())}" if len(self.running) > 1 else "")
            left = self.limit_left() if self.limit_left is not None else None
            limit = (f" for the grid; the time limit stops this run in {max(left, 0.0) / 60:.1f} min"
                     if left is not None and eta > left else "")
            print(f"[{self.done}/{self.total}] {outcome.cell.cell_id}: {outcome.status} "
                  f"({outcome.seconds:.0f} s){detail}; ETA {eta / 60:.1f} min{limit}{running}",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def format_run_outcome(run: RunOutcome, results_path: Path, slowest: int = 3) -> str:
    counts = run.counts()
    if not run.outcomes and not run.worker_errors and run.signal is None and not run.not_run:
        return (f"all {run.total} cells already measured for this environment; nothing to do "
                f"(--force measures again). Results: {results_path}")
    lines = [f"cells: {run.total} in the grid, {run.resumed} already measured, "
             f"{len(run.outcomes)} run now: {counts.get('ok', 0)} ok, {counts.get('oom', 0)} oom, "
             f"{counts.get('error', 0)} error, {counts.get('skipped', 0)} skipped after an OOM"
             + (f" ({run.again} of them unsteady cells measured once more, as one more replicate)" if run.again
                else "")]
    ranked = sorted(run.outcomes, key=lambda outcome: outcome.seconds, reverse=True)[:slowest]
    if ranked:  # none when a time limit started no cell
        lines.append("slowest: " + ", ".join(f"{o.cell.cell_id} ({o.seconds:.0f} s)" for o in ranked))
    for outcome in run.outcomes:
        if outcome.status == Status.ERROR:
            lines.append(f"error: {outcome.cell.cell_id} on {outcome.device}: {outcome.message}")
    if run.signal is not None or run.not_run:
        stopped = f"stopped by {signal.Signals(run.signal).name}: " if run.signal is not None else ""
        lines.append(f"{stopped}{run.not_run} cell(s) not run; run the grid again to measure them")
    lines += [f"error: {error}" for error in run.worker_errors]
    lines.append(f"results: {results_path}  executed notebooks: {results_path.parent / 'notebooks'}")
    return "\n".join(lines)
