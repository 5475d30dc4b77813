"""benchmarks/lease_replay.py (and lease_prices.py, its prices) on synthetic H200 records, logs and a small replicated
grid, with answers computed by hand; then on the committed records (the last line's format only)."""

from dataclasses import replace
import json
import re
import subprocess
import sys

import pytest

from bench_records import ROOT, benchmark
from bench_utils.measurement.timing import Measurement
from bench_utils.records.build import make_record
from bench_utils.study.grid.grid_file import load_grid

lease_replay = benchmark("lease_replay")
lease_prices = sys.modules["lease_prices"]   # imported by lease_replay, its sibling

H200_ENV = {"torch_version": "2.11.0", "cpu_model": "Test CPU", "gpus": [{"index": 0, "name": "NVIDIA H200"}]}
H100_ENV = {"torch_version": "2.11.0", "cpu_model": "Test CPU", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}
# 3 models at batch 1 and 4, eager and default, 300 runs over 3 replicates (100 each): 6 compiled first replicates.
GRID = """study: t
runs: 300
warmup: 10
devices: [cuda]
replicates: 3
grids:
  - models: [resnet, vit, beit]
    batch_sizes: [1, 4]
    compile_modes: [eager, default]
"""
FIXED_WINDOWS = {side: {"window_min_s": 5.0, "duration_s": 5.1} for side in ("eager", "compiled")}  # before sizing


def h200(model, batch, phases, *, mode="default", warm_s=None, config=None, energy=None, environment=H200_ENV):
    """A record of the study ``t`` as a lease writes it: 300 runs, ``phases`` in seconds, a warm compile where given."""
    cell = dict(study="t", task="image-classification", model=model, batch_size=batch, compile_mode=mode,
                dtype="float32", device="cuda")
    compiled = None if mode == "eager" else (
        {"warm_ms": warm_s * 1000, "warm_calls_ms": [warm_s * 1000]} if warm_s else {"warm_ms": None})
    extra = {"phases": phases, **({"energy": energy} if energy else {})}
    return make_record(cell, measurement=Measurement(times_ms=[10.0, 10.0, 10.0], first_call_ms=1.0),
                       compile=compiled, config={"runs": 300, "warmup": 10, **(config or {})},
                       environment=environment, extra=extra)


def records():
    """resnet bs1 and vit bs1 first in their kernels (their remainders 7 and 5 s: a first cell's extra is the median
    6 less the others' 1 = 5 s), resnet bs4 later in its kernel with the old fixed energy windows (10 s, priced at
    the sized median, 2 s); beit measured only beside compile processes, started ahead or on an H100: priced from
    the median cell. Compile: cold 10 + warm 2, cold 8, cold 12 + warm 3; timed runs 6, 6 and 3 s for 300 runs."""
    return [
        h200("resnet", 1, {"startup_s": 5.0, "load_s": 3.0, "cell_s": 30.0, "compile_s": 12.0, "warmup_s": 1.0,
                           "timed_s": 6.0, "parity_s": 1.0, "memory_s": 0.0, "flops_s": 0.0, "energy_s": 2.0,
                           "profile_s": 1.0}, warm_s=2.0),
        h200("resnet", 1, {"startup_s": 0.0, "load_s": 0.0, "cell_s": 0.0}, mode="eager"),
        h200("resnet", 4, {"startup_s": 0.0, "load_s": 0.0, "cell_s": 28.0, "compile_s": 8.0, "warmup_s": 1.0,
                           "timed_s": 6.0, "parity_s": 1.0, "energy_s": 10.0, "profile_s": 1.0}, energy=FIXED_WINDOWS),
        h200("vit", 1, {"startup_s": 6.0, "load_s": 4.0, "cell_s": 28.0, "compile_s": 15.0, "warmup_s": 1.0,
                        "timed_s": 3.0, "parity_s": 1.0, "energy_s": 2.0, "profile_s": 1.0}, warm_s=3.0),
        # not alone: each would change the prices (and the counts) if it were taken
        h200("resnet", 4, {"cell_s": 400.0, "compile_s": 390.0, "compile_wait_s": 5.0}),
        h200("vit", 4, {"cell_s": 400.0, "compile_s": 390.0}, config={"beside_compiles": "paused"}),
        h200("beit", 1, {"startup_s": 0.3, "started_ahead_s": 40.0, "gate_wait_s": 10.0, "load_s": 0.1,
                         "cell_s": 400.0, "compile_s": 390.0}, warm_s=3.0),
        h200("beit", 4, {"cell_s": 400.0, "compile_s": 390.0}, environment=H100_ENV),
    ]


