"""The blocks of a result record, typed, and one way to read each from any record of the schema.

A record stays a plain JSON object (``records`` builds it, ``results`` writes it); these TypedDicts say
what each block holds, and ``records.check`` holds every record written or read to them: each key's type
and range (a duration is positive, a count is not negative), so that no reader meets a string where it
computes or a negative latency. Every block is ``total=False``: records of schema 2 written before a key
existed lack it and still read (``docs/records.md`` says which keys came late); ``Required`` marks what
every such block has, since readers index it. Keys a block holds beyond these are the block's own
(environment's settings, parity's per-tensor figures) and are not checked. The kinds of value (ranges, checked
names) are ``records.value_types``'. ``records.reading`` reads a block as
its type below. Nothing here imports torch, pandas or pydantic.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from annotated_types import Ge, Len
from typing_extensions import Required, TypedDict  # pydantic (records.check) needs typing_extensions' before 3.12

from .value_types import (Bounds, CompileModeName, Count, Device, DTypeName, Interval, NamePart, NonNegative,
                          PackageName, Positive, Share, Text, Version)



class CellIdentityBlock(TypedDict, total=False):
    """What the cell is, whatever its variant: every record has these (``records.validate_cell``)."""

    study: Required[Text]
    task: Required[Text]
    model: Required[Text]
    batch_size: Required[Annotated[int, Ge(1)]]
    compile_mode: Required[CompileModeName]
    dtype: Required[DTypeName]
    device: Required[Device]  # as the kernel named it: cpu, cuda or cuda:N


# The cell's identity fields, in the schema's order: a grid's ``study.grid.Cell`` is these and its settings
# (its tests check it), and ``records`` builds and checks a record's cell by them.
CELL_FIELDS = tuple(CellIdentityBlock.__annotations__)


class CellBlock(CellIdentityBlock, total=False):
    """What the cell is, then its variant: ``memory_format``, ``shapes`` and ``inductor``
    (``records.key.VARIANT_FIELDS``, the settings whose ``record`` is ``IDENTITY``) are absent from records made
    before each existed, which are the guide's cells."""

    memory_format: str
    shapes: str
    inductor: str


class LatencyBlock(TypedDict, total=False):
    """optimum-benchmark's latency block, in seconds (``records.build.latency_block``)."""

    unit: str
    values: Required[list[Positive]]
    count: Required[Count]
    total: NonNegative
    mean: Required[Positive]
    p50: Required[Positive]
    p90: Positive
    p95: Positive
    p99: Required[Positive]
    stdev: Required[NonNegative]
    stdev_: NonNegative  # relative, in percent
    p999: Positive
    median: Required[Positive]
    ci95: Bounds
    min: Positive
    max: Positive
    outliers: Count
    timer: str                      # perf_counter_ns or cuda_event
    sync: Literal["per-call", "pipelined"]
    warmup: Count


class ThroughputBlock(TypedDict, total=False):
    unit: str      # samples/s
    value: Positive


class SpeedupBlock(TypedDict, total=False):
    """A compiled cell's paired speed-up over interleaved eager (``study.cell_record.speedup_block``)."""

    baseline: str
    method: str
    mean: Required[Positive]
    mean_ci95: Interval | None           # None: one pair, no interval
    median: Positive
    median_ci95: Interval | None
    excludes_one: bool | None
    paired_pvalue: Share | None
    pairs: Annotated[int, Ge(1)]
    order_seed: int
    order: str                           # the blocks in the order run: "c" compiled, "b" eager (baseline)
    eager_mean_ms: Positive
    eager_median_ms: Positive
    eager_p99_ms: Positive
    eager_ci95_mean_ms: Bounds | None
    eager_outliers: Count
    # since the first GPU run (records before it lack them):
    eager_values: list[Positive]        # eager's timed calls (s), in the order run: its blocks in turn
    block_runs: list[Annotated[int, Ge(1)]]  # timed calls per block, the same on both sides
    switch_calls: Count                 # calls at each block's start kept out of the statistics
    switch_ms: dict[str, list[list[NonNegative]]]  # "eager", "compiled": per block, its switch calls (ms)
    block_clocks: dict[str, list[BlockClock]]      # "eager", "compiled": per block, the GPU's clock after it


class BlockClock(TypedDict, total=False):
    """The GPU read after a block of timed calls (``measurement.block_clocks``); None where NVML could not."""

    sm_clock_mhz: NonNegative | None
    temperature_c: float | None


