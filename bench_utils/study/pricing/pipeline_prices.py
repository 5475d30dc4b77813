"""The compile processes' pipeline priced for a GPU: ``pipeline.simulate`` on the prior's figures, at each end.

A dry run with compile processes beside the kernels prices each cell compiled ahead at a warm compile: right only
where a process kept its cold compile before the kernel reached it. This replays the run's order on the same
figures (the kernels' starts and cells as priced, each cell compiled ahead at the prior's cold compile times
``BESIDE_COMPILE_FACTOR`` in a process that boots in ``PROCESS_SETUP_S`` and builds the model, the
cold compile calibrated as the model's cells are) and adds what the kernel loses: its waits, and the cold compiles
it does itself where no process was there yet.
No torch is imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .pipeline import AheadCell, KernelRun, Waits, simulate
from .prior import ENDS, Prior, Span

if TYPE_CHECKING:
    from .plan import KernelPlan

# At the prior's low, point and high ends: a cell's cold compile in a compile process beside the kernel, claim to
# kept, over the prior's cold compile alone: 1.7 to 2.7 on the first pipelined H200 lease (ViT 2.2 and 1.7, BEiT
# 2.7, 2.1 and 2.0: its logs/compile-ahead.log against the earlier leases' compiles alone), paused through the
# kernel's timed windows (no interference check had passed) and the token then held through dynamo's compiles,
# since let go; and a process's boot before its first cell, the model's build apart (that lease's ViT process: 26 s,
# its warm-up holding the token). Assumptions until the next lease's log.
BESIDE_COMPILE_FACTOR = (1.2, 2.0, 2.7)
PROCESS_SETUP_S = (10.0, 20.0, 30.0)


def kernel_runs(kernels: list[KernelPlan], prior: Prior, end: int) -> list[KernelRun]:
    """The kernels as ``simulate`` takes them, at the prior's ``end`` (0: low, 1: point, 2: high)."""
    ends = ENDS[end]

    def at_end(span: Span | None) -> float:
        return 0.0 if span is None else span.at(end)

    from ..grid.kernel_groups import compiled_ahead  # the grid imports torch: not at this module's import

    runs, ahead_of_kernels = [], compiled_ahead(cell for kernel in kernels for cell in kernel.group.cells)
    for kernel in kernels:
        model = kernel.group.first.model
        row = prior.costs.get(model)
        ratio = prior.work_ratio(model).at(end)  # as the model's cells are calibrated (Mask2Former: ~2 on the H200)
        ahead, modes = {}, set()
        for index, cell in enumerate(kernel.group.cells):
            first_of_mode = cell.compile_mode not in modes  # compiles warm too where it compiles cold itself
            modes.add(cell.compile_mode)
            if row is not None and cell in ahead_of_kernels:  # as ``runner.compile_ahead.jobs_for`` picks them
                alone = prior.compile_seconds(row, cell.compile_mode, ends) * ratio
                # priced at a warm compile: compiling cold itself adds the cold one, less the warm one where that
                # goes (``cell_plan``: a cell compiled cold compiles warm at its mode's first batch size only)
                own = alone if first_of_mode else alone * (1 - ends.warm_compile_share)
                ahead[index] = AheadCell(cold_s=alone * BESIDE_COMPILE_FACTOR[end], own_cold_s=own,
                                         row=cell.batch_size)
        setup = PROCESS_SETUP_S[end] + (row["build_s_cpu"] * ends.build_factor if row is not None else 0.0)
        runs.append(KernelRun(at_end(kernel.prior_start), [at_end(span) for span in kernel.prior_cells], ahead,
                              setup))
    return runs


def pipeline_waits(kernels: list[KernelPlan], prior: Prior, processes: int) -> tuple[Span, Waits, Span]:
    """What the pipeline adds to the kernels' priced sum, low, point and high (each end simulated on its own
    figures; a wait need not grow with them, so low and high are the least and most of the three), the point's
    simulation, and each compile process's share of their work at the three ends (``Waits.process_work_s``)."""
    added, simulated = [], []
    for end in range(len(ENDS)):
        runs = kernel_runs(kernels, prior, end)
        waits = simulate(runs, processes)
        added.append(waits.total_s - waits.kernel_work_s)
        simulated.append(waits)
    work = [waits.process_work_s for waits in simulated]
    return Span(min(added), added[1], max(added)), simulated[1], Span(*work)
