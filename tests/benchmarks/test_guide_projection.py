"""benchmarks/guide_projection.py (through study_cost, which runs it) on synthetic grids and records."""

import pytest

from bench_records import GUIDE, H100_ENV, benchmark, guide_cell, record

guide_projection = benchmark("guide_projection")


# --- projection for the guide's grid ----------------------------------------------------

def test_eager_cells_sharing_a_compiled_cells_pairs():
    sharing = guide_projection.eager_cells_sharing_pairs(GUIDE.cells)
    assert sharing == {guide_cell("resnet", "eager", 1), guide_cell("resnet", "eager", 4)}


def test_phases_are_used_with_timed_parts_scaled_to_the_grids_runs():
    cell = guide_cell("resnet", "default", 1)
    result = record(cell, runs=30, warmup=1, environment=H100_ENV,
                    phases={"compile_s": 20.0, "timed_s": 3.0, "warmup_s": 0.1, "parity_s": 1.0,
                            "memory_s": 0.5, "energy_s": 0.25},
                    compile={"cold_ms": 99_000.0, "warm_ms": 1_000.0}, eager_mean_ms=20.0)
    work = guide_projection.cell_work(cell, result, shares_pairs=False)
    assert work.source == "phases"                       # preferred over cold/warm and latencies
    assert work.compile_s == 20.0
    assert work.timed_s == pytest.approx(3.1 * 310 / 31)  # (300 runs + 10 warm-up) / (30 + 1)
    assert work.rest_s == pytest.approx(1.75)


def test_an_eager_cell_sharing_pairs_has_no_timed_cost():
    cell = guide_cell("resnet", "eager", 1)
    with_phases = record(cell, phases={"timed_s": 5.0, "warmup_s": 1.0, "memory_s": 0.5})
    without = record(cell)
    assert guide_projection.cell_work(cell, with_phases, shares_pairs=True).timed_s == 0.0
    assert guide_projection.cell_work(cell, with_phases, shares_pairs=True).rest_s == 0.5
    assert guide_projection.cell_work(cell, without, shares_pairs=True).total_s == 0.0
    # the same record, standalone: its own timed runs count
    assert guide_projection.cell_work(cell, with_phases, shares_pairs=False).timed_s == pytest.approx(6.0 * 310 / 12)


def test_without_phases_compile_cost_and_latencies_are_used():
    cell = guide_cell("resnet", "default", 4)
    both = record(cell, compile={"cold_ms": 40_000.0, "warm_ms": 10_000.0}, eager_mean_ms=20.0)
    work = guide_projection.cell_work(cell, both, shares_pairs=False)
    assert work.source == "latencies"
    assert work.compile_s == pytest.approx(50.0)
    assert work.timed_s == pytest.approx(310 * (0.020 + 0.010))  # eager and compiled sides
    cold_only = record(cell, compile={"cold_ms": 40_000.0, "warm_ms": None}, eager_mean_ms=20.0)
    assert guide_projection.cell_work(cell, cold_only, shares_pairs=False).compile_s == pytest.approx(40.0)


def test_a_standalone_eager_cell_costs_its_calls():
    cell = guide_cell("vit", "eager", 1)
    work = guide_projection.cell_work(cell, record(cell, times_ms=(20.0, 20.0, 20.0)), shares_pairs=False)
    assert work.timed_s == pytest.approx(310 * 0.020)


@pytest.mark.parametrize("fields", [{"compile": None, "eager_mean_ms": 20.0},        # no cold_ms
                                    {"compile": {"cold_ms": 1.0}, "eager_mean_ms": None},  # no eager
                                    {"status": "oom"}])                              # no latency
def test_a_compiled_record_without_figures_gives_none(fields):
    cell = guide_cell("resnet", "default", 1)
    assert guide_projection.cell_work(cell, record(cell, **fields), shares_pairs=False) is None
    assert guide_projection.cell_work(cell, None, shares_pairs=False) is None


def test_results_prefer_an_ok_record_over_a_later_failure():
    cell = guide_cell("resnet", "default", 1)
    ok, failed = record(cell, phases={"compile_s": 1.0}), record(cell, status="error")
    key = guide_projection.work_key(cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.dtype)
    assert guide_projection.results_by_work_key([ok, failed])[key] is ok


