"""What one cell runs, in order, and how many calls each step makes: the plan the cell follows and the dry run prices.

``study.cell.measured_cell`` runs a cell's steps from its ``CellPlan``, and ``study.pricing.prior`` prices the same
plan's steps, seconds per call of each side times the plan's calls: a change to what a cell does is made here, once,
and the dry run and ``run --time-limit`` follow it. A step's ``phase`` is the part of the record's ``phases`` its
seconds are counted in (``study.cell.time_by_phase``). No torch is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..measurement import work_profile
from ..records.key import warmed_up_as_its_eager_cell
from ..vocabulary import AOT_MODES, CUDA_GRAPH_MODES, CompileMode, Shapes

EAGER, COMPILED, FLOAT64 = "eager", "compiled", "float64"  # the callables a step calls

MEMORY_CALLS = 3            # calls inside a memory probe, after warm-up (a CPU adds one under the profiler: the
                            # activation memory, ``measurement.cpu_activation``)
CUDA_GRAPH_WARMUP = 2       # a CUDA-graph mode warms up at least this often: replays settle after the recording call
PROFILED_CALLS = work_profile.WARMUP + work_profile.CALLS   # a side's profiled calls, the unrecorded first included
# How a compiled cell gets its compiled forward pass (``variants.compilation`` implements each)
COLD_THEN_WARM = "cold then warm"     # torch.compile: cold, then warm from the cold run's cache
WARM_FROM_KEPT = "warm from kept"     # torch.compile, warm only: another process kept its cold compile (``kept_caches``)
SHARED = "shared"                     # a dynamic batch's one compilation, made at an earlier batch size, called here
AOT_PACKAGE = "aot package"           # an AOTInductor package: exported, compiled and loaded

# The steps, by name
FLOP_COUNT = "flop count"             # one eager call under a FLOP-counting dispatch mode
REFERENCES = "references"             # the accuracy gate's references: an eager call, a float64 copy's call
EAGER_MEMORY = "eager memory"         # eager's memory, probed before anything compiles
COLD_COMPILE = "cold compile"         # the compiling calls, with every compile cache empty
WARM_COMPILE = "warm compile"         # the compiling calls again, from the cold run's on-disk cache
SHARED_FIRST_CALLS = "shared first calls"   # a shared compilation's first calls at this batch size (may compile)
WARMUP = "warm-up"                    # untimed calls (the first of them timed apart)
TIMED = "timed runs"                  # the timed calls: an eager cell's, or a compiled cell's pairs of blocks
ENERGY = "energy"                     # one energy window a side (its calls: as many as the window takes)
GATE = "gate"                         # the compiled call the gate judges
MEMORY = "memory"                     # the cell's own memory: an eager cell's, or the compiled side's
PROFILE = "profile"                   # both sides under the profiler
FRESH_PROCESS = "fresh process"       # a new interpreter started from the saved compile cache (portable cache)
ONCE_PER_CELL = (FLOP_COUNT, EAGER_MEMORY, MEMORY, ENERGY, PROFILE, FRESH_PROCESS)  # a later replicate leaves them
LATER_REPLICATE = "later replicate"   # ``not_taken``'s key for them


def compiling_calls(mode: str) -> int:
    """Calls that compile (or record a CUDA graph) before a mode runs steadily."""
    return 2 if mode in CUDA_GRAPH_MODES else 1


@dataclass(frozen=True)
class Step:
    """One step of a cell: what it does, the ``phases`` part its seconds count in, and its calls of each side."""

    name: str
    phase: str
    sides: tuple[str, ...]     # the callables it calls: EAGER, COMPILED, FLOAT64
    calls: int | None          # calls of each side; None: as many as an energy window takes


@dataclass(frozen=True)
class CellPlan:
    """A cell's steps, in the order it runs them."""

    mode: str
    steps: tuple[Step, ...]
    compilation: str | None = None    # COLD_THEN_WARM, WARM_FROM_KEPT, SHARED or AOT_PACKAGE; None: eager
    setting_warmup: int = 0           # the warm-up the settings asked for
    not_taken: dict[str, str] = field(default_factory=dict)   # a step left out, and why (the record's note)

    def step(self, name: str) -> Step | None:
        return next((step for step in self.steps if step.name == name), None)

    def has(self, name: str) -> bool:
        return self.step(name) is not None

    def calls(self, name: str) -> int:
        """A step's calls of each side (0: not in the plan)."""
        step = self.step(name)
        return 0 if step is None or step.calls is None else step.calls

    @property
    def warmup(self) -> int:
        """Untimed calls of each side before the timed ones."""
        return self.calls(WARMUP)

    @property
    def runs(self) -> int:
        """Timed calls of each side."""
        return self.calls(TIMED)

    @property
    def eager_side_is_its_eager_cell(self) -> bool:
        """Whether a compiled cell's eager side, warmed up as this plan warms it, stands for the eager cell of its
        batch size (``records.key.warmed_up_as_its_eager_cell``): a CUDA-graph mode's longer warm-up does not."""
        return self.compilation is not None and warmed_up_as_its_eager_cell(self.warmup, self.setting_warmup)


def timed_warmup(mode: str, warmup: int) -> int:
    """The warm-up calls of each side of a ``mode`` cell set to ``warmup``: a CUDA-graph mode's at least
    ``CUDA_GRAPH_WARMUP``."""
    return max(warmup, CUDA_GRAPH_WARMUP) if mode in CUDA_GRAPH_MODES else warmup


