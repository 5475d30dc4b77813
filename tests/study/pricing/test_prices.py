"""The one rule (``pricing.prices``), on small synthetic records: a cell's own record, else on a GPU the prior
calibrated by the device's records, else nothing; a kernel's start likewise."""

from dataclasses import replace

import pytest

from bench_utils.measurement.timing import Measurement
from bench_utils.records.build import failure_record, make_record, measurement_settings
from bench_utils.records.results_file import append_record, read_records
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.pricing.prices import Prices, calibrated
from bench_utils.study.pricing.prior import Prior, Shape, Span

CPU = {"torch_version": "2.15.0", "cpu_model": "Test CPU", "cpu_count_logical": 2}
H100 = {"torch_version": "2.11.0", "driver_version": "580.1", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}
GRID = {"study": "t", "runs": 60, "warmup": 10, "blocks": 2, "replicates": 2, "grids": [  # 30 runs a replicate
    {"models": ["resnet", "vit"], "batch_sizes": [1, 4], "compile_modes": ["eager", "default"]}]}


def cells(device="cpu"):
    """The grid's cells by (model, mode, batch size, replicate)."""
    grid = parse_grid({**GRID, "devices": [device]})
    return {(c.model, c.compile_mode, c.batch_size, c.settings.replicate): c for c in grid.cells}


def record(cell, environment, phases, runs=None, warmup=None, status="ok", **compiled):
    """The record a kernel writes for ``cell``, measured with ``runs`` and ``warmup`` (default: the cell's)."""
    settings = replace(cell.settings, runs=runs or cell.settings.runs,
                       warmup=cell.settings.warmup if warmup is None else warmup)
    fields, config = cell.identity().cell_block(), measurement_settings(settings)
    if status != "ok":
        return failure_record(fields, status=status, error="!", config=config, environment=environment, phases=phases)
    return make_record(fields, measurement=Measurement([1.0, 2.0, 3.0], 5.0), config=config, environment=environment,
                       compile=compiled or None, extra={"phases": phases})


def prices(tmp_path, *records, environment=CPU, gpu=None):
    path = tmp_path / "results.jsonl"
    for one in records:
        append_record(path, one)
    return Prices([path, tmp_path / "missing.jsonl"], environment, gpu)


def ends(span):
    return span.low, span.point, span.high


# --- 1. a cell's own record -------------------------------------------------------------------------------------------

def test_a_recorded_cell_costs_its_records_seconds_its_timed_part_scaled_to_its_calls(tmp_path):
    cell = cells()[("resnet", "default", 4, "r1")]  # 30 runs and 10 warm-up calls: 40
    measured = record(cell, CPU, {"cell_s": 10.0, "timed_s": 4.0, "warmup_s": 2.0, "compile_wait_s": 1.5},
                      runs=3, warmup=1)  # 4 calls: ten times fewer; a wait for a compile process is not its cost
    assert prices(tmp_path, measured).recorded(cell, False, False) == pytest.approx(10.0 - 1.5 - 6.0 + 60.0)
    start, spans, recorded = prices(tmp_path).kernel([cell], set(), lambda cell: False)
    assert spans == [Span.exact(62.5)] and recorded == 1 and start is None  # no kernel's first record


def test_the_most_recent_ok_record_of_this_environment_prices_the_cell(tmp_path):
    grid = cells()
    cell = grid[("resnet", "default", 4, "r1")]
    found = prices(tmp_path, record(cell, CPU, {"cell_s": 5.0}), record(cell, CPU, {"cell_s": 9.0}),
                   record(cell, {**CPU, "torch_version": "9.9.9"}, {"cell_s": 1.0}),  # another environment
                   record(cell, {**CPU, "cpu_count_logical": 64}, {"cell_s": 2.0}),
                   record(cell, CPU, {"cell_s": 3.0}, status="error"),  # its time to failure says nothing
                   record(grid[("resnet", "default", 4, "r2")], CPU, {"cell_s": 7.0}),  # another replicate
                   record(cell, CPU, {"startup_s": 20.0}))  # no cell_s
    assert found.recorded(cell, False, False) == 9.0
    assert found.cell(cell) is None  # no prior on a CPU: nothing else prices it
    assert found.recorded(grid[("vit", "default", 4, "r1")], False, False) is None


