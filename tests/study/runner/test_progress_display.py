"""What the person watching a run sees: one line per cell, what each worker measures, an ETA."""

import io

from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner.progress_display import Outcome, Progress

GRID = {"study": "p", "grids": [{"models": ["resnet"], "batch_sizes": [1, 4, 16], "compile_modes": ["eager"]}]}


def test_each_line_names_what_the_other_workers_are_measuring():
    one, four, sixteen = parse_grid(GRID).cells
    stream = io.StringIO()
    progress = Progress(3, stream)
    progress.start(one, "node a1 (KA)")
    progress.start(four, "node b1 (KB)")
    progress.finish(Outcome(one, "ok", 12.0, "node a1 (KA)"))
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("[1/3] image-classification__resnet__bs1__eager__float32__cpu: ok (12 s); ETA")
    assert "running" not in last  # one worker left: the line above says what it measures
    progress.start(sixteen, "node a1 (KA)")
    progress.finish(Outcome(four, "ok", 3.0, "node b1 (KB)"))
    assert "running" not in stream.getvalue().splitlines()[-1]
    progress.start(four, "node b1 (KB)")
    progress.idle("node b1 (KB)")  # its node was lost: it measures nothing now
    progress.start(four, "node b2 (KB)")
    progress.finish(Outcome(sixteen, "oom", 1.0, "node a1 (KA)", "CUDA out of memory"))
    assert "[3/3]" in stream.getvalue().splitlines()[-1] and ": CUDA out of memory" in stream.getvalue()
    progress.start(one, "node c1")
    progress.start(sixteen, "node c2")
    progress.finish(Outcome(four, "ok", 1.0, "node b2 (KB)"))
    assert stream.getvalue().splitlines()[-1].endswith(
        "running: resnet bs1 eager float32 on node c1; resnet bs16 eager float32 on node c2")


def test_cells_found_measured_already_leave_the_total():
    cells = parse_grid(GRID).cells
    stream = io.StringIO()
    progress = Progress(3, stream)
    progress.resolve(2)  # a cluster node found two of them measured on its environment
    progress.start(cells[0], "node a1")
    progress.finish(Outcome(cells[0], "ok", 5.0, "node a1"))
    assert stream.getvalue().splitlines()[-1].startswith("[1/1] ") and "ETA 0.0 min" in stream.getvalue()


def test_an_eta_past_the_time_limit_says_when_the_limit_stops_the_run():
    # the second H200 lease: after Mask2Former's first cell (126 s) the grid's ETA read 77.5 min in a 4.2-minute run
    import time

    one, four, sixteen = parse_grid(GRID).cells
    stream = io.StringIO()
    progress = Progress(3, stream)
    progress.limit_left = lambda: 120.0
    progress.started = time.monotonic() - 600  # one cell in 10 minutes: 20 more for the other two
    progress.start(one, "cpu")
    progress.finish(Outcome(one, "ok", 600.0, "cpu"))
    assert stream.getvalue().splitlines()[-1].endswith(
        "ETA 20.0 min for the grid; the time limit stops this run in 2.0 min")
    progress.limit_left = lambda: 3600.0  # the grid ends first: the ETA alone
    progress.start(four, "cpu")
    progress.finish(Outcome(four, "ok", 1.0, "cpu"))
    assert stream.getvalue().splitlines()[-1].endswith("min")
    assert "time limit" not in stream.getvalue().splitlines()[-1]
