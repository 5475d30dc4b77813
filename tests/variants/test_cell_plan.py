"""The cell's plan: its steps, their order and calls, for each kind of cell (no torch)."""

import pytest

from bench_utils.variants.cell_plan import (AOT_PACKAGE, COLD_COMPILE, COLD_THEN_WARM, COMPILED, CUDA_GRAPH_WARMUP,
                                            EAGER, EAGER_MEMORY, ENERGY, FLOAT64, FLOP_COUNT, FRESH_PROCESS, GATE,
                                            MEMORY, MEMORY_CALLS, PROFILE, PROFILED_CALLS, REFERENCES, SHARED,
                                            SHARED_FIRST_CALLS, TIMED, WARM_COMPILE, WARMUP, compiling_calls,
                                            plan_cell)
from bench_utils.vocabulary import CUDA_GRAPH_MODES, CompileMode


def names(plan):
    return [step.name for step in plan.steps]


def test_an_eager_cell_counts_flops_times_probes_memory_then_energy_on_a_gpu():
    plan = plan_cell("eager", warmup=10, runs=300, cuda=True)
    assert names(plan) == [FLOP_COUNT, WARMUP, TIMED, MEMORY, ENERGY] and plan.compilation is None
    assert (plan.warmup, plan.runs, plan.calls(MEMORY)) == (10, 300, MEMORY_CALLS)
    assert all(step.sides == (EAGER,) for step in plan.steps)
    assert ENERGY not in names(plan_cell("eager", warmup=10, runs=300, cuda=False))  # no NVML counter on a CPU
    # an eager cell whose latency a compiled cell's pairs measured runs nothing: its record only
    assert plan_cell("eager", warmup=10, runs=300, cuda=True, shares_pairs=True).steps == ()


def test_a_compiled_cell_runs_its_steps_in_one_fixed_order():
    plan = plan_cell("default", warmup=10, runs=300, cuda=True)
    assert names(plan) == [FLOP_COUNT, REFERENCES, EAGER_MEMORY, COLD_COMPILE, WARM_COMPILE, WARMUP, TIMED, ENERGY,
                           GATE, MEMORY, PROFILE]
    assert plan.compilation == COLD_THEN_WARM and plan.step(REFERENCES).sides == (EAGER, FLOAT64)
    assert plan.step(TIMED).sides == (EAGER, COMPILED) and plan.calls(PROFILE) == PROFILED_CALLS == 4
    assert [step.phase for step in plan.steps] == ["flops", "parity", "memory", "compile", "compile", "warmup",
                                                   "timed", "energy", "parity", "memory", "profile"]
    # a later batch size of the mode compiles cold only; profile off, no profile
    later = plan_cell("default", warmup=10, runs=300, cuda=False, warm_compile=False, profile=False)
    assert WARM_COMPILE not in names(later) and PROFILE not in names(later) and ENERGY not in names(later)


@pytest.mark.parametrize("mode", [mode for mode in CompileMode if mode != CompileMode.EAGER])
def test_a_cuda_graph_mode_warms_up_at_least_twice_and_its_eager_side_is_then_not_the_eager_cell(mode):
    plan = plan_cell(mode, warmup=1, runs=300, cuda=True)
    graphs = mode in CUDA_GRAPH_MODES
    assert plan.warmup == (CUDA_GRAPH_WARMUP if graphs else 1) and plan.calls(COLD_COMPILE) == compiling_calls(mode)
    assert plan.eager_side_is_its_eager_cell is not graphs
    assert plan_cell(mode, warmup=10, runs=300, cuda=True).warmup == 10  # more than twice: as set
    assert plan_cell(mode, warmup=10, runs=300, cuda=True).eager_side_is_its_eager_cell


def test_the_compilation_is_decided_by_the_plan():
    assert plan_cell("aot-inductor", warmup=1, runs=5, cuda=True).compilation == AOT_PACKAGE
    shared = plan_cell("default", warmup=1, runs=5, cuda=True, shapes="dynamic", warm_compile=False,
                       reuses_compilation=True)
    assert shared.compilation == SHARED and SHARED_FIRST_CALLS in names(shared) and COLD_COMPILE not in names(shared)


