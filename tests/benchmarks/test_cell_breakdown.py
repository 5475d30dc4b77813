"""benchmarks/cell_breakdown.py (through study_cost, which runs it) on synthetic outcomes and records."""

import pytest

from bench_utils.study.runner.progress_display import Outcome
from bench_records import FULL_PHASES, benchmark, record, run_cell

cell_breakdown = benchmark("cell_breakdown")


# --- breakdown of this run ----------------------------------------------------------------

def test_overhead_is_wall_minus_the_measured_parts():
    cell = run_cell("default", 1)
    [row] = cell_breakdown.breakdown([Outcome(cell, "ok", 10.0, "cpu")], [record(cell, phases=FULL_PHASES)])
    assert (row.timed_s, row.warmup_s, row.compile_s, row.parity_s, row.memory_s) == (2.0, 0.5, 3.0, 0.25, 0.25)
    assert row.other_s == pytest.approx(1.0)        # flops + energy
    assert row.measured_s == pytest.approx(7.0)
    assert row.overhead_s == pytest.approx(3.0)     # startup and load are not measured parts
    assert row.start_s == pytest.approx(2.5)


def test_missing_phase_keys_and_missing_records_count_as_overhead():
    partial, absent = run_cell("eager", 1), run_cell("eager", 2)
    rows = cell_breakdown.breakdown([Outcome(partial, "ok", 4.0, "cpu"), Outcome(absent, "error", 6.0, "cpu")],
                                [record(partial, phases={"timed_s": 1.0})])
    assert [row.overhead_s for row in rows] == [pytest.approx(3.0), pytest.approx(6.0)]
    assert rows[1].status == "error"


def test_records_match_outcomes_by_cell_identity_not_order():
    first, second = run_cell("eager", 1), run_cell("eager", 2)
    records = [record(second, phases={"timed_s": 2.0}),
               record(first, phases={"timed_s": 1.0}),
               record(first, study="other", phases={"timed_s": 9.0})]  # another study: not this cell
    rows = cell_breakdown.breakdown([Outcome(first, "ok", 5.0, "cpu"), Outcome(second, "ok", 5.0, "cpu")], records)
    assert [row.timed_s for row in rows] == [1.0, 2.0]


def test_the_last_record_of_a_cell_is_this_runs():
    cell = run_cell("eager", 1)
    older, newer = record(cell, phases={"timed_s": 4.0}), record(cell, phases={"timed_s": 1.0})
    [row] = cell_breakdown.breakdown([Outcome(cell, "ok", 5.0, "cpu")], [older, newer])
    assert row.timed_s == 1.0
    assert cell_breakdown.run_records([Outcome(cell, "ok", 5.0, "cpu")], [older, newer]) == [newer]


def test_totals_amortize_the_overhead_over_the_cells():
    a, b = run_cell("eager", 1), run_cell("eager", 2)
    rows = cell_breakdown.breakdown(
        [Outcome(a, "ok", 10.0, "cpu"), Outcome(b, "ok", 6.0, "cpu")],
        [record(a, phases={"startup_s": 2.0, "load_s": 1.0, "timed_s": 7.0}),  # overhead 3, start 3
         record(b, phases={"timed_s": 1.0})])                                 # overhead 5
    summary = cell_breakdown.totals(rows)
    assert (summary.cells, summary.wall_s, summary.measured_s) == (2, 16.0, 8.0)
    assert summary.overhead_per_cell_s == pytest.approx(4.0)
    assert summary.overhead_per_cell_without_start_s == pytest.approx(2.5)
    assert cell_breakdown.mean_kernel_start_s(rows, kernels=1) == pytest.approx(3.0)
    assert cell_breakdown.mean_kernel_start_s(rows, kernels=0) is None


def test_kernels_started_counts_records_with_a_startup():
    a, b, c = run_cell("eager", 1), run_cell("eager", 2), run_cell("default", 1)
    records = [record(a, phases={"startup_s": 1.2, "load_s": 0.5}), record(b, phases={"timed_s": 1.0}),
               record(c, phases={"startup_s": 0.9}), record(c)]
    assert cell_breakdown.kernels_started(records) == 2


@pytest.mark.parametrize("per_cell, verdict", [(2.5, "[target <= 3 s: met]"),
                                               (3.0, "[target <= 3 s: met]"),
                                               (4.25, "[target <= 3 s: missed by 1.2 s]")])
def test_overhead_line_says_whether_the_target_is_met(per_cell, verdict):
    summary = cell_breakdown.Totals(cells=4, wall_s=40.0, measured_s=40.0 - 4 * per_cell,
                                overhead_s=4 * per_cell, start_s=0.0)
    line = cell_breakdown.overhead_line(summary)
    assert line == f"overhead per cell (amortized over 4 cells): {per_cell:.1f} s  {verdict}"


def test_table_has_a_row_per_cell_and_a_total():
    a, b = run_cell("eager", 1), run_cell("eager", 2)
    rows = cell_breakdown.breakdown([Outcome(a, "ok", 10.0, "cpu"), Outcome(b, "ok", 6.0, "cpu")],
                                [record(a, phases={"timed_s": 7.0}), record(b, phases={"timed_s": 1.0})])
    lines = cell_breakdown.breakdown_table(rows).splitlines()
    assert len(lines) == 4  # header, two cells, total
    assert a.cell_id in lines[1] and "3.00" in lines[1]
    assert lines[3].split()[:3] == ["total", "(2", "cells)"] and "8.00" in lines[3]  # 3 + 5 s overhead


def test_the_overhead_amortizes_the_whole_runs_wall_time():
    rows = [cell_breakdown.CellCost("a", "ok", wall_s=10.0, timed_s=8.0), cell_breakdown.CellCost("b", "ok", wall_s=5.0, timed_s=5.0)]
    assert cell_breakdown.totals(rows).overhead_per_cell_s == pytest.approx(1.0)
    # 4 s more between cells (a kernel's teardown, the runner's set-up) are overhead too
    assert cell_breakdown.totals(rows, grid_wall_s=19.0).overhead_per_cell_s == pytest.approx(3.0)
