"""The compile processes' pipeline, simulated: known answers worked by hand, and the first pipelined lease replayed."""

import json

import pytest

from bench_utils.paths import REPORTS_DIR
from bench_utils.study.pricing.pipeline import AheadCell, KernelRun, simulate


def test_a_process_ahead_of_the_kernel_leaves_it_no_wait():
    # the process boots in 1 s and keeps each cell 2 s later; the kernel reaches them at 10, 15 and 20 s
    kernel = KernelRun(10.0, [5.0, 5.0, 5.0], {i: AheadCell(2.0, 30.0) for i in range(3)}, process_setup_s=1.0)
    waits = simulate([kernel], processes=1)
    assert waits.total_s == 25.0 and waits.wait_s == 0.0 and waits.compiled_by_kernel == []


def test_the_work_to_share_is_the_kernels_own_and_each_processs_even_share_of_theirs():
    # the kernel: starts of 1 and 2 s and cells of 3, 4 and 5: 15 s; the processes: a boot of 4 s for each kernel
    # with cells ahead (the second has none) and cold compiles of 6, 8 and 10 s: 28 s, 14 each over two
    kernels = [KernelRun(1.0, [3.0, 4.0], {0: AheadCell(6.0, 1.0), 1: AheadCell(8.0, 1.0)}, process_setup_s=4.0),
               KernelRun(2.0, [5.0], {}, process_setup_s=4.0),
               KernelRun(0.0, [0.0], {0: AheadCell(10.0, 1.0)}, process_setup_s=0.0)]
    waits = simulate(kernels, processes=2)
    assert waits.kernel_work_s == 15.0 and waits.process_work_s == 14.0
    assert waits.total_s == waits.kernel_work_s + waits.wait_s + sum(  # what the kernel adds: waits, own colds
        kernels[k].ahead[i].own_cold_s for k, i in waits.compiled_by_kernel)
    assert simulate(kernels, processes=0).process_work_s == 0.0  # none to share it


def test_a_slower_process_makes_the_kernel_wait_for_each_cell_in_turn():
    # claims at 0, 8, 16 (kept at 8, 16, 24); the kernel reaches cell 0 at 1 (claimed: waits 7), cell 1 at 9
    # (waits 7), cell 2 at 17 (waits 7), then ends at 25
    kernel = KernelRun(1.0, [1.0, 1.0, 1.0], {i: AheadCell(8.0, 30.0) for i in range(3)})
    waits = simulate([kernel], processes=1)
    assert waits.waits == {(0, 0): 7.0, (0, 1): 7.0, (0, 2): 7.0}
    assert waits.total_s == 25.0 and waits.wait_s == 21.0


def test_a_cell_no_process_has_claimed_is_compiled_cold_by_the_kernel_and_skipped_by_the_process():
    # the process boots for 5 s; the kernel reaches cell 0 at 1 s: compiles it cold itself (3 s), then 1 s of the
    # cell; the process then claims cell 1 at 5 s (kept at 7), which the kernel reaches at 5: waits 2
    kernel = KernelRun(1.0, [1.0, 1.0], {0: AheadCell(2.0, 3.0), 1: AheadCell(2.0, 3.0)}, process_setup_s=5.0)
    waits = simulate([kernel], processes=1)
    assert waits.compiled_by_kernel == [(0, 0)]
    assert waits.waits == {(0, 1): 2.0} and waits.total_s == 8.0


def test_a_rows_modes_are_claimed_together_at_its_first_cell():
    # default and reduce-overhead at one batch size: one row (``measured_row``), claimed at its first cell. The
    # process keeps default at 20 s, claims reduce-overhead at once and keeps it at 40; the kernel reaches the row
    # at 5 s: waits 15 s for the first mode, then 20 more for the second, before either cell's 10 s
    row = {0: AheadCell(20.0, 30.0, row=1), 1: AheadCell(20.0, 30.0, row=1)}
    waits = simulate([KernelRun(5.0, [10.0, 10.0, 10.0], row)], processes=1)
    assert waits.waits == {(0, 0): 15.0, (0, 1): 20.0} and waits.total_s == 70.0
    # apart (rows of one), the process had the first cell's 10 s to go on: 25 s of waits
    apart = {0: AheadCell(20.0, 30.0, row=1), 1: AheadCell(20.0, 30.0, row=4)}
    assert simulate([KernelRun(5.0, [10.0, 10.0, 10.0], apart)], processes=1).wait_s == 25.0
    # no process: the kernel claims the whole row and compiles both modes cold itself
    alone = simulate([KernelRun(5.0, [10.0, 10.0, 10.0], row)], processes=0)
    assert alone.compiled_by_kernel == [(0, 0), (0, 1)] and alone.total_s == 5 + 60 + 30


def test_no_process_leaves_every_cell_to_the_kernel():
    kernels = [KernelRun(1.0, [1.0], {0: AheadCell(2.0, 3.0)}), KernelRun(1.0, [1.0, 1.0], {1: AheadCell(2.0, 4.0)})]
    waits = simulate(kernels, processes=0)
    assert waits.compiled_by_kernel == [(0, 0), (1, 1)] and waits.total_s == 2 + 3 + 3 + 4 and waits.wait_s == 0


