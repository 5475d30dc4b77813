import json

import pytest
import torch

from bench_utils.records.build import validate_record
from bench_utils.settings import Settings
from bench_utils.study.cell.measured_cell import run_cell
from bench_utils.study.cell.cell_record import cell_record
from bench_utils.zoo.loading import LoadedModel

ENV = {"torch_version": torch.__version__, "gpus": []}


def test_eager_cell(loaded):
    result = run_cell(loaded, 3, "eager", Settings(runs=12, warmup=2))
    assert result.comparison is None and result.parity is None and result.measurement.runs == 12
    record = cell_record(result, loaded, study="t", environment=ENV)
    validate_record(record)
    assert record["cell"]["compile_mode"] == "eager" and record["cell"]["batch_size"] == 3
    assert record["compile"]["backend"] is None and "speedup" not in record
    assert record["memory"]["param_count"] == loaded.param_count
    assert record["model"]["checkpoint"] == "local/tiny-vit" and record["config"]["weights"] == "random"


def test_compiled_cell_reports_speedup_compile_cost_and_parity(loaded):
    result = run_cell(loaded, 2, "default", Settings(runs=12, warmup=2, blocks=3, backend="aot_eager"))
    assert result.comparison.baseline.runs == 12 and result.comparison.blocks == 3
    # the cold compiling call, timed alone, is the cell's first call; cost = it - one eager call
    eager_ms = result.comparison.baseline.mean_ms
    assert result.measurement.first_call_ms == result.compile["cold_calls_ms"][0]
    assert result.compile["cold_ms"] == pytest.approx(result.measurement.first_call_ms - eager_ms)
    assert result.compile["warm_ms"] == pytest.approx(result.compile["warm_calls_ms"][0] - eager_ms)
    assert "compile_time_ms" not in result.compile  # cold_ms is the cost a first user pays
    assert result.compile["graphs"] == 1 and result.compile["graph_breaks"] == 0
    assert result.compile["recompiles"] == 0
    # the gate: against an fp64 eager reference, with the task's agreement figure
    assert result.parity["parity"] == "pass" and result.parity["reference"] == "float64"
    assert result.agreement["metric"] == "top1_agreement" and result.agreement["value"] == 1.0
    # FLOPs of the forward pass, counted outside timing; no peak figure on a CPU
    assert result.compute["flops"] > 0 and result.compute["peak_tflops"] is None
    assert result.compute["tflops"] == pytest.approx(
        result.compute["flops"] / (result.measurement.mean_ms * 1e-3) / 1e12)
    assert result.compute["eager_tflops"] == pytest.approx(result.compute["flops"] / (eager_ms * 1e-3) / 1e12)
    assert result.energy is None  # no NVML on a CPU: not measured, not zero
    record = cell_record(result, loaded, study="t", environment=ENV,
                         config={"seed": 0, "tf32": "default"})
    validate_record(record)
    json.dumps(record, allow_nan=False)
    assert record["compile"]["mode"] == "default" and record["compile"]["cold_ms"] > 0
    assert record["speedup"]["pairs"] == 3 and "paired" in record["speedup"]["method"]
    assert len(record["speedup"]["order"]) == 3 and record["latency"]["sync"] == "per-call"
    assert record["agreement"]["value"] == 1.0 and record["compute"]["flops"] > 0
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
    result = run_cell(loaded, 1, "default", Settings(runs=6, warmup=1, blocks=2, backend="aot_eager"))
    assert result.parity["parity"] == "fail" and result.measurement.runs == 6
    record = cell_record(result, loaded, study="t", environment=ENV)
    assert record["status"] == "ok" and record["parity"]["parity"] == "fail"


def test_a_recompile_during_the_timed_runs_stops_the_cell(loaded, monkeypatch):
    from bench_utils.variants import modes as compile_module
    from bench_utils.variants.compile_cost import RecompiledDuringTiming

    real_compile = compile_module.compile_model

    def compile_then_change_shape(model, mode, **kwargs):
        compiled, calls = real_compile(model, mode, **kwargs), []

        def forward(**inputs):  # the compiling calls see one shape; the timed runs another
            calls.append(1)
            if len(calls) > 3:
                inputs = {"pixel_values": inputs["pixel_values"][:1]}
            return compiled(**inputs)
        return forward

    monkeypatch.setattr(compile_module, "compile_model", compile_then_change_shape)
    with pytest.raises(RecompiledDuringTiming, match="recompiled during the timed runs"):
        run_cell(loaded, 2, "default", Settings(runs=6, warmup=1, blocks=2, backend="aot_eager"))


def test_eager_cell_counts_flops_and_reports_the_sync_mode(loaded):
    result = run_cell(loaded, 2, "eager", Settings(runs=5, warmup=1, sync="pipelined"))
    assert result.measurement.sync == "pipelined" and result.compute["flops"] > 0
    assert "eager_tflops" not in result.compute and result.energy is None