def test_a_package_on_a_cpu_is_not_profiled_and_the_plan_says_why():
    plan = plan_cell("aot-inductor", warmup=1, runs=5, cuda=False)
    assert PROFILE not in names(plan) and plan.not_taken[PROFILE].startswith("profile: not taken (an AOTInductor")
    assert PROFILE in names(plan_cell("aot-inductor", warmup=1, runs=5, cuda=True)) and not plan_cell(
        "aot-inductor", warmup=1, runs=5, cuda=False, profile=False).not_taken


def test_a_portable_cache_is_timed_once_per_mode_for_static_torch_compile_cells():
    def timed(mode="default", **settings):
        return FRESH_PROCESS in names(plan_cell(mode, warmup=1, runs=5, cuda=True, portable_cache=True, **settings))

    assert timed() and names(plan_cell("default", warmup=1, runs=5, cuda=True, portable_cache=True))[-1] == FRESH_PROCESS
    assert not timed(warm_compile=False)  # a later batch size of the mode would load the same cache
    assert not timed(shapes="dynamic")    # a dynamic batch's marks would not travel
    assert not timed("aot-inductor")      # a package is its own deployment


def test_a_cell_whose_cold_compile_another_process_kept_compiles_warm_only():
    from bench_utils.variants.cell_plan import WARM_FROM_KEPT

    for warm_compile in (True, False):  # every batch size of the mode: one warm compile, no cold one
        kept = plan_cell("default", warmup=1, runs=5, cuda=True, warm_compile=warm_compile, cold_kept=True)
        assert kept.compilation == WARM_FROM_KEPT and COLD_COMPILE not in names(kept)
        assert names(kept).count(WARM_COMPILE) == 1 and kept.calls(WARM_COMPILE) == 1
    graphs = plan_cell("reduce-overhead", warmup=1, runs=5, cuda=True, cold_kept=True)
    assert graphs.calls(WARM_COMPILE) == 2  # the recording call too
    # a dynamic batch's shared compilation is its own, kept by nothing
    dynamic = plan_cell("default", warmup=1, runs=5, cuda=True, shapes="dynamic", cold_kept=True)
    assert dynamic.compilation == COLD_THEN_WARM and COLD_COMPILE in names(dynamic)


def test_a_later_replicate_times_its_runs_and_gate_and_leaves_the_once_per_cell_figures_to_the_first():
    from bench_utils.variants.cell_plan import LATER_REPLICATE, ONCE_PER_CELL

    first = plan_cell("default", warmup=1, runs=5, cuda=True, portable_cache=True)
    later = plan_cell("default", warmup=1, runs=5, cuda=True, portable_cache=True, first_replicate=False)
    assert set(names(first)) - set(names(later)) == {FLOP_COUNT, EAGER_MEMORY, MEMORY, ENERGY, PROFILE, FRESH_PROCESS}
    assert [name for name in names(first) if name not in ONCE_PER_CELL] == names(later)  # the rest, in its order
    assert {GATE, REFERENCES, TIMED, WARMUP} <= set(names(later))
    assert later.not_taken[LATER_REPLICATE].startswith("flop count, eager memory, energy, memory, profile, fresh "
                                                        "process: taken")
    eager = plan_cell("eager", warmup=1, runs=5, cuda=False, first_replicate=False)
    assert names(eager) == [WARMUP, TIMED] and "flop count, memory: taken in the cell's first replicate" in \
        eager.not_taken[LATER_REPLICATE]
    # a CPU package's note on its profile goes with the profile: the first replicate's record says it
    package = plan_cell("aot-inductor", warmup=1, runs=5, cuda=False, first_replicate=False)
    assert PROFILE not in package.not_taken and LATER_REPLICATE in package.not_taken
    assert plan_cell("eager", warmup=1, runs=5, cuda=True, shares_pairs=True, first_replicate=False).not_taken == {}
