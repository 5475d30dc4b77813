"""Why a compiled cell lost, from its profile: the rules it fires and the remedies they name."""

import pytest

from bench_utils.measurement import slowdown
from bench_utils.measurement.slowdown import Variant
from bench_utils.records.schema import ProfileBlock


def side(busy, **kinds):
    return {"busy_fraction": busy, "kinds_ms": kinds, "work_calls": 100}


def profile(sides):
    """A record's profile block (``records.schema.ProfileBlock``) of its JSON."""
    return ProfileBlock.model_validate(sides)


# the first H200 run's two slower cells, as their profiles read
VIT_BS1 = profile({"eager": side(0.31, matmul_conv=2.95, normalization=0.08, elementwise=0.06, copy_layout=0.02),
                   "compiled": side(0.29, matmul_conv=1.95, fused=0.20)})
MOBILENET_BS16 = profile({"eager": side(0.97, matmul_conv=10.76, normalization=6.0, elementwise=4.6, copy_layout=1.5),
                          "compiled": side(0.97, matmul_conv=26.26, fused=3.0)})


def test_a_host_bound_call_and_a_slower_convolution_each_fire_their_rule():
    assert slowdown.rules_fired(VIT_BS1) == ["host-bound", "fusion-costly"]
    assert slowdown.rules_fired(MOBILENET_BS16) == ["matmul-conv-up"]
    assert slowdown.rules_fired(None) == ["no-profile"] == slowdown.rules_fired(profile({"eager": side(0.5)}))
    busy_and_faster = profile({"eager": side(0.9, matmul_conv=2.0, elementwise=1.0),
                               "compiled": side(0.9, matmul_conv=2.0, fused=0.5)})
    assert slowdown.rules_fired(busy_and_faster) == ["no-profile"]  # nothing points anywhere


def test_the_remedies_are_variants_of_the_slow_cell_each_once_none_the_cell_itself():
    vit = slowdown.remedies(VIT_BS1, Variant("default"), cuda=True)
    assert [(r.rule, r.variant) for r in vit] == [
        ("host-bound", Variant("reduce-overhead")), ("host-bound", Variant("default", inductor="freezing")),
        ("fusion-costly", Variant("max-autotune-no-cudagraphs"))]
    on_cpu = slowdown.remedies(VIT_BS1, Variant("default"), cuda=False)
    assert Variant("reduce-overhead") not in [r.variant for r in on_cpu]  # no CUDA graphs on a CPU
    mobilenet = slowdown.remedies(MOBILENET_BS16, Variant("default"), cuda=True)
    assert [r.variant for r in mobilenet] == [Variant("default", inductor="no-layout-optimization"),
                                              Variant("default", memory_format="channels_last"),
                                              Variant("max-autotune-no-cudagraphs")]
    # a slow max-autotune-no-cudagraphs cell is not its own remedy
    autotuned = slowdown.remedies(MOBILENET_BS16, Variant("max-autotune-no-cudagraphs"), cuda=True)
    assert Variant("max-autotune-no-cudagraphs") not in [r.variant for r in autotuned]


@pytest.mark.parametrize("speedup, interval, slower", [
    (0.81, (0.79, 0.84), True),    # below 1
    (0.99, (0.97, 1.02), True),    # includes 1: inconclusive
    (1.03, (1.01, 1.05), False),   # above 1
    (0.9, None, True), (1.1, None, False),  # one pair: the speed-up alone
])
def test_a_cell_is_diagnosed_where_its_interval_lies_below_or_includes_one(speedup, interval, slower):
    assert slowdown.is_slower(speedup, interval) is slower


GUIDES_SLOW_CELL = dict(compile_mode="default", memory_format="contiguous", shapes="static", inductor="default",
                        study="h200", speedup=0.8, interval=(0.75, 0.85))


@pytest.mark.parametrize("change, diagnosed", [
    ({}, True),
    ({"speedup": 1.2, "interval": (1.1, 1.3)}, False),       # faster
    ({"compile_mode": "eager"}, False),                       # nothing compiled
    ({"memory_format": "channels_last"}, False),              # a remedy's variant
    ({"shapes": "dynamic"}, False),
    ({"inductor": "freezing"}, False),
    ({"study": "h200" + slowdown.REMEDY_STUDY_SUFFIX}, False),  # a remedy measured by diagnose
])
def test_only_a_slow_compiled_cell_of_the_guides_kind_is_diagnosed(change, diagnosed):
    assert slowdown.diagnosable(**{**GUIDES_SLOW_CELL, **change}) is diagnosed


def test_another_mode_and_an_inductor_configuration_need_the_inductor_backend():
    cell = Variant("default")
    chosen = slowdown.remedies(profile({"eager": side(0.3, matmul_conv=1.0), "compiled": side(0.3, matmul_conv=2.0)}),
                               cell, cuda=True)
    assert slowdown.measurable(chosen, None) == (chosen, []) and slowdown.measurable(chosen, "inductor") == (chosen, [])
    can, cannot = slowdown.measurable(chosen, "aot_eager")
    assert [remedy.variant for remedy in can] == [Variant("default", "channels_last")]
    assert {remedy.variant for remedy in cannot} == {v.variant for v in chosen} - {Variant("default", "channels_last")}
    assert all(slowdown.needs_inductor(remedy.variant) for remedy in cannot)