def test_a_figure_that_fails_after_the_timed_runs_costs_that_figure_not_the_cell(loaded, monkeypatch):
    from bench_utils.study.cell import measured_cell as cell_module

    real_memory, calls = cell_module.memory_of, []

    def memory_fails_the_second_time(*args):  # eager's probe works, the compiled one runs out
        calls.append(1)
        if len(calls) == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_memory(*args)

    monkeypatch.setattr(cell_module, "memory_of", memory_fails_the_second_time)
    result = run_cell(loaded, 1, "default", Settings(runs=4, warmup=1, blocks=2, backend="aot_eager"))
    assert result.measurement.runs == 4 and result.parity["parity"] == "pass"
    assert result.memory is None and result.eager_memory["param_count"]
    assert result.notes == ["memory not measured: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    record = cell_record(result, loaded, study="t", environment=ENV)
    assert record["status"] == "ok" and record["notes"] == result.notes


@pytest.mark.slow  # 40-70 s of C++ compile: make bench runs it (make test: tests/variants/test_aot_inductor.py)
def test_an_aot_inductor_cell_is_priced_as_a_deployment_and_gated_like_any_compiled_cell(loaded):
    result = run_cell(loaded, 2, "aot-inductor", Settings(runs=6, warmup=1, blocks=3))
    aot = result.compile["aot"]
    assert aot["export_s"] > 0 and aot["compile_s"] > 0 and aot["package_bytes"] > 0 and aot["load_s"] > 0
    assert set(aot["fresh_process"]) == {"import_s", "load_s", "first_call_s"}
    # cold: export + compile + load + first call, less one eager call; warm: load + first call only
    assert result.compile["cold_ms"] > 1e3 * (aot["export_s"] + aot["compile_s"]) - result.comparison.baseline.mean_ms
    assert 0 < result.compile["warm_ms"] + result.comparison.baseline.mean_ms < result.compile["cold_ms"]
    assert result.compile["graph_breaks"] == 0 and result.compile["recompiles"] == 0
    assert result.parity["parity"] == "pass" and result.comparison.baseline.runs == 6
    record = cell_record(result, loaded, study="t", environment=ENV)
    validate_record(record)
    assert record["cell"]["compile_mode"] == "aot-inductor" and record["compile"]["fullgraph"] is True
    # a package on a CPU is invisible to the profiler: no figures rather than false ones, and the reason
    assert result.profile is None and "profile" not in record
    assert any(note.startswith("profile: not taken (an AOTInductor package on a CPU") for note in result.notes)


def test_a_model_that_cannot_be_exported_fails_its_aot_cell_with_the_reason(loaded, monkeypatch):
    from bench_utils.variants import aot_inductor

    monkeypatch.setattr(aot_inductor.torch.export, "export",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("data-dependent branch\nmore")))
    with pytest.raises(aot_inductor.NotExportable, match="export failed: RuntimeError: data-dependent branch"):
        run_cell(loaded, 1, "aot-inductor", Settings(runs=2, warmup=1, blocks=1))


@pytest.mark.slow  # 60-80 s of fresh process: make bench runs it (make test: tests/variants/test_portable_cache.py)
def test_a_portable_cache_starts_a_fresh_process_that_hits_it(loaded):
    result = run_cell(loaded, 2, "default", Settings(runs=4, warmup=1, blocks=2, portable_cache=True))
    fresh = result.compile["portable_cache"]
    assert result.notes == []
    # the fresh process's cache folders were empty: its hit came from the carried artifacts
    assert fresh["fx_graph_cache_hits"] >= 1 and fresh["fx_graph_cache_misses"] == 0
    assert fresh["artifact_bytes"] > 0 and fresh["import_s"] > 0
    assert fresh["first_answer_s"] == pytest.approx(fresh["load_artifacts_s"] + sum(fresh["first_calls_s"]))
    record = cell_record(result, loaded, study="t", environment=ENV)
    assert record["compile"]["portable_cache"] == fresh


def test_a_portable_cache_that_cannot_be_measured_is_a_note_not_a_failure(loaded):
    result = run_cell(loaded, 1, "default", Settings(runs=4, warmup=1, blocks=2, backend="aot_eager",
                                                     portable_cache=True))
    assert "portable_cache" not in result.compile and result.measurement.runs == 4
    assert result.notes == ["portable cache not measured: ValueError: the aot_eager compilation left no "
                            "cache artifacts to carry"]


