"""The GPU shared by a token between the measuring kernel and the compile processes (``measurement.gpu_token``)."""

import subprocess
import sys
import textwrap
import time

import psutil

from bench_utils.measurement import gpu_token
from bench_utils.measurement.gpu_token import COMPILING, MEASURING, GpuToken, holdings, overlaps
from bench_utils.measurement.paused_beside import PausedBeside

# another process: holds the token 8 times for 0.05 s, as a compile process holds it for its GPU phases
HOLDER = textwrap.dedent("""
    import sys, time
    from bench_utils.measurement import gpu_token
    gpu_token.use(sys.argv[1], gpu_token.COMPILING)
    for _ in range(8):
        with gpu_token.window("compiled code run"):
            time.sleep(0.05)
        time.sleep(0.01)
""")


def test_no_compile_phase_of_another_process_overlaps_a_measuring_window(tmp_path):
    path = tmp_path / gpu_token.TOKEN_FILE
    other = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)])
    try:
        gpu_token.use(path, MEASURING)
        deadline = time.monotonic() + 60
        while len(holdings(GpuToken(path, MEASURING).log_path)) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # the other process is holding it by now
        for _ in range(6):
            with gpu_token.window("timed runs"):
                with gpu_token.window("memory probe"):  # nested: the outer window's holding
                    time.sleep(0.04)
    finally:
        gpu_token.use(None, MEASURING)
        other.wait(timeout=60)
    entries = holdings(path.with_name(path.name + ".log"))
    roles = [entry["role"] for entry in entries]
    assert roles.count(COMPILING) == 8 and roles.count(MEASURING) == 6  # nested windows logged once
    assert overlaps(entries) == []
    # they did contend: someone waited for the other (the measuring side, at least once, or the compile side)
    assert sum(entry["waited_s"] for entry in entries) > 0.01
    assert min(e["start"] for e in entries if e["role"] == MEASURING) < max(e["end"] for e in entries
                                                                          if e["role"] == COMPILING)


def test_overlaps_name_each_compile_phase_inside_a_measuring_window():
    window = {"role": MEASURING, "what": "timed runs", "start": 10.0, "end": 20.0}
    inside = {"role": COMPILING, "what": "compiled code run", "start": 19.5, "end": 21.0}
    after = {"role": COMPILING, "what": "inductor benchmark", "start": 20.0, "end": 22.0}
    assert overlaps([window, inside, after]) == [(inside, window)]


def test_without_a_token_a_window_holds_nothing_and_waits_nothing(tmp_path):
    gpu_token.use(tmp_path / "used", MEASURING)
    gpu_token.use(None, MEASURING)  # a kernel without compile processes beside it: no token from now on
    with gpu_token.window("timed runs"):
        pass
    assert gpu_token.not_running_s(0.0, time.monotonic()) == 0.0 and not (tmp_path / "used").exists() and not (tmp_path / "used.log").exists()
    token = GpuToken(tmp_path / "t", COMPILING)
    with token.held("a"):
        pass
    assert [entry["what"] for entry in holdings(token.log_path)] == ["a"] and gpu_token.covered_s(token.waits, 0.0, time.monotonic()) < 0.5
    (tmp_path / "t.log").write_text('{"role": "compiling", "what": "b", "start": 1, "end": 2}\n{"role": "meas')
    assert len(holdings(token.log_path)) == 1  # a holder killed mid-write leaves half a line: left out


def test_a_pausing_kernel_stops_the_processes_beside_through_its_timed_windows_only(tmp_path):
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        path = tmp_path / gpu_token.TOKEN_FILE
        assert gpu_token.measure_beside_compiles(path, "cpu", pause=True) == "paused"
        PausedBeside(tmp_path / gpu_token.PAUSE_FOLDER).register(busy.pid)  # as the runner registers its processes
        seen = {}
        for what in ("timed runs", "energy window (eager)", "memory probe", "profile", "compiling call",
                     "inductor benchmark"):
            with gpu_token.window(what):
                seen[what] = _settled_status(busy.pid)
        assert {what for what, status in seen.items() if status == psutil.STATUS_STOPPED} == {
            "timed runs", "energy window (eager)", "memory probe", "profile"}  # not its own compiles
        assert psutil.Process(busy.pid).status() != psutil.STATUS_STOPPED
        assert gpu_token.measure_beside_compiles(path, "cpu") == "compiling"  # told not to pause: they compile on
        with gpu_token.window("timed runs"):
            assert _settled_status(busy.pid) != psutil.STATUS_STOPPED
        assert gpu_token.measure_beside_compiles(None, "cpu", pause=True) is None  # no processes beside: none
    finally:
        gpu_token.use(None, MEASURING)
        busy.kill()
        busy.wait()


