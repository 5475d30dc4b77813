import json

import pytest
import torch

from bench_utils.records import validate_record
from bench_utils.study.cell import cell_record, run_cell
from bench_utils.zoo.loading import LoadedModel

ENV = {"torch_version": torch.__version__, "gpus": []}


@pytest.fixture
def loaded(tiny_vit):
    model, inputs = tiny_vit
    return LoadedModel(model=model, key="tiny-vit", label="TinyViT", task="image-classification",
                       checkpoint="local/tiny-vit", weights="random", dtype="float32", device="cpu",
                       param_count=sum(p.numel() for p in model.parameters()),
                       make_inputs=lambda b: {"pixel_values": inputs["pixel_values"][:1].repeat(b, 1, 1, 1)})


def test_eager_cell(loaded):
    result = run_cell(loaded, batch_size=3, mode="eager", runs=12, warmup=2)
    assert result.comparison is None and result.parity is None and result.measurement.runs == 12
    record = cell_record(result, loaded, study="t", environment=ENV)
    validate_record(record)
    assert record["cell"]["compile_mode"] == "eager" and record["cell"]["batch_size"] == 3
    assert record["compile"]["backend"] is None and "speedup" not in record
    assert record["memory"]["param_count"] == loaded.param_count
    assert record["model"]["checkpoint"] == "local/tiny-vit" and record["config"]["weights"] == "random"


def test_compiled_cell_reports_speedup_compile_cost_and_parity(loaded):
    result = run_cell(loaded, batch_size=2, mode="default", runs=12, warmup=2, blocks=3,
                      backend="aot_eager")
    assert result.comparison.baseline.runs == 12 and result.comparison.blocks == 3
    # the compiled first call, timed alone, is the cell's first call
    assert result.measurement.first_call_ms == pytest.approx(
        result.compile["compile_time_ms"] + result.comparison.baseline.mean_ms)
    assert result.compile["graphs"] == 1 and result.compile["graph_breaks"] == 0
    assert result.compile["recompiles"] == 0
    assert result.parity["parity"] == "pass"
    record = cell_record(result, loaded, study="t", environment=ENV,
                         config={"seed": 0, "tf32": False})
    validate_record(record)
    json.dumps(record, allow_nan=False)
    assert record["compile"]["mode"] == "default" and record["compile"]["compile_time_ms"] > 0
    assert record["speedup"]["baseline"] == "eager, interleaved"
    low, high = record["speedup"]["mean_ci95"]
    assert low <= record["speedup"]["mean"] <= high
    assert record["parity"]["parity"] == "pass" and record["memory"]["eager"]["param_count"]
    assert record["latency"]["count"] == 12 and record["config"]["seed"] == 0


def test_a_wrong_compiled_model_is_flagged_but_keeps_its_timing(loaded, monkeypatch):
    from bench_utils.variants import modes as compile_module

    real_compile = compile_module.compile_model

    def compile_wrongly(model, mode, **kwargs):
        compiled = real_compile(model, mode, **kwargs)
        return lambda **inputs: {"logits": compiled(**inputs).logits + 1.0}

    monkeypatch.setattr(compile_module, "compile_model", compile_wrongly)
    result = run_cell(loaded, batch_size=1, mode="default", runs=6, warmup=1, blocks=2,
                      backend="aot_eager")
    assert result.parity["parity"] == "fail" and result.measurement.runs == 6
    record = cell_record(result, loaded, study="t", environment=ENV)
    assert record["status"] == "ok" and record["parity"]["parity"] == "fail"