def test_processes_take_the_kernels_in_order_each_one_at_a_time():
    # two kernels of 10 s a cell; each process needs 12 s a cell: with one process the second kernel's cell waits
    # for the first's (kept at 12, then claims the second's: kept at 24); with two they compile side by side
    kernels = [KernelRun(0.0, [10.0], {0: AheadCell(12.0, 50.0)}), KernelRun(0.0, [10.0], {0: AheadCell(12.0, 50.0)})]
    one, two = simulate(kernels, processes=1), simulate(kernels, processes=2)
    assert one.waits == {(0, 0): 12.0, (1, 0): 2.0} and one.total_s == 34.0
    assert two.waits == {(0, 0): 12.0} and two.total_s == 32.0
    # a kernel without cells compiled ahead is no job: the processes go on to the next one
    kernels.insert(1, KernelRun(0.0, [30.0]))
    assert simulate(kernels, processes=1).waits == {(0, 0): 12.0}


# The first pipelined H200 lease's 12 records (ViT and BEiT, first replicate), in the kernels' order.
LEASE_RECORDS = ("43e210ac8df147cf9c6887a80aab18da", "eabd6436b2ac45cfb98d4626a03a9a95",
                 "ecb0b1eafdaf4e0597baed0de556af8d", "10ce1de53d144fb39a287627d1e59581",
                 "12db355763fd4c38a56a2640b4323278", "77efe999033145ca88798a5c7a9f9528",
                 "525e954a71734f0cbf369f4c26d68d77", "110b0862cf5d4f7a87b7e811b8599001",
                 "eb9e5d4a740949b5887d82bdd975d25b", "15011d4927c040a7b420a0f6a5243f6b",
                 "b7715202fa434ad1b8017114c5866e24", "758ea3d5b39e4332adaec48c6d628e18")


def _lease_runs():
    """The first pipelined H200 lease's ViT and BEiT kernels, from the study's records and its compile processes'
    log (their first lines of each cell: the lease's): each cell on the kernel's path (its record's ``cell_s`` less
    its wait), each cold compile as its process took it (claim to kept), and the waits the records measured."""
    study = REPORTS_DIR / "hf-guide-h200"
    records = {(r := json.loads(line))["record_id"]: r
               for line in (study / "results.jsonl").read_text().splitlines() if line.strip()}
    lease = [records[record_id] for record_id in LEASE_RECORDS]
    process_s: dict[tuple, float] = {}
    for line in map(json.loads, (study / "logs" / "compile-ahead.log").read_text().splitlines()):
        if line["status"] == "kept":
            process_s.setdefault((line["model"], line["mode"], line["batch_size"]), line["seconds"])
    runs, measured = [], {}
    for k, model in enumerate(("vit", "beit")):
        cells = [r for r in lease if r["cell"]["model"] == model]
        phases = cells[0]["phases"]
        ahead, path = {}, []
        for i, record in enumerate(cells):
            cell, wait = record["cell"], record["phases"]["compile_wait_s"]
            path.append(record["phases"]["cell_s"] - wait)
            key = (model, cell["compile_mode"], cell["batch_size"])
            if cell["compile_mode"] != "eager":
                # the kernel's own cold compile is in its cell_s already (ViT b1, which it claimed first)
                ahead[i] = AheadCell(process_s.get(key, 0.0), 0.0)
                if wait > 0.01:
                    measured[(k, i)] = wait
        runs.append(KernelRun(phases["startup_s"] + phases["load_s"], path, ahead))
    return runs, measured


def test_the_first_pipelined_lease_is_replayed_to_a_tenth_of_a_second():
    runs, measured = _lease_runs()
    assert sorted(measured) == [(0, 2), (0, 4), (1, 2), (1, 4)]  # ViT b4 and b16, BEiT b4 and b16
    # One unknown per process: its boot before its first claim (the log says no time). Each is fitted on its
    # first wait; the second wait of each model is then the simulation's: it holds where the records and the log
    # agree with a process going from one cell straight to the next while the kernel measures the cells between,
    # and with the kernel claiming ViT b1 (reached before its process booted) and BEiT's b1 kept in time.
    vit, beit = runs
    vit_setup = (vit.start_s + sum(vit.cells_s[:2]) + measured[(0, 2)]) - vit.ahead[2].cold_s
    beit_end = sum(run.start_s + sum(run.cells_s) for run in runs[:1]) + sum(measured[key] for key in [(0, 2), (0, 4)])
    beit_setup = (beit_end + beit.start_s + sum(beit.cells_s[:2]) + measured[(1, 2)]
                  - beit.ahead[0].cold_s - beit.ahead[2].cold_s)
    runs = [KernelRun(vit.start_s, vit.cells_s, vit.ahead, vit_setup),
            KernelRun(beit.start_s, beit.cells_s, beit.ahead, beit_setup)]
    waits = simulate(runs, processes=2)
    assert waits.compiled_by_kernel == [(0, 0)]  # as on the lease: the kernel claimed ViT b1 before the process
    assert waits.waits == pytest.approx(measured, abs=0.1)
