"""The blocks of a result record, typed, and one way to read each from any record of the schema.

A record stays a plain JSON object (``records`` builds it, ``results`` writes it); these TypedDicts say
what each block holds. Every block is ``total=False``: records of schema 2 written before a key existed
lack it and still read (``docs/records.md`` says which keys came late). ``block(record, name)`` reads a
block as the type below, ``{}`` where the record has none or it is null (a failed cell has no latency);
``part`` reads a block inside a block the same way. Nothing here imports torch or pandas.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, TypedDict, overload


class CellIdentityBlock(TypedDict, total=False):
    """What the cell is, whatever its variant: every record has these (``records.validate_cell``)."""

    study: str
    task: str
    model: str
    batch_size: int
    compile_mode: str
    dtype: str
    device: str  # as the kernel named it: cpu, cuda or cuda:N


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
    values: list[float]
    count: int
    total: float
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    stdev: float
    stdev_: float  # relative, in percent
    p999: float
    median: float
    ci95: list[float]
    min: float
    max: float
    outliers: int
    timer: str
    sync: str      # per-call or pipelined
    warmup: int


class ThroughputBlock(TypedDict, total=False):
    unit: str      # samples/s
    value: float


class SpeedupBlock(TypedDict, total=False):
    """A compiled cell's paired speed-up over interleaved eager (``study.cell_record.speedup_block``)."""

    baseline: str
    method: str
    mean: float
    mean_ci95: list[float]
    median: float
    median_ci95: list[float]
    excludes_one: bool
    paired_pvalue: float | None
    pairs: int
    order_seed: int
    order: list[str]
    eager_mean_ms: float
    eager_median_ms: float
    eager_p99_ms: float
    eager_ci95_mean_ms: list[float]
    eager_outliers: int
    # since the first GPU run (records before it lack them):
    eager_values: list[float]           # eager's timed calls (s), in the order run: its blocks in turn
    block_runs: list[int]               # timed calls per block, the same on both sides
    switch_calls: int                   # calls at each block's start kept out of the statistics
    switch_ms: dict[str, list[list[float]]]     # "eager", "compiled": per block, its switch calls (ms)
    block_clocks: dict[str, list[dict[str, Any]]]  # "eager", "compiled": per block, the GPU's clock after it


class CompileBlock(TypedDict, total=False):
    """The compile options, then what compiling cost and found (``variants.compile_cost``)."""

    mode: str
    backend: str | None
    fullgraph: bool | None
    dynamic: bool | None
    cuda_graphs: bool | str | None   # what happened: True, "partial", False
    cuda_graphs_requested: bool
    first_call_ms: float
    cold_ms: float
    warm_ms: float | None            # None: measured at another batch size of the model and mode
    cold_calls_ms: list[float]
    warm_calls_ms: list[float] | None
    compiling_calls: int
    graphs: int
    graph_breaks: int
    recompiles: int
    break_even_calls: float | None
    compile_workers: dict[str, Any]
    aot: dict[str, Any]              # aot-inductor: export, compile, package, load, fresh_process
    portable_cache: dict[str, Any]   # a fresh process from the saved compile cache
    batch_shapes: dict[str, Any]     # dynamic cells: compiled_at_batch_size, recompiles_at_this_batch_size


class MemoryBlock(TypedDict, total=False):
    """The ``MemoryProbe`` report and the CPU activation peak; a compiled cell's eager side under ``eager``."""

    device: str
    param_count: int | None
    param_bytes: int | None
    buffer_bytes: int | None
    input_bytes: int | None
    cuda_peak_allocated_bytes: int
    cuda_peak_reserved_bytes: int
    cuda_peak_allocated_increase_bytes: int
    cuda_peak_reserved_increase_bytes: int
    cuda_graph_pool_bytes: int | None
    rss_peak_increase_bytes: int | None
    cpu_activation_peak_bytes: int | None
    cpu_activation_allocations: int | None
    cpu_activation_method: str
    cpu_activation_note: str | None
    eager: MemoryBlock


class ToleranceBlock(TypedDict, total=False):
    key: str
    tol: float
    multiplier: float
    source: str


class ParityBlock(TypedDict, total=False):
    """The accuracy gate's verdict (``variants.parity``) and what judged it."""

    parity: str | None               # pass, fail; None: not judged
    method: str | None
    reference: str                   # float64, same-dtype or none
    reference_note: str | None
    rule: str | None
    dtype: str
    tf32: bool
    tolerance: ToleranceBlock
    max_abs_err: float | None
    worst_tensor: str | None
    rmse_ratio: float | None
    problem_count: int
    problems: list[str]


class AgreementBlock(TypedDict, total=False):
    value: float | None              # the task-level agreement of compiled with eager


class ComputeBlock(TypedDict, total=False):
    flops: int | None
    tflops: float | None
    percent_of_peak: float | None
    eager_tflops: float | None
    eager_percent_of_peak: float | None


class EnergySide(TypedDict, total=False):
    """One side's energy (``study.cell.memory_and_energy``): the probe's report (``measurement.power.REPORT_KEYS``)
    and the window's rule and outcome; records before the window was sized by its steps have ``window_min_s``
    (5 s) and none of ``steps`` to ``idle_power_w``."""

    joules_per_inference: float | None
    duration_s: float | None         # the window integrated, step to step of the counter
    steps: int | None                # the counter's steps in it
    power_rel_se: float | None       # the mean power's relative standard error over them (8 samples or more)
    power_rel_ci95: float | None     # its 95 % half-width
    window_stopped_by: str | None    # power_rel_se, steps_max, time_limit, fixed_window
    idle_gaps_s: float | None        # idle gaps among the calls, their energy taken out at idle_power_w
    idle_power_w: float | None