class CompileBlock(TypedDict, total=False):
    """The compile options, then what compiling cost and found (``variants.compile_cost``)."""

    mode: str
    backend: str | None
    fullgraph: bool | None
    dynamic: bool | None
    cuda_graphs: bool | Literal["partial"] | None   # what happened: True, "partial", False
    cuda_graphs_requested: bool
    first_call_ms: NonNegative
    # the compiling calls less as many eager calls: a difference of timings, which noise takes below 0 where
    # nothing was compiled (a dynamic cell's later batch sizes, a warm cache)
    cold_ms: float | None
    warm_ms: float | None            # None: measured at another batch size of the model and mode
    cold_calls_ms: list[NonNegative]
    warm_calls_ms: list[NonNegative] | None
    compiling_calls: Count
    graphs: Count
    graph_breaks: Count
    recompiles: Count
    break_even_calls: NonNegative | None
    break_reasons: dict[str, Any]
    inductor_options: dict[str, Any]  # an Inductor configuration's options (``variants.inductor_config``)
    compile_workers: dict[str, Any] | None
    aot: dict[str, Any] | None  # aot-inductor: export, compile, package, load, fresh_process
    portable_cache: dict[str, Any] | None  # a fresh process from the saved compile cache
    batch_shapes: dict[str, Any] | None  # dynamic cells: compiled_at_batch_size, recompiles_at_this_batch_size


class MemoryBlock(TypedDict, total=False):
    """The ``MemoryProbe`` report and the CPU activation peak; a compiled cell's eager side under ``eager``."""

    device: str
    param_count: Count | None
    param_bytes: Count | None
    buffer_bytes: Count | None
    input_bytes: Count | None
    cuda_peak_allocated_bytes: Count | None
    cuda_peak_reserved_bytes: Count | None
    cuda_peak_allocated_increase_bytes: Count | None
    cuda_peak_reserved_increase_bytes: Count | None
    cuda_graph_pool_bytes: Count | None
    rss_peak_increase_bytes: int | None  # resident memory can fall during a call
    cpu_activation_peak_bytes: Count | None
    cpu_activation_allocations: Count | None
    cpu_activation_method: str | None
    cpu_activation_note: str | None
    eager: MemoryBlock


class ToleranceBlock(TypedDict, total=False):
    key: str
    tol: NonNegative
    multiplier: NonNegative
    source: str


class ParityBlock(TypedDict, total=False):
    """The accuracy gate's verdict (``variants.parity``) and what judged it."""

    parity: Literal["pass", "fail"] | None  # None: not judged
    method: str | None
    reference: Literal["float64", "same-dtype", "none"]
    reference_note: str | None
    rule: str | None
    dtype: str
    tf32: bool
    tolerance: ToleranceBlock
    max_abs_err: NonNegative | None
    worst_tensor: str | None
    rmse_ratio: NonNegative | None
    rmse_eager: NonNegative | None
    rmse_compiled: NonNegative | None
    tensors: Count
    per_tensor: dict[str, Any]       # each output tensor's figures (``variants.parity``)
    problem_count: Count
    problems: list[str]


class AgreementBlock(TypedDict, total=False):
    value: Share | None              # the task-level agreement of compiled with eager


class ComputeBlock(TypedDict, total=False):
    flops: Count | None
    tflops: NonNegative | None
    percent_of_peak: NonNegative | None
    eager_tflops: NonNegative | None
    eager_percent_of_peak: NonNegative | None


class EnergySide(TypedDict, total=False):
    """One side's energy (``study.cell.memory_and_energy``): the probe's report (``measurement.power.REPORT_KEYS``)
    and the window's rule and outcome; records before the window was sized by its steps have ``window_min_s``
    (5 s) and none of ``steps`` to ``idle_power_w``."""

    joules_per_inference: NonNegative | None
    duration_s: NonNegative | None   # the window integrated, step to step of the counter
    steps: Count | None              # the counter's steps in it
    power_rel_se: NonNegative | None  # the mean power's relative standard error over them (8 samples or more)
    power_rel_ci95: NonNegative | None  # its 95 % half-width
    window_stopped_by: str | None    # power_rel_se, steps_max, time_limit, fixed_window
    idle_gaps_s: NonNegative | None  # idle gaps among the calls, their energy taken out at idle_power_w
    idle_power_w: NonNegative | None


class EnergyBlock(TypedDict, total=False):
    """NVIDIA GPUs: each side's energy (``measurement.power``); absent elsewhere."""

    eager: EnergySide | None
    compiled: EnergySide | None
    timed_runs: dict[str, Any]       # the energy of the timed runs themselves, clocks and throttle reasons


class PhasesBlock(TypedDict, total=False):
    """Seconds inside the kernel (``study.phases``); ``startup_s`` and ``load_s`` where that cell paid them."""

    startup_s: NonNegative
    load_s: NonNegative
    cell_s: NonNegative
    compile_s: NonNegative
    warmup_s: NonNegative
    timed_s: NonNegative
    parity_s: NonNegative
    memory_s: NonNegative
    flops_s: NonNegative
    energy_s: NonNegative
    profile_s: NonNegative          # why it got faster: both sides profiled


class GpuEntry(TypedDict, total=False):
    """A GPU as ``environment.capture`` lists it."""

    index: Count
    name: str | None
    uuid: str | None
    total_memory_bytes: Count | None


