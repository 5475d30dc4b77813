"""Processes beside a measurement, stopped through its timed windows (``measurement.paused_beside``)."""

import subprocess
import sys
import time

import psutil
import pytest

from bench_utils.measurement.paused_beside import MARKER, PausedBeside

# a compile process as the kernel sees one: busy, with a child of its own (Inductor's compile workers)
BUSY_WITH_CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
print(child.pid, flush=True)
while True:
    pass
"""


@pytest.fixture
def busy():
    process = subprocess.Popen([sys.executable, "-c", BUSY_WITH_CHILD], stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    yield process, child
    for pid in (child, process.pid):
        try:
            psutil.Process(pid).resume()
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    process.wait()


def _status(pid: int) -> str:
    deadline = time.monotonic() + 5
    while True:  # a signal is delivered soon, not at once
        status = psutil.Process(pid).status()
        if status == psutil.STATUS_STOPPED or time.monotonic() > deadline:
            return status
        time.sleep(0.02)


def _running(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while psutil.Process(pid).status() == psutil.STATUS_STOPPED:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_window_stops_a_registered_process_and_its_children_and_lets_them_go_after(tmp_path, busy):
    process, child = busy
    beside = PausedBeside(tmp_path / "beside")
    beside.register(process.pid)
    with beside.paused():  # stopped by the time the window's block runs: no wait of the test's own
        assert psutil.Process(process.pid).status() == psutil.STATUS_STOPPED
        assert psutil.Process(child).status() == psutil.STATUS_STOPPED
        assert set(beside.stopped_last) == {process.pid, child}
    assert _running(process.pid) and _running(child)
    assert not (tmp_path / "beside" / MARKER).exists() and beside.pauses == 1


def test_a_process_registered_during_a_window_is_stopped_as_it_registers(tmp_path, busy):
    process, child = busy
    kernel, runner = PausedBeside(tmp_path / "b"), PausedBeside(tmp_path / "b")  # two processes, one folder
    with kernel.paused():
        runner.register(process.pid)  # the runner started a compile process in the middle of a timed window
        assert _status(process.pid) == psutil.STATUS_STOPPED and _status(child) == psutil.STATUS_STOPPED
    assert _running(process.pid) and _running(child)


def test_after_a_kernel_that_died_inside_a_window_the_runner_lets_the_processes_go(tmp_path, busy):
    process, child = busy
    runner = PausedBeside(tmp_path / "b")
    runner.register(process.pid)
    window = PausedBeside(tmp_path / "b").paused()
    window.__enter__()  # the kernel's window opened, and the kernel died: it never closes
    assert _status(process.pid) == psutil.STATUS_STOPPED
    runner.resume()
    assert _running(process.pid) and _running(child)
    runner.unregister(process.pid)
    assert runner.registered() == []


def test_a_process_gone_meanwhile_is_left_out(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    beside = PausedBeside(tmp_path / "b")
    beside.register(gone.pid)
    with beside.paused():
        assert beside.stopped_last == []


def test_each_windows_pause_is_logged_on_the_monotonic_clock_and_read_back(tmp_path):
    from bench_utils.measurement.paused_beside import PAUSES_LOG, pauses

    beside = PausedBeside(tmp_path / "b")
    before = time.monotonic()
    with beside.paused():
        time.sleep(0.05)
    with beside.paused():
        pass
    after = time.monotonic()
    logged = pauses(tmp_path / "b")
    assert len(logged) == 2 and before <= logged[0][0] and logged[0][1] - logged[0][0] >= 0.05
    assert logged[0][1] <= logged[1][0] <= logged[1][1] <= after
    with open(tmp_path / "b" / PAUSES_LOG, "a") as log:
        log.write('{"start": 1.0, "en')  # a kernel killed mid-write: its half line left out
    assert pauses(tmp_path / "b") == logged and pauses(tmp_path / "none") == []