def projection_results():
    """H100 results for 3 of the guide's 5 cells; the resnet cells at batch 4 have none."""
    compiled, eager, vit = (guide_cell("resnet", "default", 1), guide_cell("resnet", "eager", 1),
                            guide_cell("vit", "eager", 1))
    return [record(compiled, device="cuda", environment=H100_ENV, runs=300, warmup=10,
                   phases={"compile_s": 60.0, "timed_s": 9.0, "warmup_s": 1.0}),
            record(eager, device="cuda", environment=H100_ENV, runs=300, warmup=10,
                   phases={"timed_s": 0.0, "memory_s": 2.0}),
            record(vit, device="cuda", environment=H100_ENV, times_ms=(20.0, 20.0, 20.0))]


def test_projection_sums_kernel_starts_overhead_and_the_work_of_cells_with_figures():
    projection = guide_projection.project(GUIDE.cells, projection_results(), kernel_start_s=12.0,
                                    overhead_per_cell_s=1.5)
    assert (projection.cells, projection.kernels, projection.no_figure) == (5, 2, 2)
    assert len(projection.work) == 3                       # the two without figures are left out
    assert projection.work_total_s == pytest.approx(70.0 + 2.0 + 310 * 0.020)
    assert projection.total_s == pytest.approx(2 * 12.0 + 5 * 1.5 + 70.0 + 2.0 + 6.2)
    assert projection.lower_bound
    assert projection.environments == ["NVIDIA H100 80GB HBM3, torch 2.9.0"]


def test_projection_text_says_it_is_a_projection_and_a_lower_bound():
    projection = guide_projection.project(GUIDE.cells, projection_results(), kernel_start_s=12.0,
                                    overhead_per_cell_s=1.5)
    text = guide_projection.format_projection(projection, "guide.yaml", "h100.jsonl")
    assert text.startswith("PROJECTION (not a measurement) of guide.yaml (5 cells)")
    assert "NVIDIA H100 80GB HBM3, torch 2.9.0" in text
    # 109.7 s, but cells are missing: below the target says nothing
    assert "projected total: at least 1.8 min  [target <= 25 min: unknown, this is a lower bound]" in text
    assert "2 cell(s) have no figure in h100.jsonl and are not included: the projection is a lower bound" in text


def test_projection_over_target_and_without_kernel_starts():
    projection = guide_projection.project(GUIDE.cells, projection_results(), kernel_start_s=None,
                                    overhead_per_cell_s=360.0)     # 30 min of overhead alone
    assert projection.kernel_starts_total_s == 0.0 and projection.lower_bound
    text = guide_projection.format_projection(projection, "guide.yaml", "h100.jsonl")
    assert "2 of 2 kernels not included" in text
    assert "at least 31.3 min  [target <= 25 min: missed by 6.3 min]" in text  # (1800 + 78.2) s


def test_projection_takes_the_gpu_machines_own_kernel_start_and_whole_cells():
    results = projection_results()
    compiled = guide_cell("resnet", "default", 1)  # resnet's kernel, on the GPU
    results[0] = record(compiled, device="cuda", environment=H100_ENV, runs=300, warmup=10,
                        phases={"compile_s": 60.0, "timed_s": 9.0, "warmup_s": 1.0, "startup_s": 9.0, "load_s": 21.0,
                                "cell_s": 75.0})
    projection = guide_projection.project(GUIDE.cells, results, kernel_start_s=3.0, overhead_per_cell_s=0.0)
    assert projection.starts_from_results == {"image-classification__resnet__float32__cuda": 30.0}
    assert projection.kernel_starts_total_s == pytest.approx(30.0 + 3.0)  # vit's from this run
    # the cell's unnamed remainder (75 - 60 compile - 10 timed) counts, scaled parts apart
    compiled = next(c for c in GUIDE.cells if (c.model, c.compile_mode, c.batch_size) == ("resnet", "default", 1))
    assert projection.work[compiled].rest_s == pytest.approx(5.0)