def _settled_status(pid: int, wait_s: float = 1.0) -> str:
    """The process's status once a SIGSTOP sent to it had time to take effect (it does when the process next runs,
    which on a loaded host may take a while): stopped as soon as it is, else its status after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while (status := psutil.Process(pid).status()) != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.02)
    return status


class _Benchmarker:
    """torch's benchmarker as an older torch has it: GPU methods, the one calling the other through ``self``."""

    def __init__(self):
        self.calls = []

    def benchmark_gpu(self, fn):
        self.calls.append(("gpu", LOCK.held))
        return fn()

    def benchmark_gpu_with_cuda_graph(self, fn):
        self.calls.append(("graph", LOCK.held))
        return self.benchmark_gpu(fn)


class _Lock:
    held = 0

    def __call__(self):
        from contextlib import contextmanager

        @contextmanager
        def held():
            self.held += 1
            try:
                yield
            finally:
                self.held -= 1
        return held()


LOCK = _Lock()


def test_without_torchs_hook_the_benchmarkers_gpu_methods_run_under_the_lock_and_unwrap_when_it_goes():
    import types
    benchmarking = types.SimpleNamespace(benchmarker=_Benchmarker())  # torch 2.11: no set_gpu_benchmark_lock_context
    assert gpu_token.lock_inductor_benchmarks(benchmarking, LOCK) == "wrapped"
    assert benchmarking.benchmarker.benchmark_gpu(lambda: 7) == 7
    benchmarking.benchmarker.benchmark_gpu_with_cuda_graph(lambda: 8)
    assert benchmarking.benchmarker.calls == [("gpu", 1), ("graph", 1), ("gpu", 2)]  # nested: the lock nests
    assert gpu_token.lock_inductor_benchmarks(benchmarking, LOCK) == "wrapped"  # twice: wrapped once, not twice
    benchmarking.benchmarker.benchmark_gpu(lambda: 0)
    assert benchmarking.benchmarker.calls[-1] == ("gpu", 1)
    gpu_token.lock_inductor_benchmarks(benchmarking, None)
    benchmarking.benchmarker.benchmark_gpu(lambda: 0)
    assert benchmarking.benchmarker.calls[-1] == ("gpu", 0)
    assert gpu_token.lock_inductor_benchmarks(types.SimpleNamespace(), LOCK) == "none"


def test_with_torchs_hook_the_lock_is_given_to_it():
    import types
    given = []
    benchmarking = types.SimpleNamespace(set_gpu_benchmark_lock_context=given.append, benchmarker=_Benchmarker())
    assert gpu_token.lock_inductor_benchmarks(benchmarking, LOCK) == "hook"
    assert given == [LOCK] and "benchmark_gpu" not in vars(benchmarking.benchmarker)


def test_covered_seconds_count_overlapping_spans_once_and_only_inside_the_interval():
    assert gpu_token.covered_s([], 0, 10) == 0
    assert gpu_token.covered_s([(1, 3), (2, 5), (7, 8)], 0, 10) == 5  # 1..5 and 7..8
    assert gpu_token.covered_s([(-5, 2), (9, 20)], 0, 10) == 3         # clipped at both ends
    assert gpu_token.covered_s([(4, 6), (1, 2)], 3, 5) == 1            # unsorted; one outside


def test_a_compile_process_counts_its_pauses_and_token_waits_as_not_running_a_measuring_kernel_its_waits(tmp_path):
    path = tmp_path / gpu_token.TOKEN_FILE
    beside = PausedBeside(tmp_path / gpu_token.PAUSE_FOLDER)
    try:
        gpu_token.use(path, COMPILING)
        start = time.monotonic()
        with beside.paused():  # a measuring kernel's pause, as the compile process reads it from the log
            time.sleep(0.1)
        with gpu_token.window("compiling calls"):
            pass
        gpu_token._current.waits.append((start + 0.05, start + 0.15))  # a wait that overlaps the pause
        end = start + 0.3
        assert 0.14 <= gpu_token.not_running_s(start, end) <= 0.16  # the pause's ~0.1 s, the wait's 0.05 s more
        assert gpu_token.not_running_s(end, end + 1) == 0.0
        gpu_token.use(path, MEASURING)  # the measuring kernel: the pauses are its own, not time it was stopped
        assert gpu_token.not_running_s(start, end) == 0.0
    finally:
        gpu_token.use(None, MEASURING)
    assert gpu_token.not_running_s(0, 10) == 0.0
