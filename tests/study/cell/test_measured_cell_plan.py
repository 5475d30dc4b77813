"""The cell runs its plan (``variants.cell_plan``), the one the dry run prices: its steps in order, its calls."""

from dataclasses import replace
from itertools import groupby

import pytest
import torch

from bench_utils.settings import Settings
from bench_utils.study.cell import measured_cell
from bench_utils.study.cell.measured_cell import run_cell
from bench_utils.study.cell.time_by_phase import Phases
from bench_utils.study.pricing.prior import Prior, Shape
from bench_utils.variants import cell_plan
from bench_utils.zoo.loading import LoadedModel

# round figures for the prior: 134 GFLOPs of matmuls per image, 1,675 MB of eager traffic per image, 100 kernels
ROW = {"conv_gflops_per_image": 0.0, "conv_gflops_fixed": 0.0, "other_gflops_per_image": 134.0,
       "other_gflops_fixed": 0.0, "eager_mb_per_image": 1675.0, "eager_mb_fixed": 0.0, "eager_ops": 100,
       "build_s_cpu": 2.0, "cold_compile_s_cpu": 30.0}


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, features):
        return {"logits": self.linear(features).relu()}


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return LoadedModel(model=_Tiny().eval(), key="tiny", label="Tiny", task="image-classification",
                       checkpoint="local/tiny", weights="random", dtype="float32", device="cpu", param_count=21,
                       make_inputs=lambda b: {"features": torch.randn(b, 6)})


class _PhasesInOrder(Phases):
    """Phases that keep the order the cell entered them in."""

    def __init__(self):
        super().__init__()
        self.order = []

    def timing(self, part):
        self.order.append(part)
        return super().timing(part)

    def add_loop(self, seconds, timed_ms):
        self.order += ["warmup", "timed"]
        super().add_loop(seconds, timed_ms)


def _collapsed(parts):
    return [part for part, _ in groupby(parts)]


SETTINGS = Settings(runs=4, warmup=1, blocks=2, backend="aot_eager")


@pytest.mark.parametrize("mode", ["eager", "default"])
def test_the_cell_runs_its_plans_steps_in_the_plans_order(tiny, mode):
    phases = _PhasesInOrder()
    run_cell(tiny, 2, mode, SETTINGS, phases=phases)
    plan = cell_plan.plan_cell(mode, warmup=1, runs=4, cuda=False)
    assert _collapsed(phases.order) == _collapsed(step.phase for step in plan.steps)


def test_a_count_changed_in_the_plan_moves_the_cells_calls_and_the_price_alike(tiny, monkeypatch):
    prior = Prior("H100 SXM", costs={"m": ROW})
    shape = Shape("m", 2, "default", runs=4, warmup=1)
    before = prior.cell(shape).point

    real_plan = cell_plan.plan_cell

    def two_more_warmup_calls(mode, **settings):
        plan = real_plan(mode, **settings)
        return replace(plan, steps=tuple(replace(step, calls=step.calls + 2) if step.name == cell_plan.WARMUP else step
                                         for step in plan.steps))

    monkeypatch.setattr(cell_plan, "plan_cell", two_more_warmup_calls)
    monkeypatch.setattr(cell_plan, "MEMORY_CALLS", cell_plan.MEMORY_CALLS + 1)
    probed, real_memory = [], measured_cell.memory_of

    def counting(fn, device, loaded, inputs, phases, calls):
        made = []

        def counted():
            made.append(1)
            return fn()

        report = real_memory(counted, device, loaded, inputs, phases, calls)
        probed.append(len(made))
        return report

    monkeypatch.setattr(measured_cell, "memory_of", counting)
    result = run_cell(tiny, 2, "default", replace(SETTINGS, profile=False))
    # the cell: three warm-up calls a side where the settings say one; each probe's calls, and a CPU's profiled one
    assert result.comparison.baseline.warmup == result.comparison.candidate.warmup == 3
    assert probed == [cell_plan.MEMORY_CALLS + 1] * 2 == [5, 5]
    # the price: two more warm-up calls and one more probe call, a side
    eager, compiled = (prior.call(shape, side).point for side in ("eager", "default"))
    assert prior.cell(shape).point - before == pytest.approx(3 * (eager + compiled))