RUN_LOG = """[run] study t: 12 cells from grid.yaml; results in <study>/results.jsonl
[1/12] measuring resnet bs1 default float32 on cuda:0
[1/12] image-classification__resnet__bs1__default__float32__cuda: ok (50 s); ETA 5.0 min
[2/12] image-classification__resnet__bs4__default__float32__cuda: ok (28 s); ETA 4.0 min
[5/12] image-classification__vit__bs1__default__float32__cuda: ok (48 s); ETA 3.0 min
"""
# A run that compiled ahead: its walls are not a kernel's alone (sorted first, it would be read first).
AHEAD_LOG = """[run] study t: 12 cells from grid.yaml; results in <study>/results.jsonl
[run] compile ahead: the compile processes pause through the kernel's timed windows
[1/12] image-classification__resnet__bs1__default__float32__cuda: ok (99 s); ETA 5.0 min
"""


@pytest.fixture
def study(tmp_path):
    """A study folder with the records and two leases' logs, and the grid."""
    folder = tmp_path / "t-h200"
    (folder / "lease-0").mkdir(parents=True)
    (folder / "lease-1").mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records()))
    (folder / "lease-0" / "guide.log").write_text(AHEAD_LOG)
    (folder / "lease-1" / "run.log").write_text(RUN_LOG)
    (tmp_path / "grid.yaml").write_text(GRID)
    return folder


def prices_of(study):
    from bench_utils.records.results_file import read_records

    results = study / "results.jsonl"
    grid = load_grid(study.parent / "grid.yaml")
    return grid.cells, lease_prices.build_prices(grid.cells, read_records(results),
                                                 lease_prices.run_logs_beside([results]), {}, "H200")


# --- the figures --------------------------------------------------------------------------------------------------

def test_only_records_measured_alone_on_the_gpu_count(study):
    _, prices = prices_of(study)
    assert prices.alone == 4                          # 3 compiled and 1 eager
    assert prices.left_out == {"compile_wait_s": 1, "beside_compiles": 1, "started_ahead_s": 1}
    assert prices.sources == {"beit": "priced from the median per-cell figure"}   # the H100 record is not taken


def test_the_unrecorded_kernel_cost_comes_from_the_logs_first_cells(study):
    _, prices = prices_of(study)
    # resnet 50 - (5 + 3 + 30), vit 48 - (6 + 4 + 28); resnet bs4 is no kernel's first; the compile-ahead log unread
    assert sorted((s.model, s.unrecorded_s) for s in prices.samples) == [("resnet", 12.0), ("vit", 10.0)]
    assert prices.first_cell_s == pytest.approx(5.0)
    assert prices.kernels["resnet"].start_s == pytest.approx(8.0) and prices.kernels["resnet"].unrecorded_s == 12.0
    # beit: the median kernel, start median(8, 10), unrecorded median(12, 10)
    assert (prices.kernels["beit"].start_s, prices.kernels["beit"].unrecorded_s) == (9.0, 11.0)