def test_an_eager_cell_is_priced_as_it_will_be_measured(tmp_path):
    eager = cells()[("resnet", "eager", 1, "r1")]
    shared = record(eager, CPU, {"cell_s": 0.5})
    shared["shared_measurement"] = {"with_compile_mode": "default"}
    alone = record(eager, CPU, {"cell_s": 9.0, "timed_s": 6.0, "warmup_s": 2.0})
    assert prices(tmp_path, shared).recorded(eager, False, True) == 0.5
    assert prices(tmp_path).recorded(eager, False, False) is None  # its runs were timed in a compiled cell
    assert prices(tmp_path, alone).recorded(eager, False, True) == pytest.approx(1.0)  # no timed runs now
    assert prices(tmp_path).recorded(eager, False, False) == pytest.approx(9.0)


def test_a_record_prices_only_a_cell_that_compiles_as_it_did(tmp_path):
    cell = cells()[("resnet", "default", 4, "r2")]
    kept = record(cell, CPU, {"cell_s": 6.0}, cold_ms=9000.0, cold_measured_in="replicate r1")
    found = prices(tmp_path, kept)
    assert found.recorded(cell, True, False) == 6.0  # warm from the first replicate's kept cold compile, again
    assert found.recorded(cell, False, False) is None  # a fresh machine's: it compiles cold now
    _, spans, _ = found.kernel([cell], set(), lambda cell: True)
    assert spans == [Span.exact(6.0)]


# --- 2. on a GPU: its records, else the prior calibrated by them ----------------------------------------------------

