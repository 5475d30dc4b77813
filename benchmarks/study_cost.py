"""What a study costs beyond its measurements: ``make bench``.

``python benchmarks/study_cost.py [GRID] [--out DIR] [--results FILE] [--keep]``

Runs GRID (default: ``benchmarks/grids/resnet18-eager.yaml``) with the study runner,
measuring everything again (``force``), then splits each cell's wall time, as the
runner saw it, into what the kernel reports in the record's ``phases`` block:
timed runs, warm-up, compile, parity, memory, other measured figures (FLOPs and
energy), and the remainder, the overhead: kernel start, model build, notebook and
runner machinery. The figure to drive down is that overhead amortized over the
grid's cells (target: at most 3 s per cell on a 2-core machine, default grid).

With ``--results FILE`` (a ``results.jsonl`` measured on a GPU) it also projects the
wall time of the guide's grid (``params/hf-guide.yaml``, 80 cells) on that GPU: the
kernel starts and per-cell overhead measured in this run, plus each cell's work
as the results file recorded it (target: at most 25 minutes on one H100). The
projection is labelled as such; cells the file has no figure for are left out and
counted, and the total is then a lower bound.

The computations are plain functions of outcomes and records (tested without
running anything); ``main()`` runs the grid and prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import shutil
import sys
import tempfile
import time

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GRID = PROJECT_ROOT / "benchmarks" / "grids" / "resnet18-eager.yaml"
GUIDE_GRID = PROJECT_ROOT / "params" / "hf-guide.yaml"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cell_breakdown import (TABLE_LEGEND, breakdown, breakdown_table, kernels_started,  # noqa: E402  (siblings)
                            mean_kernel_start_s, overhead_line, profile_line, run_records, totals)
from guide_projection import NO_PROJECTION, format_projection, project  # noqa: E402


# --- running ----------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grid", nargs="?", default=str(DEFAULT_GRID), help="grid file to run")
    parser.add_argument("--out", help="study folder (default: a temporary one, removed afterwards)")
    parser.add_argument("--results", help="results.jsonl measured on a GPU: project the guide's grid")
    parser.add_argument("--keep", action="store_true", help="keep the temporary study folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench_utils.records.results_file import read_records
    from bench_utils.study.grid.grid_file import load_grid
    from bench_utils.study.runner.grid_runner import Runner

    grid = load_grid(args.grid)
    out_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="study-cost-"))
    try:
        started = time.monotonic()
        run = Runner(grid, out_dir, force=True).run()  # its progress goes to stderr
        grid_wall_s = time.monotonic() - started
        results_path = out_dir / "results.jsonl"
        records = run_records(run.outcomes, read_records(results_path) if results_path.exists() else [])
    finally:
        if not args.out and not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    rows = breakdown(run.outcomes, records)
    summary = totals(rows, grid_wall_s)
    kernels = kernels_started(records)

    print(f"study cost of {args.grid} ({len(grid.cells)} cells, {len(rows)} run)")
    if rows:
        print(breakdown_table(rows))
        print(TABLE_LEGEND)
    print(overhead_line(summary))
    print(profile_line(rows))
    cells_wall = sum(row.wall_s for row in rows)
    print(f"grid wall time (around the runner): {grid_wall_s:.1f} s, of which cells {cells_wall:.1f} s "
          f"and between cells {grid_wall_s - cells_wall:.1f} s (in the overhead); kernels started: {kernels}")
    if args.keep or args.out:
        print(f"study folder: {out_dir}")

    if args.results:
        guide = load_grid(GUIDE_GRID)
        projection = project(guide.cells, read_records(args.results),
                             mean_kernel_start_s(rows, kernels),
                             summary.overhead_per_cell_without_start_s)
        print(format_projection(projection, "params/hf-guide.yaml", args.results))
    else:
        print(NO_PROJECTION)

    not_ok = len(rows) < len(grid.cells) or any(row.status != "ok" for row in rows)
    return run.exit_status() or (1 if not_ok else 0)


if __name__ == "__main__":
    from bench_utils.records.results_file import skipped_lines_said

    with skipped_lines_said():  # a line of a results file it skips is said on stderr, as python -m bench_utils says it
        sys.exit(main())
