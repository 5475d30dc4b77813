"""A kernel started ahead: host work, then the start gate, then the device and the gate's cells (``cell.kernel_start``)."""

import threading
import time

from bench_utils.measurement import gpu_token
from bench_utils.records.results_file import read_records
from bench_utils.study.cell import kernel_start, task
from bench_utils.study.start_gate import write_gate
from bench_utils.zoo import loading


def run_gated(tmp_path, monkeypatch, batch_sizes, **extra):
    """``task.run`` in a thread with a start gate; the events it passed, in order, and its outcome."""
    events, outcome = [], {}
    at_gate = threading.Event()
    real_wait, real_cap = task.wait_at_gate, kernel_start.gpu_memory_cap

    def waiting(path):
        events.append("gate")
        at_gate.set()
        return real_wait(path)

    def cap(*args):  # the first touch of the device: only past the gate
        events.append("device")
        return real_cap(*args)

    real_build, real_load = loading.built_on_host, task.load

    def build(*args, **kwargs):  # a model built on the host: before the gate
        events.append("host build")
        return real_build(*args, **kwargs)

    def load(*args, **kwargs):  # a model built from nothing: never where one was built ahead
        events.append("load")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(loading, "built_on_host", build)
    monkeypatch.setattr(task, "load", load)
    monkeypatch.setattr(task, "wait_at_gate", waiting)
    monkeypatch.setattr(kernel_start, "gpu_memory_cap", cap)
    gate = tmp_path / "logs" / "group.1.gate"
    gate.parent.mkdir()

    def target():
        try:
            outcome["records"] = task.run(study="t", task="image-classification", models=["timm:test_resnet"],
                                          batch_sizes=batch_sizes, compile_modes=["eager"], runs=2, warmup=1,
                                          blocks=1, results_path=tmp_path / "results.jsonl", start_gate=gate,
                                          **extra)
        except BaseException as exc:  # the test's thread says it below
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    assert at_gate.wait(120), outcome
    return thread, gate, events, outcome


def test_a_kernel_started_ahead_waits_at_its_gate_then_measures_exactly_the_gates_cells(tmp_path, monkeypatch):
    thread, gate, events, outcome = run_gated(tmp_path, monkeypatch, [1, 2, 4])
    time.sleep(0.5)
    assert thread.is_alive() and events == ["host build", "gate"]  # waiting, the model built, the device untouched
    assert not (tmp_path / "results.jsonl").exists()
    opened = time.monotonic()
    write_gate(gate, [["eager", 4], ["eager", 1]])  # batch 2 dropped since it started (a time limit, say)
    thread.join(120)
    done = time.monotonic() - opened
    assert "error" not in outcome, outcome.get("error")
    assert events == ["host build", "gate", "device"]  # the model built ahead is the one measured: no load again
    records = read_records(tmp_path / "results.jsonl")
    assert [(r.cell.compile_mode, r.cell.batch_size) for r in records] == [("eager", 1), ("eager", 4)]
    first, second = records[0].phases, records[1].phases
    assert first.gate_wait_s >= 0.5 and first.started_ahead_s > 0  # the test's process had started seconds before
    assert 0 <= first.startup_s < done  # only what followed the gate: not the process's age
    assert second.started_ahead_s is None and second.gate_wait_s is None and second.startup_s == 0


def test_a_gate_that_names_no_cell_ends_the_kernel_without_a_record(tmp_path, monkeypatch):
    thread, gate, events, outcome = run_gated(tmp_path, monkeypatch, [1, 2])
    write_gate(gate, [])
    thread.join(120)
    assert outcome == {"records": []} and events == ["host build", "gate"]
    assert not (tmp_path / "results.jsonl").exists()


def test_beside_compile_processes_it_readies_the_device_before_its_gate_with_the_token_as_they_do(tmp_path,
                                                                                                  monkeypatch):
    kept = tmp_path / "kept"
    try:
        thread, gate, events, outcome = run_gated(tmp_path, monkeypatch, [1], compile_ahead=True,
                                                  compile_caches=kept)
        assert events == ["device", "host build", "gate"]  # the memory cap (and a compiler warm-up) off the GPU's path
        write_gate(gate, [["eager", 1]])
        thread.join(120)
    finally:
        gpu_token.use(None, gpu_token.MEASURING)
    assert "error" not in outcome, outcome.get("error")
    entries = gpu_token.holdings(kept / (gpu_token.TOKEN_FILE + ".log"))
    ahead = [e for e in entries if e["what"].startswith("kernel started ahead")]
    assert [e["role"] for e in ahead] == [gpu_token.COMPILING]  # held as a compile process holds it
    assert [e["role"] for e in entries if e["what"] == "timed runs"] == [gpu_token.MEASURING]  # then a kernel's
