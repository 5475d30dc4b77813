"""The measuring kernel's waits for the compile processes beside it, simulated: what a dry run adds for them.

Under ``runner.compile_ahead`` each compile process takes the next kernel group with cells to compile ahead (in the
kernels' order), boots (torch, the compiler's warm-up, the model built), then claims and compiles its cells cold
one by one, in the order the kernel reaches them. The kernel, reaching such a cell, compiles it warm at once where
its cold compile is kept; waits where a process is on it (``phases.compile_wait_s``); and compiles it cold itself
where no process has claimed it yet (the process then skips it). On the first pipelined H200 lease the kernel
waited 10.5 to 16.6 s for 4 of its 6 compiled cells: one process compiles a model's cells one after another, each
cold compile (17 to 37 s beside the kernel) longer than the kernel's cell (10 to 15 s).

So the price of a pipelined run is not the sum of its cells priced warm: this replays the run's order, every
duration given (the prior's, or a lease's measured ones), and returns each wait and the cells the kernel compiles
itself. It is exact for the durations it is given; what it is worth rests on them (``pipeline_prices``: a cold
compile beside the kernel is the prior's cold compile, calibrated as the model's cells are, times
``BESIDE_COMPILE_FACTOR``). Left out: the GPU token's waits (each a fraction of a second, the
kernel's windows first), a process paused through the kernel's timed windows (in the factor, as measured) but
not while the kernel waits for it, and cells an out-of-memory error rules out (a process compiles them all the
same). No torch is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class AheadCell:
    """A cell a compile process may compile cold ahead of its kernel."""

    cold_s: float      # its cold compile in a compile process, beside the kernel (claim to kept)
    own_cold_s: float  # what the kernel adds where it compiles the cell cold itself (no process reached it)
    row: int | None = None  # its row (``study.cell.measured_row``: a batch size's compile modes, claimed together)


@dataclass(frozen=True)
class KernelRun:
    """One kernel as the run reaches it: its start on the GPU's path, then its cells in order."""

    start_s: float
    cells_s: list[float]                    # each cell on the kernel's path, its cold compile kept (a warm compile)
    ahead: dict[int, AheadCell] = field(default_factory=dict)  # by the cell's index: those compiled ahead
    process_setup_s: float = 0.0            # a compile process's boot before its first cell of this kernel's


@dataclass(frozen=True)
class Waits:
    """What the simulation found: the kernel's seconds with its waits, and how they arose."""

    total_s: float                  # from the run's start to the last cell's end, on the kernel's path
    wait_s: float                   # of it, waiting for compile processes
    waits: dict[tuple[int, int], float]  # (kernel, cell) -> seconds waited, where the kernel waited
    compiled_by_kernel: list[tuple[int, int]]  # cells no process had claimed when the kernel reached them
    kernel_work_s: float = 0.0      # the kernel's own: its starts and cells, no wait
    process_work_s: float = 0.0     # each process's share of theirs, were it even: every boot and cold compile
                                    # ahead over the processes (they keep pace only where it is below the kernel's)


@dataclass
class _Process:
    free_at: float = 0.0           # when it takes its next job (or claims its next cell)
    job: int = -1                  # the kernel whose cells it compiles (none yet)
    queue: list[int] = field(default_factory=list)  # that kernel's cells left to it


def simulate(kernels: list[KernelRun], processes: int) -> Waits:
    """The kernels run one after another from 0 s; ``processes`` compile processes start at 0 s too. Ties go to
    the compile process (its claim is seen first)."""
    jobs = [index for index, kernel in enumerate(kernels) if kernel.ahead]
    workers = [_Process() for _ in range(max(0, processes))]
    claimed: dict[tuple[int, int], float] = {}   # by a process: when its cold compile is kept
    by_kernel: set[tuple[int, int]] = set()

    def advance(until: float) -> None:
        """Every process's claims up to ``until``, in time order (a job taken at the earliest free process)."""
        while True:
            ready = [worker for worker in workers if worker.free_at <= until and (worker.queue or jobs)]
            if not ready:
                return
            worker = min(ready, key=lambda w: w.free_at)
            if not worker.queue:  # its next job: the next kernel with cells to compile ahead
                worker.job = jobs.pop(0)
                worker.queue = sorted(kernels[worker.job].ahead)
                worker.free_at += kernels[worker.job].process_setup_s
                continue
            key = (worker.job, worker.queue.pop(0))
            if key in by_kernel:
                continue  # the kernel claimed it first: skipped at once
            claimed[key] = worker.free_at = worker.free_at + kernels[key[0]].ahead[key[1]].cold_s

    now, waits = 0.0, {}
    for k, kernel in enumerate(kernels):
        now += kernel.start_s
        settled: set[int] = set()
        for i, seconds in enumerate(kernel.cells_s):
            ahead = kernel.ahead.get(i)
            if ahead is not None and i not in settled:
                # the row's cells claimed one after another at its first (``kept_caches.all_claimed``): each held
                # by a process waited for, the others claimed by the kernel, which compiles them cold after
                row = [j for j in sorted(kernel.ahead) if j not in settled and (
                    j == i or ahead.row is not None and kernel.ahead[j].row == ahead.row)]
                own = 0.0
                for j in row:
                    advance(now)
                    kept = claimed.get((k, j))
                    if kept is None:  # no process on it: the kernel compiles it cold, and the processes skip it
                        by_kernel.add((k, j))
                        own += kernel.ahead[j].own_cold_s
                    elif kept > now:
                        waits[(k, j)] = kept - now
                        now = kept
                    settled.add(j)
                now += own
            now += seconds
    own = sum(kernel.start_s + sum(kernel.cells_s) for kernel in kernels)
    ahead_work = sum(kernel.process_setup_s + sum(cell.cold_s for cell in kernel.ahead.values())
                     for kernel in kernels if kernel.ahead)
    return Waits(now, sum(waits.values()), waits, sorted(by_kernel), own,
                 ahead_work / processes if processes > 0 else 0.0)