def test_a_cell_whose_float64_reference_cannot_run_records_the_reference_and_rule_that_judged_it(monkeypatch):
    from bench_utils.study.cell import measured_cell as cell_module

    class NoFloat64(torch.nn.Linear):  # its float64 copy runs out of memory
        def forward(self, features):
            if self.weight.dtype == torch.float64:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
            return super().forward(features)

    torch.manual_seed(0)
    model = NoFloat64(6, 3).eval()
    tiny = LoadedModel(model=model, key="tiny", label="Tiny", task="image-classification", checkpoint="local/tiny",
                       weights="random", dtype="float32", device="cpu", param_count=21,
                       make_inputs=lambda b: {"features": torch.randn(b, 6)})
    result = run_cell(tiny, 2, "default", Settings(runs=4, warmup=1, blocks=2, backend="aot_eager"))
    assert result.parity["reference"] == "same-dtype" and "injected" in result.parity["reference_note"]
    assert result.parity["rule"].endswith("alone") and result.parity["tolerance"]["key"] == "float32"

    def broken_gate(*args, **kwargs):
        raise RuntimeError("the gate broke")

    monkeypatch.setattr(cell_module, "compare_outputs", broken_gate)
    result = run_cell(tiny, 2, "default", Settings(runs=4, warmup=1, blocks=2, backend="aot_eager"))
    assert result.parity["reference"] == "none" and result.parity["parity"] is None
    assert "the gate broke" in result.parity["reference_note"]


class _BreakingChain(torch.nn.Module):
    """Element-wise work either side of a forced graph break."""

    def forward(self, pixel_values):
        y = (pixel_values * 2 + 1).relu()
        torch._dynamo.graph_break()
        return {"logits": (y.sin() * 3).flatten(1)[:, :10]}


def test_a_compiled_cell_is_profiled_after_its_timed_runs_and_says_where_that_time_went(loaded, tmp_path):
    result = run_cell(loaded, 2, "default", Settings(runs=6, warmup=1, blocks=3, backend="aot_eager", keep_traces=True),
                      trace_prefix=str(tmp_path / "cell"))
    profile = result.profile
    assert set(profile) >= {"eager", "compiled", "method", "seconds"} and profile["activities"] == "cpu"
    assert profile["eager"]["work_unit"] == "operator calls" and profile["eager"]["work_calls"] > 10
    assert profile["compiled"]["compiled_regions"] == 1 and profile["eager"]["compiled_regions"] == 0
    # outside the timed region: its own phase, which holds what the profile cost (the two clocks nest: how close
    # they come is a duration, which a loaded machine stretches; a parallel make test once put 52 ms between them)
    phases = result.phases.to_dict()
    assert 0 < profile["seconds"] <= phases["profile_s"] and phases["timed_s"] > 0
    assert profile["traces"] == {"eager": "cell.eager.json", "compiled": "cell.compiled.json"}
    assert (tmp_path / "cell.compiled.json").stat().st_size > 0
    record = cell_record(result, loaded, study="t", environment=ENV)
    validate_record(record)
    assert record["profile"] == profile
    unprofiled = run_cell(loaded, 2, "default", Settings(runs=4, warmup=1, blocks=2, backend="aot_eager",
                                                         profile=False))
    assert unprofiled.profile is None and unprofiled.phases.to_dict()["profile_s"] == 0
    assert "profile" not in cell_record(unprofiled, loaded, study="t", environment=ENV)


def test_a_forced_graph_break_is_recorded_with_its_reason_and_profiled_as_two_graphs():
    model = _BreakingChain().eval()
    inputs = {"pixel_values": torch.randn(1, 3, 8, 8)}
    breaking = LoadedModel(model=model, key="breaking", label="Breaking", task="image-classification",
                           checkpoint="local/breaking", weights="random", dtype="float32", device="cpu",
                           param_count=0, make_inputs=lambda b: {"pixel_values": inputs["pixel_values"].repeat(b, 1, 1, 1)})
    result = run_cell(breaking, 1, "default", Settings(runs=4, warmup=1, blocks=2))
    assert result.compile["graph_breaks"] == 1 and result.compile["graphs"] == 2
    assert any("graph_break" in reason for reason in result.compile["break_reasons"]), result.compile["break_reasons"]
    assert result.profile["compiled"]["compiled_regions"] == 2
    assert result.profile["compiled"]["kinds_ms"]["fused"] > 0  # inductor's generated code, on both sides of the break


def test_a_cell_compiled_with_an_inductor_configuration_is_recorded_as_that_configuration(loaded, monkeypatch):
    # a first CPU diagnosis recorded its no-layout-optimization cells as the default configuration's: resume
    # measured them again and the report took them for the guide's cell
    from torch._inductor import config
    import bench_utils.variants.compilation as compilation
    seen = []
    real = compilation.compile_cold_then_warm

    def compiling(*args, **kwargs):
        seen.append(config.layout_optimization)  # the option in force while the cell compiles
        return real(*args, **kwargs)

    monkeypatch.setattr(compilation, "compile_cold_then_warm", compiling)
    result = run_cell(loaded, 1, "default", Settings(runs=4, warmup=1, blocks=2, backend="aot_eager",
                                                     inductor="no-layout-optimization", profile=False))
    assert seen == [False] and config.layout_optimization is True  # patched for the compilation only
    record = cell_record(result, loaded, study="t", environment=ENV)
    assert record["cell"]["inductor"] == "no-layout-optimization"
    assert record["compile"]["inductor_options"] == {"layout_optimization": False}