def test_a_new_cell_and_a_later_replicate_are_priced_by_part(study):
    cells, prices = prices_of(study)
    knobs = lease_replay.Knobs(FROZEN_REST_CUT_S=0.0, FROZEN_WARMUP_CUT_S=0.0)  # the records' parts as they are
    cell = {(c.model, c.compile_mode, c.batch_size, c.replicate.number): c for c in cells}
    resnet4 = lease_replay.new_cell_parts(prices, cell["resnet", "default", 4, 1], False, knobs)
    # fixed windows: the sized median (2 s); timed runs 6 s / 300 runs x 100; no warm compile at a mode's 2nd batch
    assert resnet4 == pytest.approx({"cold": 8.0, "warm": 0.0, "warmup": 1.0, "timed": 2.0, "parity": 1.0,
                                     "memory": 0.0, "flops": 0.0, "energy": 2.0, "profile": 1.0, "rest": 1.0})
    later = lease_replay.later_cell_parts(prices, cell["resnet", "default", 4, 2], knobs)
    # lean: the model's warm compile (2 s at batch 1), no energy window, profile, memory or FLOPs
    assert sum(later.values()) == pytest.approx(2.0 + 1.0 + 2.0 + 1.0 + 1.0)
    first = lease_replay.new_cell_parts(prices, cell["resnet", "default", 1, 1], True, knobs)
    assert (first["cold"], first["warm"], first["rest"]) == pytest.approx((10.0, 2.0, 2.0))  # 7 less the first's 5
    ahead = lease_replay.new_cell_parts(prices, cell["resnet", "default", 4, 1], False, knobs, precompiled=True)
    assert (ahead["cold"], ahead["warm"]) == (0.0, 2.0)              # compiled before: warm at every batch size


def test_the_frozen_heap_comes_off_each_compiled_cells_rest_and_warm_up_and_costs_each_kernel_its_freeze(study):
    cells, prices = prices_of(study)
    cell = {(c.model, c.compile_mode, c.batch_size, c.replicate.number): c for c in cells}
    knobs = lease_replay.Knobs(FROZEN_REST_CUT_S=0.4, FROZEN_WARMUP_CUT_S=1.5, FREEZE_S=0.3)
    for parts in (lease_replay.new_cell_parts(prices, cell["resnet", "default", 4, 1], False, knobs),
                  lease_replay.later_cell_parts(prices, cell["resnet", "default", 4, 2], knobs)):
        assert (parts["rest"], parts["warmup"]) == pytest.approx((0.6, 0.0))  # 1.0 s each recorded: none below 0
    for later in (False, True):
        thawed = lease_replay.kernel_own(prices, "resnet", replace(knobs, FREEZE_S=0.0), later=later)
        assert lease_replay.kernel_own(prices, "resnet", knobs, later=later) == pytest.approx({**thawed, "freeze": 0.3})


def test_records_whose_kernel_froze_its_heap_take_no_cut_and_their_kernel_no_second_freeze(study, tmp_path):
    from bench_utils.records.results_file import read_records

    frozen = h200("resnet", 1, {"startup_s": 5.0, "ready_s": 2.0, "freeze_s": 0.5, "load_s": 3.0, "cell_s": 30.0,
                                "warmup_s": 1.0, "timed_s": 6.0}, config={"heap_frozen": True})
    (tmp_path / "frozen.jsonl").write_text(json.dumps(frozen) + "\n")
    (record,) = read_records([tmp_path / "frozen.jsonl"])
    assert lease_prices.Parts.of_record(record).heap_frozen == 1.0 and lease_prices.kernel_start_s(record) == 10.5
    cells, prices = prices_of(study)
    cell = {(c.model, c.compile_mode, c.batch_size, c.replicate.number): c for c in cells}
    knobs = lease_replay.Knobs(FROZEN_REST_CUT_S=0.4, FROZEN_WARMUP_CUT_S=0.5, FREEZE_S=0.3)
    prices.parts["resnet", "default", 4] = replace(prices.parts["resnet", "default", 4], heap_frozen=0.5)
    parts = lease_replay.later_cell_parts(prices, cell["resnet", "default", 4, 2], knobs)
    assert (parts["rest"], parts["warmup"]) == pytest.approx((0.8, 0.75))  # half its records froze: half the cut
    prices.kernels["resnet"] = replace(prices.kernels["resnet"], frozen_share=1.0)
    assert lease_replay.kernel_own(prices, "resnet", knobs)["freeze"] == 0.0  # in its recorded start already
    prices.kernels["resnet"] = replace(prices.kernels["resnet"], frozen_share=0.5)
    assert lease_replay.kernel_own(prices, "resnet", knobs)["freeze"] == pytest.approx(0.15)


