"""A row: every compile mode of a batch size timed beside one eager series (``measured_row``)."""

import json

import pytest
import torch

from bench_utils.records.build import validate_record
from bench_utils.records.schema import Record
from bench_utils.settings import Settings
from bench_utils.study.cell.cell_record import cell_record
from bench_utils.study.cell.measured_row import run_row

ENV = {"torch_version": torch.__version__, "gpus": []}
ROW = ("default", "reduce-overhead")


def test_every_mode_is_paired_with_one_eager_series_timed_in_the_same_rounds(loaded, modes_as_backends):
    settings = Settings(runs=12, warmup=2, blocks=4, backend="aot_eager")
    results = run_row(loaded, 2, ROW, settings, warm_modes=["default"])
    default, graphs = results["default"], results["reduce-overhead"]
    assert default.comparison.baseline is graphs.comparison.baseline  # one eager series, one figure per row
    assert default.comparison.baseline.runs == 12 and default.comparison.blocks == graphs.comparison.blocks == 4
    assert default.timed_with == graphs.timed_with == ROW
    assert default.round_order == graphs.round_order and len(default.round_order) == 4
    assert all(sorted(order) == ["0", "1", "2"] for order in default.round_order)
    # each mode compiled as its cell would: cold, and warm where the row measures its first batch size
    assert default.compile["warm_ms"] is not None and graphs.compile["warm_ms"] is None
    assert default.parity["parity"] == graphs.parity["parity"] == "pass" and default.compile["recompiles"] == 0
    # the eager cell of the batch size takes the row's eager series, and says with which modes it was timed
    assert default.shared_eager.measurement is default.comparison.baseline
    assert default.shared_eager.timed_with == ROW
    # the row's time counted once: the first mode holds the shared work, each mode a share of the timed rounds
    first, second = (result.phases.to_dict() for result in (default, graphs))
    assert first["flops_s"] > 0 and second["flops_s"] == 0 and first["timed_s"] > 0 and second["timed_s"] > 0
    assert second["cell_s"] == pytest.approx(sum(value for key, value in second.items() if key != "cell_s"), abs=1e-3)
    for mode, result in results.items():
        record = cell_record(result, loaded, study="t", environment=ENV)
        validate_record(record)
        json.dumps(record, allow_nan=False)
        speedup = record["speedup"]
        assert speedup["timed_with"] == list(ROW) and speedup["round_order"] == default.round_order
        assert "interleaved with default, reduce-overhead" in speedup["baseline"]
        # which blocks followed another side's block: the rounds' sequence says, this mode's side by its index
        sequence = "".join(default.round_order)
        own = str(ROW.index(mode) + 1)
        expected = {name: [i > 0 and sequence[i - 1] != side for i, side in enumerate(sequence) if side == mark]
                    for name, mark in (("eager", "0"), ("compiled", own))}
        assert Record.from_json(record).speedup.after_a_switch(mode) == expected
        assert Record.from_json(record).speedup.after_a_switch(None) is None  # a row's record needs its mode
    eager = cell_record(default.shared_eager, loaded, study="t", environment=ENV)
    validate_record(eager)
    assert eager["shared_measurement"]["timed_with"] == list(ROW)
    assert "row timed with default, reduce-overhead" in eager["shared_measurement"]["design"]


def test_a_mode_that_fails_to_compile_fails_alone_and_the_others_are_timed(loaded, modes_as_backends, monkeypatch):
    from bench_utils.variants.row_compilation import RowCompilation

    real_compile = RowCompilation.compile

    def compile_or_fail(self, mode, model, inputs, *, warm):
        if mode == "reduce-overhead":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
        return real_compile(self, mode, model, inputs, warm=warm)

    monkeypatch.setattr(RowCompilation, "compile", compile_or_fail)
    results = run_row(loaded, 2, ROW, Settings(runs=4, warmup=1, blocks=2, backend="aot_eager"))
    assert isinstance(results["reduce-overhead"], torch.cuda.OutOfMemoryError)
    alone = results["default"]
    assert alone.timed_with == ("default",) and alone.round_order is None and alone.comparison.baseline.runs == 4


def test_a_row_is_compile_modes_of_static_shapes_only(loaded):
    with pytest.raises(ValueError, match="not timed in a row"):
        run_row(loaded, 2, ("default", "aot-inductor"), Settings(runs=4, warmup=1, blocks=2))
    with pytest.raises(ValueError, match="distinct compile modes"):
        run_row(loaded, 2, ("default", "default"), Settings(runs=4, warmup=1, blocks=2))


def test_inductor_modes_compiled_one_after_another_are_all_callable_without_recompiling(loaded):
    # inductor's own modes (its C++ compiles, ~20 s here): dynamo's real entries of two modes, one after the other
    results = run_row(loaded, 1, ("default", "max-autotune-no-cudagraphs"),
                      Settings(runs=4, warmup=1, blocks=2, profile=False), warm_modes=["default"])
    first, last = results["default"], results["max-autotune-no-cudagraphs"]
    # the first mode was dropped by the second's reset, so it compiled again (from its own cache) to be timed
    assert first.compile["timed_compilation_calls_ms"] and "timed_compilation" not in last.compile
    assert first.compile["recompiles"] == last.compile["recompiles"] == 0
    assert first.parity["parity"] == last.parity["parity"] == "pass"


def test_a_later_replicates_row_compiles_every_mode_warm_from_the_first_ones_kept_caches(loaded, modes_as_backends,
                                                                                         tmp_path):
    from bench_utils.variants.kept_caches import KeptCaches

    caches = KeptCaches(tmp_path)
    kept = {mode: caches.cell(f"tiny-bs2-{mode}", {}) for mode in ROW}
    settings = Settings(runs=4, warmup=1, blocks=2, backend="aot_eager", profile=False)
    first = run_row(loaded, 2, ROW, settings, warm_modes=["default"], kept=kept)
    assert all(cell.cold() is not None for cell in kept.values())
    later = run_row(loaded, 2, ROW, Settings(**{**settings.to_parameters(), "replicate": "r2"}), kept=kept)
    for mode in ROW:
        compiled = later[mode].compile
        # one warm compile a mode, at every batch size; the cold figures are the first replicate's, and say so
        assert compiled["cold_measured_in"] == "replicate r1" and "cold_measured_in" not in first[mode].compile
        assert compiled["cold_calls_ms"] == first[mode].compile["cold_calls_ms"] and compiled["warm_ms"] is not None
        assert compiled["recompiles"] == 0 and later[mode].parity["parity"] == "pass"
        validate_record(cell_record(later[mode], loaded, study="t", environment=ENV))
    assert later["default"].comparison.baseline is later["reduce-overhead"].comparison.baseline
