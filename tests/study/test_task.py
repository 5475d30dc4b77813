import pytest

from bench_utils.results import StaleWriterError, read_records
from bench_utils.study import task
from bench_utils.study.lease import RunnerLease


def run(tmp_path, **kwargs):
    options = dict(study="t", task="image-classification", models=["timm:resnet18"],
                   batch_sizes=[1, 2, 4], compile_modes=["eager"], runs=2, warmup=1, blocks=1,
                   results_path=tmp_path / "results.jsonl")
    options.update(kwargs)
    return task.run(**options)


def test_cells_are_measured_and_recorded(tmp_path):
    returned = run(tmp_path, batch_sizes=[1, 2])
    assert [r["status"] for r in returned] == ["ok", "ok"]
    assert all(r["latency"]["mean"] > 0 for r in returned)
    records = read_records(tmp_path / "results.jsonl")
    assert [r["cell"]["batch_size"] for r in records] == [1, 2]
    assert records[0]["config"]["tf32"] == "default" and records[0]["model"]["weights"] == "random"


def test_out_of_memory_records_oom_and_skips_larger_batches(tmp_path, monkeypatch):
    monkeypatch.setenv(task.FAULT_ENV, "oom:timm:resnet18:2")
    assert [r["status"] for r in run(tmp_path)] == ["ok", "oom", "oom"]
    records = read_records(tmp_path / "results.jsonl")
    assert "OutOfMemoryError" in records[1]["error"] and records[2]["skipped_after_oom"] == 2


def test_an_error_records_the_traceback_and_the_rest_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv(task.FAULT_ENV, "error:timm:resnet18:1")
    assert [r["status"] for r in run(tmp_path, batch_sizes=[1, 2])] == ["error", "ok"]
    error = read_records(tmp_path / "results.jsonl")[0]["error"]
    assert "Traceback" in error and "RuntimeError: injected fault" in error


def test_a_model_that_cannot_load_gives_an_error_per_cell(tmp_path):
    returned = run(tmp_path, models=["resnet"], weights="pretrained", batch_sizes=[1, 2])
    assert [r["status"] for r in returned] == ["error", "error"]
    assert "weights='random'" in read_records(tmp_path / "results.jsonl")[1]["error"]


def test_out_of_memory_is_recognized():
    import torch

    assert task.is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert task.is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert task.is_out_of_memory(RuntimeError(
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
    assert not task.is_out_of_memory(RuntimeError("shape mismatch"))


def test_a_notebook_of_a_replaced_runner_writes_nothing(tmp_path, monkeypatch):
    import os

    # The watchdog would end this very process (it is tested in test_lease.py).
    monkeypatch.setattr(task, "start_watchdog", lambda *args, **kwargs: None)
    results = tmp_path / "results.jsonl"
    with RunnerLease(tmp_path, results) as old:
        stale = old.run_id
    with RunnerLease(tmp_path, results):
        with pytest.raises(StaleWriterError):
            run(tmp_path, batch_sizes=[1], runner_pid=os.getpid(), run_id=stale)
    assert not results.exists() or read_records(results) == []


def test_auto_weights_record_the_weights_measured_not_the_request(tmp_path):
    # Offline (the tests force it), "auto" falls back to random: records must say "random".
    with pytest.warns(UserWarning, match="falling back to random weights"):
        returned = run(tmp_path, models=["resnet"], weights="auto", batch_sizes=[1], runs=1)
    assert [r["status"] for r in returned] == ["ok"]
    config = read_records(tmp_path / "results.jsonl")[0]["config"]
    assert config["weights"] == "random" and config["weights_requested"] == "auto"