def test_a_missing_batch_size_takes_the_nearest_with_timed_runs_interpolated():
    parts = {b: lease_prices.Parts(cold_s=10.0, warm_s=None, warmup_s=1.0, timed_per_run_s=t, parity_s=0.0,
                                   memory_s=0.0, flops_s=0.0, energy_s=2.0, profile_s=0.0, rest_s=0.0)
             for b, t in ((1, 0.01), (4, 0.04))}
    at16, note = lease_prices.nearest_parts(parts, 16)
    assert at16.timed_per_run_s == pytest.approx(0.16) and "batch 4" in note
    alone, note = lease_prices.nearest_parts({1: parts[1]}, 16)
    assert alone.timed_per_run_s == 0.01 and note == "its batch 1"


# --- the replay ---------------------------------------------------------------------------------------------------

def run(model, own, *cells):
    return lease_replay.KernelRun(model, model, {"start": own}, [(True, {"timed": seconds}) for seconds in cells])


def test_the_replay_fits_a_prefix_of_each_kernel_and_passes_over_one_that_does_not_fit():
    kernels = [run("a", 10.0, 5.0, 5.0), run("b", 10.0, 50.0), run("c", 10.0, 3.0, 3.0)]
    done = lease_replay.replay(kernels, 40.0)         # a: 20; b: 60 > 20 left, passed over; c: 16
    assert (done.count, done.end_s, done.per_kernel) == (4, 36.0, {"a": 2, "c": 2})
    done = lease_replay.replay(kernels, 33.0)         # c: its first cell only (13 of the 13 left)
    assert (done.count, done.per_kernel) == (3, {"a": 2, "c": 1})
    assert lease_replay.replay(kernels, 9.0).count == 0


def test_compiling_ahead_takes_the_longest_of_k_processes(study):
    cells, prices = prices_of(study)
    firsts = {(c.model, c.batch_size): c for c in cells if c.replicate.number == 1 and c.compile_mode != "eager"}
    ahead = [firsts["resnet", 1], firsts["resnet", 4], firsts["vit", 1], firsts["beit", 1]]
    # each process: 20 s and the model's build, then its cold compiles x2: resnet 20 + 3 + 36 = 59,
    # vit 20 + 4 + 24 = 48, beit 20 + 3.5 (the median build) + 22 = 45.5
    knobs = lease_replay.Knobs(PRECOMPILE_K=2, PRECOMPILE_FACTOR=2.0, PROCESS_SETUP_S=20.0)
    assert lease_replay.precompile_s(prices, ahead, knobs) == pytest.approx(48.0 + 45.5)
    assert lease_replay.precompile_s(prices, ahead, lease_replay.Knobs(PRECOMPILE_K=3)) == pytest.approx(59.0)


def test_the_variant_is_recommended_where_it_gains_at_the_high_end_too(study):
    cells, prices = prices_of(study)
    cheap = lease_replay.Knobs(COMMAND_S=150.0, KERNEL_GAP_S=1.0, PRECOMPILE_FACTOR=0.1, PRECOMPILE_FACTOR_HIGH=0.1,
                               PROCESS_SETUP_S=0.0)
    outcome = lease_replay.run_replay(cells, prices, cheap)
    # serially: resnet 26 + 21 + 16, vit 26 + 21 + 18: 128 s, beit's first 47 s > 22 s left: 4.  Ahead, the first 5
    # cells in 6.4 s (vit's process the longest: 4 + 24 x 0.1), then resnet 47, vit 44, beit 52 s (bs4 still cold):
    # 6 by 149.4 s
    assert (outcome.n_serial.count, outcome.precompiled.count, outcome.precompiled.prefix) == (4, 6, 5)
    assert outcome.recommend_precompile and outcome.n == 6
    dear = lease_replay.run_replay(cells, prices, lease_replay.Knobs(COMMAND_S=150.0, KERNEL_GAP_S=1.0))
    assert not dear.recommend_precompile and dear.n == 4