class EnergyBlock(TypedDict, total=False):
    """NVIDIA GPUs: each side's energy (``measurement.power``); absent elsewhere."""

    eager: EnergySide
    compiled: EnergySide
    timed_runs: int


class PhasesBlock(TypedDict, total=False):
    """Seconds inside the kernel (``study.phases``); ``startup_s`` and ``load_s`` where that cell paid them."""

    startup_s: float
    load_s: float
    cell_s: float
    compile_s: float
    warmup_s: float
    timed_s: float
    parity_s: float
    memory_s: float
    flops_s: float
    energy_s: float
    profile_s: float                # why it got faster: both sides profiled


class EnvironmentBlock(TypedDict, total=False):
    """What the cell was measured on (``environment.capture.capture_environment``); the keys a record's identity and the
    report read are typed here, the rest (versions, settings in force) are there."""

    torch_version: str
    cpu_model: str | None
    cpu_count_logical: int | None
    driver_version: str | None
    gpus: list[dict[str, Any]]
    accelerator_type: str | None     # a cluster's declared kind of node; None locally
    cluster_node_id: str | None
    timestamp_utc: str


class ConfigBlock(TypedDict, total=False):
    """How the cell was measured: its settings under their record names (``records.build.measurement_settings``),
    the weights measured (None: nothing was) and the TF32 settings in force."""

    weights: str | None
    weights_requested: str
    runs: int
    warmup: int
    blocks: int | None
    seed: int
    tf32: str
    backend: str
    fullgraph: bool
    dynamic: bool | None
    sync: str
    gpu_memory_gib: float | None
    gpu_memory_fraction: float


class ProfileSide(TypedDict, total=False):
    """One side of a profile, per call (``measurement.work_profile``)."""

    calls: int
    wall_ms: float
    busy_ms: float
    busy_fraction: float | None
    work_calls: float               # kernels (GPU) or operator calls (CPU) per call
    work_unit: str                  # "kernels" or "operator calls"
    compiled_regions: float         # compiled graphs run per call: more than one is a graph break
    kinds_ms: dict[str, float]      # vocabulary.WorkKind -> ms per call


class ProfileBlock(TypedDict, total=False):
    """Why a compiled cell got faster or slower: both sides profiled after the timed runs. Absent where not
    taken: ``profile: false`` (``cell --no-profile``), or a failure, which the record's ``notes`` name.
    ``traces``: the kept traces' file names (``--keep-traces``)."""

    method: str
    activities: str                 # "cpu" or "cpu+cuda"
    eager: ProfileSide
    compiled: ProfileSide
    seconds: float                  # what profiling cost the cell
    traces: dict[str, str] | None


BLOCK_TYPES = {"cell": CellBlock, "latency": LatencyBlock, "throughput": ThroughputBlock, "speedup": SpeedupBlock,
               "compile": CompileBlock, "memory": MemoryBlock, "parity": ParityBlock, "agreement": AgreementBlock,
               "compute": ComputeBlock, "energy": EnergyBlock, "phases": PhasesBlock,
               "environment": EnvironmentBlock, "config": ConfigBlock, "profile": ProfileBlock}


@overload
def block(record: Mapping[str, Any], name: Literal["cell"]) -> CellBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["latency"]) -> LatencyBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["throughput"]) -> ThroughputBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["speedup"]) -> SpeedupBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["compile"]) -> CompileBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["memory"]) -> MemoryBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["parity"]) -> ParityBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["agreement"]) -> AgreementBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["compute"]) -> ComputeBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["energy"]) -> EnergyBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["phases"]) -> PhasesBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["environment"]) -> EnvironmentBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["config"]) -> ConfigBlock: ...
@overload
def block(record: Mapping[str, Any], name: Literal["profile"]) -> ProfileBlock: ...


def block(record: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The record's ``name`` block; ``{}`` where it has none or it is null. A name that is no block is a
    KeyError: a misspelt name must not read as a block that is always empty."""
    if name not in BLOCK_TYPES:
        raise KeyError(f"no record block {name!r}: the blocks are {', '.join(BLOCK_TYPES)}")
    return part(record, name)


def part(parent: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A block inside a block (``compile``'s ``portable_cache``, ``parity``'s ``tolerance``); ``{}`` where
    absent or null."""
    found = parent.get(name)
    return found if isinstance(found, dict) else {}


def eager_memory(record: Mapping[str, Any]) -> MemoryBlock:
    """A compiled cell's eager side's memory (``memory.eager``); ``{}`` where not measured."""
    return part(block(record, "memory"), "eager")  # type: ignore[return-value]


def energy_side(record: Mapping[str, Any], side: Literal["eager", "compiled"]) -> EnergySide:
    """One side's energy (``energy.eager`` or ``energy.compiled``); ``{}`` where not measured."""
    return part(block(record, "energy"), side)  # type: ignore[return-value]


def last_error_line(record: Mapping[str, Any]) -> str | None:
    """The error text's last line (a traceback's exception); None for a record without one."""
    lines = (record.get("error") or "").strip().splitlines()
    return lines[-1] if lines else None


def gpu_name(environment: Mapping[str, Any], device: str) -> str | None:
    """Name of the GPU that ``device`` (such as 'cuda:0') designates, from an environment."""
    if not device.startswith("cuda"):
        return None
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    for gpu in environment.get("gpus") or []:
        if gpu.get("index") == index:
            return gpu.get("name")
    return None
