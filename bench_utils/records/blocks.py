"""The blocks of a record, typed: frozen, strict pydantic models, each field's range in ``records.value_types``
(docs/records.md, "A typed, immutable record"). Nothing here imports torch or pandas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from annotated_types import Ge, Le, Len
from pydantic import BaseModel, ConfigDict

from .value_types import (BatchSize, Bounds, CompileModeName, Count, Device, DTypeName, Milliseconds, NonNegative,
                          PerSecond, Positive, Ratio, RatioInterval, Seconds, Share, Text)


class Block(BaseModel):
    """A block of a record: immutable, strict, and keeping the keys it does not type (they are the block's own)."""

    # built at first use, not at import: most processes import the records and never read one
    model_config = ConfigDict(frozen=True, extra="allow", strict=True, protected_namespaces=(), defer_build=True)

    def to_json(self) -> dict[str, Any]:
        """The block as JSON holds it: what was read or built, no field added."""
        return self.model_dump(mode="json", exclude_unset=True)

    def read(self, name: str) -> Any:
        """A field by its name, or a key the block holds beyond its fields; None where it has neither."""
        return getattr(self, name) if name in type(self).model_fields else self.extra(name)

    def extra(self, name: str) -> Any:
        """A key the block holds beyond its fields (None where absent): what a block carries for itself."""
        return (self.model_extra or {}).get(name)


class CellBlock(Block):
    """What the cell is, then its variant (``VARIANT_FIELDS``), each its default in older records (``upgrade``)."""

    study: Text
    task: Text
    model: Text
    batch_size: BatchSize
    compile_mode: CompileModeName
    dtype: DTypeName
    device: Device  # as the kernel named it: cpu, cuda or cuda:N
    memory_format: str
    shapes: str
    inductor: str
    replicate: str = "r1"  # a schema-3 record written before replicates existed was its cell's only run

    @property
    def device_kind(self) -> str:
        """cpu or cuda, whichever GPU."""
        return self.device.split(":")[0]


class LatencyBlock(Block):
    """optimum-benchmark's latency block, in seconds (``records.build.latency_block``)."""

    unit: str | None = None
    values: list[Seconds]
    count: Count
    total: NonNegative | None = None
    mean: Seconds
    p50: Seconds
    p90: Seconds | None = None
    p95: Seconds | None = None
    p99: Seconds
    stdev: Annotated[float, Ge(0), Le(3600.0)]
    stdev_: NonNegative | None = None  # relative, in percent
    p999: Seconds | None = None
    median: Seconds
    ci95: Bounds | None = None
    min: Seconds | None = None
    max: Seconds | None = None
    outliers: Count | None = None
    timer: str | None = None                      # perf_counter_ns or cuda_event
    sync: Literal["per-call", "pipelined"] | None = None
    warmup: Count | None = None


class ThroughputBlock(Block):
    unit: str | None = None      # samples/s
    value: PerSecond | None = None


class BlockClock(Block):
    """The GPU read after a block of timed calls (``measurement.block_clocks``); None where NVML could not."""

    sm_clock_mhz: NonNegative | None = None
    temperature_c: float | None = None


class SwitchCalls(Block):
    """Per side, per block, the calls at the block's start kept out of the statistics (ms)."""

    eager: list[list[NonNegative]] | None = None
    compiled: list[list[NonNegative]] | None = None


class BlockClocks(Block):
    """Per side, the GPU read after each block."""

    eager: list[BlockClock] | None = None
    compiled: list[BlockClock] | None = None


class SpeedupBlock(Block):
    """A compiled cell's paired speed-up over interleaved eager (``study.cell.cell_record.speedup_block``)."""

    baseline: str | None = None
    method: str | None = None
    mean: Ratio
    mean_ci95: RatioInterval | None = None           # None: one pair, no interval
    median: Ratio | None = None
    median_ci95: RatioInterval | None = None
    excludes_one: bool | None = None
    paired_pvalue: Share | None = None
    pairs: Annotated[int, Ge(1)] | None = None
    order_seed: int | None = None
    order: str | None = None             # the blocks in the order run: "c" compiled, "b" eager (baseline)
    eager_mean_ms: Milliseconds | None = None
    eager_median_ms: Milliseconds | None = None
    eager_p99_ms: Milliseconds | None = None
    eager_ci95_mean_ms: Bounds | None = None
    eager_outliers: Count | None = None
    # since the first GPU run (None before it):
    eager_values: list[Seconds] | None = None        # eager's timed calls (s), in the order run: its blocks in turn
    block_runs: list[Annotated[int, Ge(1)]] | None = None  # timed calls per block, the same on both sides
    switch_calls: Count | None = None                 # calls at each block's start kept out of the statistics
    switch_ms: SwitchCalls | None = None        # each side's switch calls (ms), per block
    block_clocks: BlockClocks | None = None     # each side's GPU clock after every block
    # since rows (None before: each compiled mode timed against an eager series of its own)
    timed_with: list[str] | None = None         # the compiled modes timed beside this eager series, in one span
    round_order: list[Annotated[str, Len(1, 64)]] | None = None  # rounds' sides: "0" eager, "1"... timed_with's modes

    def after_a_switch(self, mode: str | None = None) -> dict[str, list[bool]] | None:
        """Per side (``eager``, ``compiled``), per block, whether the block timed just before it was another side's:
        a switch of sides. Within a pair the second block always follows one; a pair's first block only where the
        pair before it ended with the other side ("cb" then "bc": no switch). In a row's rounds (``round_order``)
        the compiled side is ``mode``'s (the record's compile mode) and any other side before a block is a switch.
        The first block follows the warm-up, no timed block, and counts as none. None where the record keeps no
        order, or a row's record is read without its mode."""
        if self.round_order and self.timed_with:
            if mode not in self.timed_with:
                return None
            return self._after_a_switch_in_rounds(str(self.timed_with.index(mode) + 1))
        if not self.order or set(self.order) - {"c", "b"}:
            return None
        found: dict[str, list[bool]] = {"eager": [], "compiled": []}
        previous = None
        for first in self.order:
            for side in (("compiled", "eager") if first == "c" else ("eager", "compiled")):
                found[side].append(previous is not None and previous != side)
                previous = side
        return found

    def _after_a_switch_in_rounds(self, mine: str) -> dict[str, list[bool]]:
        found: dict[str, list[bool]] = {"eager": [], "compiled": []}
        previous = None
        for order in self.round_order or []:
            for side in order:
                name = "eager" if side == "0" else "compiled" if side == mine else None
                if name is not None:
                    found[name].append(previous is not None and previous != side)
                previous = side
        return found


class AotFreshProcess(Block):
    """An AOTInductor package's start in a new interpreter (s): what a serving process pays."""

    import_s: NonNegative | None = None
    load_s: NonNegative | None = None
    first_call_s: NonNegative | None = None


class AotBlock(Block):
    """aot-inductor's export, compile and package (s), its load, and a fresh process's start from it."""

    export_s: NonNegative | None = None
    compile_s: NonNegative | None = None
    load_s: NonNegative | None = None
    fresh_process: AotFreshProcess | None = None


class PortableCacheBlock(Block):
    """A fresh process started from the saved compile cache (``variants.portable_cache``), in seconds."""

    import_s: NonNegative | None = None
    model_load_s: NonNegative | None = None
    load_artifacts_s: NonNegative | None = None
    first_calls_s: list[NonNegative] | None = None
    first_answer_s: NonNegative | None = None
    fx_graph_cache_hits: Count | None = None
    fx_graph_cache_misses: Count | None = None
    artifact_bytes: Count | None = None


class BatchShapesBlock(Block):
    """A dynamic cell's compilation: the batch size it was compiled at, and what this one recompiled."""

    compiled_at_batch_size: Annotated[int, Ge(1)] | None = None
    recompiles_at_this_batch_size: Count | None = None
    method: str | None = None


class CompileBlock(Block):
    """The compile options, then what compiling cost and found (``variants.compile_cost``)."""

    mode: str | None = None
    backend: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    cuda_graphs: bool | Literal["partial"] | None = None   # what happened: True, "partial", False
    cuda_graphs_requested: bool | None = None
    first_call_ms: NonNegative | None = None
    # the compiling calls less as many eager calls: noise takes it below 0 where nothing compiled (later batch, warm)
    cold_ms: float | None = None
    warm_ms: float | None = None            # None: measured at another batch size of the model and mode
    cold_calls_ms: list[NonNegative] | None = None
    warm_calls_ms: list[NonNegative] | None = None
    cold_measured_in: str | None = None     # the cold figures another process measured ("replicate r1"): its caches
    compiling_calls: Count | None = None
    graphs: Count | None = None
    graph_breaks: Count | None = None
    recompiles: Count | None = None
    break_even_calls: NonNegative | None = None
    break_reasons: dict[str, Any] | None = None
    inductor_options: dict[str, Any] | None = None  # an Inductor configuration's options (``variants.inductor_config``)
    compile_workers: dict[str, Any] | None = None
    aot: AotBlock | None = None
    portable_cache: PortableCacheBlock | None = None
    batch_shapes: BatchShapesBlock | None = None


class MemoryBlock(Block):
    """The ``MemoryProbe`` report and the CPU activation peak; a compiled cell's eager side under ``eager``."""

    device: str | None = None
    param_count: Count | None = None
    param_bytes: Count | None = None
    buffer_bytes: Count | None = None
    input_bytes: Count | None = None
    cuda_peak_allocated_bytes: Count | None = None
    cuda_peak_reserved_bytes: Count | None = None
    cuda_peak_allocated_increase_bytes: Count | None = None
    cuda_peak_reserved_increase_bytes: Count | None = None
    cuda_graph_pool_bytes: Count | None = None
    cuda_graph_pool_shared_with: list[str] | None = None   # a row's other CUDA-graph modes: one pool holds theirs too
    rss_peak_increase_bytes: int | None = None  # resident memory can fall during a call
    cpu_activation_peak_bytes: Count | None = None
    cpu_activation_allocations: Count | None = None
    cpu_activation_method: str | None = None
    cpu_activation_note: str | None = None
    eager: MemoryBlock | None = None

    @property
    def probed(self) -> bool:
        """Whether the probe ran (it failed, or the cell did, where not): its resident figure is written."""
        return "rss_peak_increase_bytes" in self.model_fields_set


class ToleranceBlock(Block):
    key: str | None = None
    tol: NonNegative | None = None
    multiplier: NonNegative | None = None
    source: str | None = None


class ParityBlock(Block):
    """The accuracy gate's verdict (``variants.parity``) and what judged it."""

    parity: Literal["pass", "fail"] | None = None  # None: not judged
    method: str | None = None
    reference: Literal["float64", "same-dtype", "none"] | None = None
    reference_note: str | None = None
    rule: str | None = None
    dtype: str | None = None
    tf32: bool | None = None
    tolerance: ToleranceBlock | None = None
    max_abs_err: NonNegative | None = None
    worst_tensor: str | None = None
    rmse_ratio: NonNegative | None = None
    rmse_eager: NonNegative | None = None
    rmse_compiled: NonNegative | None = None
    tensors: Count | None = None
    per_tensor: dict[str, Any] | None = None       # each output tensor's figures (``variants.parity``)
    problem_count: Count | None = None
    problems: list[str] | None = None
    # whether the gate could have failed (None: records before it was asked; docs/records.md), with its evidence
    can_fail: bool | None = None
    output_scale: NonNegative | None = None


class AgreementBlock(Block):
    """The task-level agreement of compiled with eager (``variants.agreement``): top-1, pixels, boxes."""

    task: str | None = None
    metric: str | None = None               # what was compared, such as "top1" or "pixel"
    value: Share | None = None              # the fraction that agreed
    count: Count | None = None              # of how many


class ComputeBlock(Block):
    flops: Count | None = None
    tflops: NonNegative | None = None
    percent_of_peak: NonNegative | None = None
    eager_tflops: NonNegative | None = None
    eager_percent_of_peak: NonNegative | None = None


class EnergySide(Block):
    """One side's energy (``measurement.energy_per_inference``); records before the window was sized by its steps
    have ``window_min_s`` (5 s) and none of ``steps`` to ``idle_power_w``."""

    joules_per_inference: NonNegative | None = None
    duration_s: NonNegative | None = None   # the window integrated, step to step of the counter
    steps: Count | None = None              # the counter's steps in it
    power_rel_se: NonNegative | None = None  # the mean power's relative standard error over them (8 samples or more)
    power_rel_ci95: NonNegative | None = None  # its 95 % half-width
    window_stopped_by: str | None = None    # power_rel_se, steps_max, time_limit, fixed_window
    idle_gaps_s: NonNegative | None = None  # idle gaps among the calls, their energy taken out at idle_power_w
    idle_power_w: NonNegative | None = None
    region_s: NonNegative | None = None     # the calls' time, entry to exit: over ``calls``, the window's pace
    calls: Count | None = None
    throttle_reasons_start: list[str] | None = None  # NVML's clocks-event reasons at the window's ends
    throttle_reasons_end: list[str] | None = None


class EnergyBlock(Block):
    """NVIDIA GPUs: each side's energy (``measurement.power``); absent elsewhere."""

    eager: EnergySide | None = None
    compiled: EnergySide | None = None
    timed_runs: dict[str, Any] | None = None       # the energy of the timed runs themselves, clocks and throttle reasons


class PhasesBlock(Block):
    """Seconds inside the kernel (``study.cell.time_by_phase``); ``startup_s`` and ``load_s`` where that cell paid them."""

    startup_s: NonNegative | None = None          # the kernel's first record (``study.cell.kernel_start``): its boot,
    ready_s: NonNegative | None = None            # then the device's preparation, to the freeze, and the
    freeze_s: NonNegative | None = None           # collection before it
    started_ahead_s: NonNegative | None = None    # records of a kernel started ahead (removed): its boot before its
    gate_wait_s: NonNegative | None = None        # start gate opened, and its wait there (startup_s: after the gate)
    load_s: NonNegative | None = None
    cell_s: NonNegative | None = None
    compile_s: NonNegative | None = None
    warmup_s: NonNegative | None = None
    timed_s: NonNegative | None = None
    parity_s: NonNegative | None = None
    memory_s: NonNegative | None = None
    flops_s: NonNegative | None = None
    energy_s: NonNegative | None = None
    profile_s: NonNegative | None = None          # why it got faster: both sides profiled
    compile_wait_s: NonNegative | None = None     # records of compile ahead (removed): waiting for a compile process
    host_steal_s: NonNegative | None = None       # CPU seconds the hypervisor took from the host's cores meanwhile


# A kernel's own cost, in its first record (``study.cell.kernel_start``): what a kernel's start sums.
KERNEL_START_PHASES = ("startup_s", "ready_s", "freeze_s", "load_s")


class ProfileSide(Block):
    """One side of a profile, per call (``measurement.work_profile``)."""

    calls: Count | None = None
    wall_ms: NonNegative | None = None
    busy_ms: NonNegative | None = None
    busy_fraction: NonNegative | None = None
    work_calls: NonNegative  # kernels (GPU) or operator calls (CPU) per call
    work_unit: str | None = None                  # "kernels" or "operator calls"
    compiled_regions: NonNegative | None = None   # compiled graphs run per call: more than one is a graph break
    kinds_ms: dict[str, NonNegative] | None = None  # vocabulary.WorkKind -> ms per call


class ProfileBlock(Block):
    """Why a compiled cell got faster or slower: both sides profiled after the timed runs (docs/records.md, profile).
    Absent where not taken: ``profile: false``, or a failure, which the record's ``notes`` name."""

    method: str | None = None
    activities: str | None = None                 # "cpu" or "cpu+cuda"
    eager: ProfileSide | None = None
    compiled: ProfileSide | None = None
    seconds: NonNegative | None = None            # what profiling cost the cell
    traces: dict[str, str] | None = None


class SharedMeasurementBlock(Block):
    """An eager cell timed as the eager side of compiled pairs or of a row's rounds: one measurement, several records."""

    with_compile_mode: str
    design: str | None = None
    timed_with: list[str] | None = None   # since rows: the compiled modes timed beside it (None: not said)