def test_on_a_gpu_any_record_of_its_key_counts_with_todays_energy_windows(tmp_path):
    grid = cells("cuda")
    cell = grid[("vit", "default", 4, "r1")]
    other_host = {**H100, "driver_version": "999.9", "torch_version": "2.99"}
    a100 = {**H100, "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]}
    found = prices(tmp_path, record(cell, other_host, {"cell_s": 30.0, "energy_s": 10.8}),
                   record(cell, a100, {"cell_s": 99.0}), environment=H100, gpu="H100 SXM")
    assert [r.environment.gpu_name("cuda:0") for r in found.on_device("cuda")] == ["NVIDIA H100 80GB HBM3"]
    # the first H200 records spent 10.8 s in 5-second windows: the cell takes today's, both sides' (2.3 s)
    assert found.recorded(cell, False, False) == pytest.approx(30.0 - 10.8 + 2 * 1.15)


def test_a_model_with_records_prices_its_other_cells_by_its_ratio_and_a_model_without_by_all(tmp_path):
    grid, prior = cells("cuda"), Prior("H100 SXM")
    measured = [grid[("vit", "default", 1, "r1")], grid[("vit", "default", 4, "r1")]]
    records = []
    for cell, ratio in zip(measured, (2.0, 4.0)):  # twice and four times the prior's work
        shape = Shape.of_cell(cell, warm=False)  # as its record says: no warm compile
        work = (prior.cell(shape) - prior.energy(shape)).point
        records.append(record(cell, H100, {"cell_s": ratio * work + 10.8 + 12.0, "energy_s": 10.8,
                                           "compile_wait_s": 12.0}))
    found = prices(tmp_path, *records, environment=H100, gpu="H100 SXM")
    assert [Shape.of_record(r) for r in read_records(tmp_path / "results.jsonl")] == [
        Shape.of_cell(cell, warm=False) for cell in measured]
    assert found.ratios == {"vit": [pytest.approx(2.0), pytest.approx(4.0)]} and found.calibrated_on == 2
    for model in ("vit", "resnet"):  # vit by its own two cells, resnet by all the device's: the same two here
        cell = grid[(model, "default", 4, "r2")]
        shape = Shape.of_cell(cell)
        work, energy = prior.cell(shape) - prior.energy(shape), prior.energy(shape)
        # the median 3, the range the ratios' (2 to 4: wider than +-25 %), the energy windows as they are
        assert ends(found.cell(cell)) == pytest.approx(ends(Span(2, 3, 4) * work.point + energy))
    # one ratio: its own, +-25 % around it
    one = prices(tmp_path / "one", records[0], environment=H100, gpu="H100 SXM")
    shape = Shape.of_cell(grid[("vit", "default", 4, "r2")])
    work, energy = prior.cell(shape) - prior.energy(shape), prior.energy(shape)
    assert ends(one.cell(grid[("vit", "default", 4, "r2")])) == pytest.approx(
        ends(Span(1.6, 2.0, 2.5) * work.point + energy))


def test_without_records_a_gpu_cell_costs_the_prior_and_a_cpu_cell_nothing(tmp_path):
    cell = cells("cuda")[("resnet", "default", 4, "r1")]
    found = prices(tmp_path, environment=H100, gpu="H100 SXM")
    assert ends(found.cell(cell)) == pytest.approx(ends(Prior("H100 SXM").cell(Shape.of_cell(cell))))
    assert 0 < found.cell(cell).low < found.cell(cell).point < found.cell(cell).high
    assert prices(tmp_path).cell(cells()[("resnet", "default", 4, "r1")]) is None
    assert calibrated(Span(1.0, 2.0, 3.0), []) == Span(1.0, 2.0, 3.0)
    assert ends(calibrated(Span(1.0, 2.0, 3.0), [1.5])) == pytest.approx((2.4, 3.0, 3.75))  # the point's ratio


def test_a_later_replicate_costs_less_than_its_first_and_compiles_warm_only_where_its_cold_compile_was_kept(tmp_path):
    grid, found = cells("cuda"), prices(tmp_path, environment=H100, gpu="H100 SXM")

    def kernel(replicate, kept):
        group = [c for key, c in grid.items() if key[0] == "resnet" and key[3] == replicate]
        sharing = {c for c in group if c.compile_mode == "eager"}
        return dict(zip(((c.compile_mode, c.batch_size) for c in group),
                        found.kernel(group, sharing, lambda cell: kept)[1]))

    first, later, later_cold = kernel("r1", False), kernel("r2", True), kernel("r2", False)
    cold = Prior("H100 SXM").cold_compile("resnet", "default").point
    for batch in (1, 4):
        assert later[("default", batch)].point < later_cold[("default", batch)].point < first[("default", batch)].point
    # kept: a warm compile (0.2 of a cold one) in place of the cold one, and at batch 1, the first of its mode in the
    # kernel, in place of the cold and the warm one
    assert later_cold[("default", 4)].point - later[("default", 4)].point == pytest.approx(0.8 * cold)
    assert later_cold[("default", 1)].point - later[("default", 1)].point == pytest.approx(cold, rel=1e-3)


def test_a_kernel_start_is_its_models_recorded_starts_else_the_prior_scaled_by_the_recorded_ones(tmp_path):
    grid = cells("cuda")
    vit, resnet = grid[("vit", "default", 1, "r1")], grid[("resnet", "default", 1, "r1")]
    prior = Prior("H100 SXM")
    starts = [record(vit, H100, {"startup_s": s, "ready_s": 1.0, "load_s": 2.0, "cell_s": 1.0}) for s in (5.0, 6.0)]
    ahead = record(vit, H100, {"startup_s": 0.3, "started_ahead_s": 40.0, "load_s": 0.1, "cell_s": 1.0})
    found = prices(tmp_path, *starts, ahead, environment=H100, gpu="H100 SXM")
    assert found.start(vit) == Span(8.0, 8.5, 9.0)  # boot, the device's preparation and the build; not started ahead
    ratios = [8.0 / prior.start("vit").point, 9.0 / prior.start("vit").point]
    assert ends(found.start(resnet)) == pytest.approx(ends(calibrated(prior.start("resnet"), ratios)))
    assert prices(tmp_path / "cpu").start(cells()[("vit", "default", 1, "r1")]) is None  # a CPU: no prior
