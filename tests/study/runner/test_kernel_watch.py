import time

from bench_utils.records.build import make_record
from bench_utils.measurement.timing import Measurement
from bench_utils.records.results_file import append_record
from bench_utils.study.runner import kernel_watch as watch_module
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.progress_file import read_progress, write_progress
from bench_utils.study.runner.kernel_watch import CELL_DIED, DONE, START_FAILED, STOPPED, TIMED_OUT, KernelWatch

GRID = {"study": "w", "runs": 2, "warmup": 1, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager"]}]}


def cells():
    return parse_grid(GRID).cells


def record_of(cell):
    return make_record(cell.identity().cell_block(), measurement=Measurement([1.0, 2.0], 3.0))


def new_watch(tmp_path, timeout=60.0, stop=lambda: False):
    seen = []
    watch = KernelWatch(tmp_path / "results.jsonl", tmp_path / "k.progress", cells(), 0, timeout, stop,
                        lambda cell, record, seconds: seen.append((cell.batch_size, seconds)))
    return watch, seen


def test_records_are_taken_in_order_with_the_time_since_the_last(tmp_path):
    watch, seen = new_watch(tmp_path)
    one, four = cells()
    append_record(tmp_path / "results.jsonl", record_of(four))  # another order is fine too
    watch.poll()
    assert [batch for batch, _ in seen] == [4] and watch.remaining == [one]
    append_record(tmp_path / "results.jsonl", record_of(one))
    watch.read_new_records()
    assert [batch for batch, _ in seen] == [4, 1] and watch.ending(0) == (DONE, None)


def test_a_dead_kernel_is_charged_to_the_cell_it_said_it_began(tmp_path):
    watch, _ = new_watch(tmp_path)
    assert watch.ending(139) == (START_FAILED, None)  # it began no cell
    one, four = cells()
    write_progress(tmp_path / "k.progress", "eager", 1)
    append_record(tmp_path / "results.jsonl", record_of(one))
    watch.read_new_records()
    assert watch.ending(139) == (START_FAILED, None)  # between cells: batch 1 is recorded
    write_progress(tmp_path / "k.progress", "eager", 4)
    assert watch.ending(139) == (CELL_DIED, four)


def test_the_oom_killer_counts_only_since_the_last_record(tmp_path, monkeypatch):
    counts = iter([3, 9, 9])
    monkeypatch.setattr(watch_module, "oom_kill_count", lambda: next(counts))
    watch, _ = new_watch(tmp_path)  # 3
    one, four = cells()
    append_record(tmp_path / "results.jsonl", record_of(one))
    watch.read_new_records()  # 9: the kill happened while batch 1 ran, which recorded anyway
    write_progress(tmp_path / "k.progress", "eager", 4)
    assert watch.ending(137) == (CELL_DIED, four)  # 9 again: not killed for memory


def test_a_stall_is_charged_to_the_stalled_cell_unless_it_recorded_after_all(tmp_path):
    watch, _ = new_watch(tmp_path, timeout=0.05)
    one, _ = cells()
    write_progress(tmp_path / "k.progress", "eager", 1)
    time.sleep(0.1)
    assert watch.poll() is True and watch.ending(-9) == (TIMED_OUT, one)
    late, _ = new_watch(tmp_path / "late", timeout=0.05) if (tmp_path / "late").mkdir() is None else None
    write_progress(tmp_path / "late" / "k.progress", "eager", 1)
    time.sleep(0.1)
    assert late.poll() is True
    append_record(tmp_path / "late" / "results.jsonl", record_of(one))  # just before the kill
    late.read_new_records()
    assert late.ending(-9) == (STOPPED, None)  # batch 4 was cut short by the stop: try it again


def test_a_stop_request_is_no_ones_fault(tmp_path):
    watch, _ = new_watch(tmp_path, stop=lambda: True)
    write_progress(tmp_path / "k.progress", "eager", 1)
    assert watch.poll() is True and watch.ending(-9) == (STOPPED, None)


def test_the_progress_file_says_the_cell_begun_or_nothing(tmp_path):
    path = tmp_path / "k.progress"
    assert read_progress(path) is None  # the kernel began no cell
    write_progress(path, "default", 4)
    assert read_progress(path) == ("default", 4) and not (tmp_path / "k.progress.partial").exists()
    path.write_text("{torn")
    assert read_progress(path) is None