def test_n_and_m_by_hand(study, capsys):
    """Kernels 26 s each (start + unrecorded + the first cell's 5 s + a 1-s gap). New cells: resnet 21 and 16, vit 21
    and 18, beit (the median cell) 21 and 16: resnet's kernel 63 s, vit's 65 s, then 2 s left: N = 4. Later
    replicates, lean: resnet 8 and 7, vit 6 and 6, beit 7 and 7.5; in the staggered order resnet r2 (41 s), vit r2
    (38), resnet r3 (41): 120 s, then 10 s left, too few for any kernel: M = 6."""
    assert lease_replay.main(["--grid", str(study.parent / "grid.yaml"), "--results", str(study / "results.jsonl"),
                              "--set", "COMMAND_S=130", "--set", "KERNEL_GAP_S=1", "--set", "EXITED_S=0.14"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "lease replay: 4 new cells, 6 later replicates per 130-s command"
    assert "beit" in next(line for line in lines if line.strip().startswith("beit ")) and \
        "priced from the median per-cell figure" in next(line for line in lines if line.strip().startswith("beit "))
    assert any(line.startswith("  the last line's N: the serial plan") for line in lines)
    assert lines[-2].startswith("assumed (no lease measured it; the next lease does): M rests on")


def test_a_kernels_exit_is_cut_alike_with_a_pool_or_none(study):
    cells, prices = prices_of(study)
    knobs = lease_replay.Knobs(KERNEL_GAP_S=3.75, EXITED_S=2.8, KILLED_EXIT_S=0.2)
    assert lease_replay.exit_cut_s(knobs) == pytest.approx(2.6)
    for later in (False, True):  # a later replicate's kernel starts no pool: its exit is killed all the same
        assert lease_replay.kernel_own(prices, "resnet", knobs, later=later)["gap"] == pytest.approx(1.15)
    assert lease_replay.kernel_own(prices, "resnet", replace(knobs, EXITED_S=0.1))["gap"] == 3.75  # no cut below 0


def test_a_knob_is_set_by_name():
    knobs = lease_replay.parse_knob("ENERGY_FULL_S=none", lease_replay.parse_knob("PRECOMPILE_K=3", lease_replay.KNOBS))
    assert (knobs.PRECOMPILE_K, knobs.ENERGY_FULL_S) == (3, None)
    assert lease_replay.parse_knob("LEAN_PROFILE=true", knobs).LEAN_PROFILE is True
    with pytest.raises(SystemExit):
        lease_replay.parse_knob("NO_SUCH_KNOB=1", knobs)


def test_a_tail_without_its_first_lines_is_read_for_its_slowest_cells(tmp_path):
    tail = tmp_path / "tail.txt"
    tail.write_text("[17/59] image-segmentation__segformer__bs4__default__float32__cuda: ok (20 s); ETA 17.3 min\n"
                    "slowest: image-classification__beit__bs1__default__float32__cuda (63 s), "
                    "image-segmentation__segformer__bs4__default__float32__cuda (20 s)\n")
    log = lease_prices.read_run_log(tail)
    assert log.study is None and not log.compiled_ahead
    assert log.walls == {"image-segmentation__segformer__bs4__default__float32__cuda": 20,
                         "image-classification__beit__bs1__default__float32__cuda": 63}


# --- the committed records ------------------------------------------------------------------------------------------

def test_the_committed_leases_replay_without_torch():
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import lease_replay; lease_replay.main([]); "
            "print('torch imported' if 'torch' in sys.modules else 'no torch')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    *_, last, torch_line = done.stdout.splitlines()
    match = re.fullmatch(r"lease replay: (\d+) new cells, (\d+) later replicates per 570-s command", last)
    assert match and int(match.group(1)) > 0 and int(match.group(2)) > 0
    assert torch_line == "no torch"