class EnvironmentBlock(TypedDict, total=False):
    """What the cell was measured on (``environment.capture.capture_environment``); the keys a record's identity,
    the report and a study's environment files read are typed here, the rest (settings in force) are there.
    ``python_version``, ``machine`` and ``torch_version`` name a study's environment file; ``packages`` (or, in records
    before it, the ``*_version`` keys) pin what ``make reproduce`` installs: each is checked to be what it says,
    never a path or a pip option."""

    torch_version: Version
    torch_git_version: str | None
    torch_cuda_version: str | None
    cudnn_version: int | str | None
    transformers_version: Version | None
    timm_version: Version | None
    triton_version: Version | None
    torchvision_version: Version | None
    numpy_version: Version | None
    python_version: NamePart | None
    machine: NamePart | None
    os_release: str | None
    cpu_model: str | None
    cpu_count_logical: Count | None
    ram_total_bytes: Count | None
    torch_num_threads: Count | None
    driver_version: str | None
    gpus: list[GpuEntry]
    packages: dict[PackageName, Version]
    git_commit: str | None
    accelerator_type: str | None     # a cluster's declared kind of node; None locally
    cluster_node_id: str | None
    timestamp_utc: str


class ConfigBlock(TypedDict, total=False):
    """How the cell was measured: its settings under their record names (``records.build.measurement_settings``),
    the weights measured (None: nothing was) and the TF32 settings in force."""

    weights: Literal["random", "pretrained", "auto"] | None  # "auto": records before it was resolved
    weights_requested: Literal["random", "pretrained", "auto"]
    runs: Annotated[int, Ge(1)]
    warmup: Count
    blocks: Annotated[int, Ge(1)] | None
    seed: int
    tf32: str
    backend: str
    fullgraph: bool
    dynamic: bool | None
    sync: Literal["per-call", "pipelined"]
    gpu_memory_gib: Positive | None
    gpu_memory_fraction: Positive


class ProfileSide(TypedDict, total=False):
    """One side of a profile, per call (``measurement.work_profile``)."""

    calls: Count
    wall_ms: NonNegative
    busy_ms: NonNegative
    busy_fraction: NonNegative | None
    work_calls: Required[NonNegative]  # kernels (GPU) or operator calls (CPU) per call
    work_unit: str                  # "kernels" or "operator calls"
    compiled_regions: NonNegative   # compiled graphs run per call: more than one is a graph break
    kinds_ms: dict[str, NonNegative]  # vocabulary.WorkKind -> ms per call


class ProfileBlock(TypedDict, total=False):
    """Why a compiled cell got faster or slower: both sides profiled after the timed runs. Absent where not
    taken: ``profile: false`` (``cell --no-profile``), or a failure, which the record's ``notes`` name.
    ``traces``: the kept traces' file names (``--keep-traces``)."""

    method: str
    activities: str                 # "cpu" or "cpu+cuda"
    eager: ProfileSide
    compiled: ProfileSide
    seconds: NonNegative            # what profiling cost the cell
    traces: dict[str, str] | None


class ModelBlock(TypedDict, total=False):
    """The model measured (``zoo.loading``): its key, checkpoint and weights, and the image it was fed."""

    key: str
    label: str
    task: str
    checkpoint: str
    weights: str
    param_count: Count | None


class SharedMeasurementBlock(TypedDict, total=False):
    """An eager cell timed as the eager side of a compiled cell's pairs: one measurement, two records."""

    with_compile_mode: Required[str]
    design: str


class Record(TypedDict, total=False):
    """A whole record: the blocks above under their names, and what every record has."""

    schema_version: Required[int]
    record_id: Required[Annotated[str, Len(1, 64)]]
    cell: Required[CellBlock]
    status: Required[str]              # a vocabulary.Status (records.build.validate_record)
    error: str | None
    config: ConfigBlock
    latency: LatencyBlock | None
    throughput: ThroughputBlock | None
    memory: MemoryBlock | None
    compile: CompileBlock | None
    environment: Required[EnvironmentBlock]
    speedup: SpeedupBlock | None
    parity: ParityBlock | None
    agreement: AgreementBlock | None
    compute: ComputeBlock | None
    energy: EnergyBlock | None
    phases: PhasesBlock | None
    profile: ProfileBlock | None
    model: ModelBlock | None
    shared_measurement: SharedMeasurementBlock | None
    skipped_after_oom: Annotated[int, Ge(1)]


BLOCK_TYPES = {"cell": CellBlock, "latency": LatencyBlock, "throughput": ThroughputBlock, "speedup": SpeedupBlock,
               "compile": CompileBlock, "memory": MemoryBlock, "parity": ParityBlock, "agreement": AgreementBlock,
               "compute": ComputeBlock, "energy": EnergyBlock, "phases": PhasesBlock,
               "environment": EnvironmentBlock, "config": ConfigBlock, "profile": ProfileBlock}