def eager_side_stands(mode: str, warmup: int) -> bool:
    """Whether a ``mode`` cell set to ``warmup`` times an eager side that stands for the eager cell of its batch
    size (``records.key.warmed_up_as_its_eager_cell``): the kernel takes that eager cell's figures from it."""
    return mode != CompileMode.EAGER and warmed_up_as_its_eager_cell(timed_warmup(mode, warmup), warmup)


def timed_in_rows(mode: str, shapes: str) -> bool:
    """Whether a ``mode`` cell is timed in its row (``study.cell.measured_row``): every torch.compile mode of a
    batch size beside one eager series, in one span. A dynamic batch's compilation serves its mode's next batch
    sizes, and an AOTInductor package is no dynamo compilation: those cells time their own pairs."""
    return mode != CompileMode.EAGER and mode not in AOT_MODES and shapes == Shapes.STATIC


def plan_cell(mode: str, *, warmup: int, runs: int, cuda: bool, profile: bool = True, shapes: str = Shapes.STATIC,
              portable_cache: bool = False, warm_compile: bool = True, reuses_compilation: bool = False,
              shares_pairs: bool = False, cold_kept: bool = False, first_replicate: bool = True) -> CellPlan:
    """The steps of a cell in ``mode`` with these settings, on a CUDA device or not.

    ``warm_compile``: the first batch size of its mode in the kernel, which compiles warm too (and times a portable
    cache); ``cold_kept``: another process kept the cell's cold compile (``kept_caches``), so it compiles warm
    only; ``first_replicate`` False: a later replicate, which leaves the steps in ``ONCE_PER_CELL`` to the first;
    ``reuses_compilation``: a dynamic batch's compilation made at an earlier batch size is called instead of
    compiling; ``shares_pairs``: an eager cell whose latency a compiled cell's pairs measured."""
    if mode == CompileMode.EAGER:
        if shares_pairs:
            return CellPlan(mode, ())
        eager_steps = [Step(FLOP_COUNT, "flops", (EAGER,), 1), Step(WARMUP, "warmup", (EAGER,), warmup),
                       Step(TIMED, "timed", (EAGER,), runs), Step(MEMORY, "memory", (EAGER,), MEMORY_CALLS)]
        if cuda:
            eager_steps.append(Step(ENERGY, "energy", (EAGER,), None))
        return _first_replicate_only(CellPlan(mode, tuple(eager_steps), setting_warmup=warmup), first_replicate)
    aot = mode in AOT_MODES
    compilation = (AOT_PACKAGE if aot else SHARED if reuses_compilation else
                   WARM_FROM_KEPT if cold_kept and shapes == Shapes.STATIC else COLD_THEN_WARM)
    pairs = (EAGER, COMPILED)
    timed = timed_warmup(mode, warmup)
    compiling = compiling_calls(mode)
    steps = [Step(FLOP_COUNT, "flops", (EAGER,), 1), Step(REFERENCES, "parity", (EAGER, FLOAT64), 1),
             Step(EAGER_MEMORY, "memory", (EAGER,), MEMORY_CALLS)]
    if compilation == SHARED:
        steps.append(Step(SHARED_FIRST_CALLS, "compile", (COMPILED,), compiling))
    elif compilation == WARM_FROM_KEPT:
        steps.append(Step(WARM_COMPILE, "compile", (COMPILED,), compiling))
    else:
        steps.append(Step(COLD_COMPILE, "compile", (COMPILED,), compiling))
        if warm_compile:
            steps.append(Step(WARM_COMPILE, "compile", (COMPILED,), compiling))
    steps += [Step(WARMUP, "warmup", pairs, timed), Step(TIMED, "timed", pairs, runs)]
    if cuda:
        steps.append(Step(ENERGY, "energy", pairs, None))
    steps += [Step(GATE, "parity", (COMPILED,), 1), Step(MEMORY, "memory", (COMPILED,), MEMORY_CALLS)]
    not_taken = {}
    if profile and aot and not cuda:
        # its C++ kernels and the extern calls of its shim emit no profiler event: the figures would be false
        not_taken[PROFILE] = "profile: not taken (an AOTInductor package on a CPU emits no profiler events of its own)"
    elif profile:
        steps.append(Step(PROFILE, "profile", pairs, PROFILED_CALLS))
    # once per mode (a later batch size's would load the same cache); a dynamic batch's marks would not travel
    if portable_cache and warm_compile and not aot and shapes == Shapes.STATIC:
        steps.append(Step(FRESH_PROCESS, "compile", (COMPILED,), compiling))
    return _first_replicate_only(CellPlan(mode, tuple(steps), compilation, warmup, not_taken), first_replicate)


def _first_replicate_only(plan: CellPlan, first_replicate: bool) -> CellPlan:
    """``plan``, less the steps taken once per cell where this is a later replicate, with a note saying so."""
    if first_replicate or not any(step.name in ONCE_PER_CELL for step in plan.steps):
        return plan
    steps = tuple(step for step in plan.steps if step.name not in ONCE_PER_CELL)
    left = ", ".join(dict.fromkeys(step.name for step in plan.steps if step.name in ONCE_PER_CELL))
    note = f"{left}: taken in the cell's first replicate only (a later replicate times its runs, and its gate)"
    return CellPlan(plan.mode, steps, plan.compilation, plan.setting_warmup,
                    {**{key: value for key, value in plan.not_taken.items() if key != PROFILE}, LATER_REPLICATE: note})
