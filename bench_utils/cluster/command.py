"""``python -m bench_utils run GRID --executor ray``: the driver on the cluster ``--address`` names."""

from __future__ import annotations

import os
import sys

from ..study.grid.grid_file import Grid, keep_grid_copy
from ..study.runner.progress_display import format_run_outcome
from .driver import ClusterRunner
from .placement import task_resources


def run_on_cluster(grid: Grid, params: os.PathLike | str, *, out=None, force: bool = False,
                   timeout: int | None = None, address: str | None = None) -> int:
    """Run ``grid`` on a Ray cluster and print its summary; the exit status. A cluster that cannot be reached or
    cannot run the grid raises UserError (one line, exit 2)."""
    runner = ClusterRunner(grid, out, force=force, timeout=timeout)
    keep_grid_copy(params, runner.out_dir)
    from .ray_cluster import RayCluster  # Ray: only for cluster runs

    with RayCluster(address) as cluster:
        task_resources(grid, cluster.nodes())  # a cluster that cannot run the grid: one line, before all
        kinds = f" on each of {', '.join(grid.accelerators)}" if grid.accelerators else ""
        nodes = sum(node["alive"] for node in cluster.nodes())
        print(f"[run] study {grid.study}: {len(grid.cells)} cells{kinds} from {params} on the Ray cluster "
              f"({nodes} node{'s' if nodes != 1 else ''}); results in {runner.results_path}; a cell that records "
              f"nothing for {runner.timeout / 60:.0f} min is stopped", file=sys.stderr)
        outcome = runner.run(cluster)  # a folder another runner holds: LeaseHeldError (a UserError), one line
    print(format_run_outcome(outcome, runner.results_path))
    return outcome.exit_status()
