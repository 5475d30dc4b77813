import os
import subprocess
import sys
import textwrap

import pytest

from bench_utils.records.build import failure_record
from bench_utils.records.results_file import StaleWriterError, append_record, read_records
from bench_utils.study.lease import (
    ORPHAN_EXIT_CODE,
    LeaseHeldError,
    RunnerLease,
    lease_is_current,
    process_alive,
)


def record():
    # A record built without torch: the lease and the results file never need it.
    return failure_record(dict(study="s", task="image-classification", model="resnet", batch_size=1,
                               compile_mode="eager", dtype="float32", device="cpu"), status="error",
                          error="a reason", config={}, environment={})


def test_one_runner_per_folder_and_a_new_run_id_each_time(tmp_path):
    results = tmp_path / "results.jsonl"
    with RunnerLease(tmp_path, results) as first:
        assert lease_is_current(tmp_path, first.run_id)
        with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}"):
            RunnerLease(tmp_path, results).__enter__()
    with RunnerLease(tmp_path, results) as second:
        assert second.run_id != first.run_id
        assert not lease_is_current(tmp_path, first.run_id)


def test_a_stale_writer_cannot_append(tmp_path):
    results = tmp_path / "results.jsonl"
    with RunnerLease(tmp_path, results) as old:
        append_record(results, record(), guard=lambda: lease_is_current(tmp_path, old.run_id))
    with RunnerLease(tmp_path, results):
        with pytest.raises(StaleWriterError):
            append_record(results, record(), guard=lambda: lease_is_current(tmp_path, old.run_id))
    assert len(read_records(results)) == 1


def test_process_alive():
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)


def test_watchdog_ends_a_kernel_whose_runner_died(tmp_path):
    with RunnerLease(tmp_path, tmp_path / "results.jsonl") as lease:
        runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        kernel = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import time
            from bench_utils.study.lease import start_watchdog
            start_watchdog({runner.pid}, {str(tmp_path)!r}, {lease.run_id!r}, interval_s=0.05)
            time.sleep(60)
        """)])
        runner.kill()
        runner.wait()
        assert kernel.wait(timeout=30) == ORPHAN_EXIT_CODE


def test_watchdog_ends_a_kernel_when_a_new_runner_takes_over(tmp_path):
    results = tmp_path / "results.jsonl"
    with RunnerLease(tmp_path, results) as lease:
        run_id = lease.run_id
    kernel = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, time
        from bench_utils.study.lease import start_watchdog
        start_watchdog(os.getppid(), {str(tmp_path)!r}, {run_id!r}, interval_s=0.05)
        time.sleep(60)
    """)])
    with RunnerLease(tmp_path, results):
        assert kernel.wait(timeout=30) == ORPHAN_EXIT_CODE


def test_a_study_folder_the_user_cannot_write_in_is_one_line(tmp_path, monkeypatch):
    from bench_utils.errors import UserError
    from bench_utils.study import lease

    real_open = os.open

    def no_writing(path, flags, *args):  # root writes anywhere: the refusal a user would meet, made here
        if str(path).endswith(lease.LOCK_NAME):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(lease.os, "open", no_writing)
    with pytest.raises(UserError, match=r"^cannot write in the study folder .*: Permission denied$"):
        with lease.RunnerLease(tmp_path, tmp_path / "results.jsonl"):
            pass
    assert not (tmp_path / "results.jsonl").exists()
