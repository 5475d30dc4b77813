import io
import threading

import pytest

from bench_utils.study.runner.device_lock import device_lock, lock_name, split_cpus


def test_cpus_are_split_into_disjoint_sets_covering_all():
    parts = split_cpus({0, 1, 2, 3, 4, 5, 6}, 3)
    assert parts == [{0, 1, 2}, {3, 4}, {5, 6}]
    assert split_cpus([3, 1], 1) == [{1, 3}]
    with pytest.raises(ValueError, match="3 workers need at least as many CPUs"):
        split_cpus({0, 1}, 3)


def test_a_gpu_lock_is_named_by_the_physical_device():
    assert lock_name("cpu") == "cpu.lock"
    assert lock_name("cuda:0", None) == "cuda-0.lock"
    assert lock_name("cuda:0", "3,1") == lock_name("cuda:1", "1,3") == "cuda-3.lock"
    assert lock_name("cuda", "GPU-ab/cd") == "cuda-GPU-ab_cd.lock"


def test_a_second_holder_waits_says_so_and_can_give_up():
    said = []
    with device_lock("cpu") as first:
        assert first
        with device_lock("cpu", say=said.append, cancelled=lambda: bool(said), poll_s=0.01) as second:
            assert second is False
    assert len(said) == 1 and said[0].startswith("waiting for cpu: another measurement (pid ")
    with device_lock("cpu") as again:  # released on exit
        assert again


def test_the_runner_measures_only_once_the_device_is_free(tmp_path):
    from test_grid_runner import GRID, FakeNotebook

    from bench_utils.study.grid.grid_file import parse_grid
    from bench_utils.study.runner.grid_runner import Runner

    waiting = threading.Event()

    class Stream(io.StringIO):
        def write(self, text):
            if "waiting for cpu" in text:
                waiting.set()
            return super().write(text)

    notebook = FakeNotebook()
    runner = Runner(parse_grid(GRID), tmp_path, executor=notebook, stream=Stream())
    with device_lock("cpu"):  # another study is measuring on this CPU
        thread = threading.Thread(target=runner.run)
        thread.start()
        assert waiting.wait(timeout=60)
        assert notebook.calls == []
    thread.join(timeout=120)
    assert len(notebook.calls) == 7
