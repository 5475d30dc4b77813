"""The study's names (compile modes, statuses, shapes, memory formats, TF32 policies, dtypes), without torch.

Each is a ``StrEnum``: a member is its string (``CompileMode.EAGER == "eager"``, JSON writes ``"eager"``), so
records, grid files and notebooks keep plain strings while code names the values.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import UserError
from .parameters import one_of


class CompileMode(StrEnum):
    """How a cell's model runs: eager, a torch.compile mode, or an AOTInductor package."""

    EAGER = "eager"
    DEFAULT = "default"
    REDUCE_OVERHEAD = "reduce-overhead"
    MAX_AUTOTUNE = "max-autotune"
    MAX_AUTOTUNE_NO_CUDAGRAPHS = "max-autotune-no-cudagraphs"
    AOT_INDUCTOR = "aot-inductor"


# torch.compile backends torch always has: a grid naming one is checked without importing torch's list of them.
BUILT_IN_BACKENDS = ("inductor", "eager", "aot_eager")
# Built ahead of time (torch.export, then AOTInductor), not by torch.compile.
AOT_MODES = (CompileMode.AOT_INDUCTOR,)
# Their compiled model replays CUDA graphs: outputs live in buffers the next call overwrites.
CUDA_GRAPH_MODES = (CompileMode.REDUCE_OVERHEAD, CompileMode.MAX_AUTOTUNE)
# The order of modes in tables and plots: the guide's first, eager (the baseline) apart.
COMPILED_MODE_ORDER = tuple(mode for mode in CompileMode if mode != CompileMode.EAGER)


class Sync(StrEnum):
    """How each timed call is bracketed on a GPU."""

    PER_CALL = "per-call"    # each call from an idle device: one request's latency (the default)
    PIPELINED = "pipelined"  # one wait after the loop: the host runs ahead, throughput-like figures


class Weights(StrEnum):
    """Where a model's weights come from."""

    RANDOM = "random"           # offline: the checkpoint's architecture, seeded random weights
    PRETRAINED = "pretrained"   # downloaded (or cached)
    AUTO = "auto"               # pretrained where available, else random


class Status(StrEnum):
    """What became of a cell."""

    OK = "ok"
    OOM = "oom"          # out of memory: the larger batches of its mode are skipped
    ERROR = "error"
    SKIPPED = "skipped"  # not run: a smaller batch of its mode ran out of memory


# A cell with one of these is done: a resumed run measures it no more.
DONE_STATUSES = (Status.OK, Status.OOM)


class Shapes(StrEnum):
    """How a compiled cell treats the batch dimension."""

    STATIC = "static"
    DYNAMIC = "dynamic"   # one compilation for every batch size


class Replicate(StrEnum):
    """Which of a cell's replicates (fresh processes over which its runs are split) a record is: r1 is the first,
    or the only one (so that a cell measured once keeps its name)."""

    R1 = "r1"
    R2 = "r2"
    R3 = "r3"
    R4 = "r4"
    R5 = "r5"
    R6 = "r6"
    R7 = "r7"
    R8 = "r8"
    R9 = "r9"

    @property
    def number(self) -> int:
        """1 for ``r1``, 2 for ``r2``..."""
        return int(self.value[1:])


MAX_REPLICATES = len(Replicate)


class MemoryFormat(StrEnum):
    """The layout of the model's weights and inputs."""

    CONTIGUOUS = "contiguous"
    CHANNELS_LAST = "channels_last"


class InductorConfig(StrEnum):
    """An Inductor configuration beyond the compile mode's: remedies for a cell that compile made slower."""

    DEFAULT = "default"
    FREEZING = "freezing"                              # weights folded in as constants (inference only)
    NO_LAYOUT_OPTIMIZATION = "no-layout-optimization"  # convolutions keep the model's layout


# Inductor's config options each one sets (``torch._inductor.config``; ``variants.inductor_config`` applies them).
INDUCTOR_OPTIONS = {InductorConfig.DEFAULT: {}, InductorConfig.FREEZING: {"freezing": True},
                    InductorConfig.NO_LAYOUT_OPTIMIZATION: {"layout_optimization": False}}


class Tf32Policy(StrEnum):
    """Whether float32 matrix products and convolutions may use TF32 on CUDA."""

    DEFAULT = "default"   # PyTorch's defaults, as the guide ran: matmul off, cuDNN on
    STRICT = "strict"     # both off
    ON = "on"             # both on


# (matmul, cuDNN convolutions) may use TF32, per policy
TF32_SWITCHES = {Tf32Policy.DEFAULT: (False, True), Tf32Policy.STRICT: (False, False), Tf32Policy.ON: (True, True)}


class DType(StrEnum):
    """The floating-point type a cell measures in."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"


class WorkKind(StrEnum):
    """What a call's time went to, as its profile sorts it (``measurement.work_profile``), in the report's order."""

    MATMUL_CONV = "matmul_conv"      # matrix products and convolutions (Inductor's GEMM templates too)
    ATTENTION = "attention"          # attention kernels and softmax
    NORMALIZATION = "normalization"  # layer, batch and group norms
    ELEMENTWISE = "elementwise"      # element-wise operators and reductions, one launch each
    FUSED = "fused"                  # Inductor-generated kernels: element-wise work fused into one
    COPY_LAYOUT = "copy_layout"      # copies, layout changes, concatenation, memsets
    OTHER = "other"


DTYPE_ALIASES = {"fp32": DType.FLOAT32, "float": DType.FLOAT32, "fp16": DType.FLOAT16, "half": DType.FLOAT16,
                 "bf16": DType.BFLOAT16}


def names(kind: type[StrEnum]) -> tuple[str, ...]:
    """The plain strings of an enum's members (argparse's ``choices=`` shows them in its errors)."""
    return tuple(member.value for member in kind)


def check_mode(mode: str) -> CompileMode:
    return CompileMode(one_of("compile mode", mode, names(CompileMode)))


def check_shapes(name: str) -> Shapes:
    return Shapes(one_of("shapes", name, names(Shapes)))


def check_replicate(name: str) -> Replicate:
    return Replicate(one_of("replicate", name, names(Replicate)))


def check_inductor_config(name: str) -> InductorConfig:
    return InductorConfig(one_of("inductor configuration", name, names(InductorConfig)))


def check_memory_format(name: str) -> MemoryFormat:
    return MemoryFormat(one_of("memory format", name, names(MemoryFormat)))


def dtype_name(value: str) -> DType:
    """The dtype's name from a name or an alias (``fp16``, ``half``); UserError, in one line, else."""
    name = DTYPE_ALIASES.get(str(value).lower(), str(value).lower())
    if name not in tuple(DType):
        valid = ", ".join([*DType, *DTYPE_ALIASES])
        raise UserError(f"unknown dtype {value!r}: use one of {valid}")
    return DType(name)


def tf32_policy(value: str | bool) -> Tf32Policy:
    """The policy's name (``True``/``False`` as ``on``/``strict``); UserError, in one line, else."""
    if isinstance(value, bool):
        return Tf32Policy.ON if value else Tf32Policy.STRICT
    if value not in tuple(Tf32Policy):
        raise UserError(f"unknown tf32 policy {value!r}: use one of {', '.join(Tf32Policy)} "
                        "(default: PyTorch's defaults, as the guide ran)")
    return Tf32Policy(value)
