"""Why a compiled cell lost to eager, read from its profile, and which remedies (variants of the slow cell) that
points to; the rules, their thresholds' evidence and their remedies are tabled in docs/diagnosis.md. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from ..records.schema import ProfileBlock, ProfileSide
from ..vocabulary import CompileMode, InductorConfig, MemoryFormat, WorkKind

HOST_BOUND_BUSY = 0.5   # below this share of the call in kernels, the host's launches set the pace
SLOWER = 1.1            # a kind of work this many times eager's (or the work it replaced) got slower
REPLACED_KINDS = (WorkKind.ELEMENTWISE, WorkKind.NORMALIZATION, WorkKind.COPY_LAYOUT)

# ``diagnose``'s remedies are measured as a study of this name's (the slow cell's study and this suffix): a remedy
# that loses too is its slow cell's verdict, not a slow cell of its own to diagnose again.
REMEDY_STUDY_SUFFIX = "-diagnosis"

HOST_BOUND, MATMUL_CONV_UP, FUSION_COSTLY, NO_PROFILE = "host-bound", "matmul-conv-up", "fusion-costly", "no-profile"
RULES = (HOST_BOUND, MATMUL_CONV_UP, FUSION_COSTLY, NO_PROFILE)


@dataclass(frozen=True)
class Variant:
    """A configuration of a cell: its compile mode, memory format and Inductor configuration."""

    compile_mode: str
    memory_format: str = MemoryFormat.CONTIGUOUS.value
    inductor: str = InductorConfig.DEFAULT.value


@dataclass(frozen=True)
class Remedy:
    """A variant worth measuring against eager, and the rule that chose it."""

    rule: str
    variant: Variant


def _kinds(side: ProfileSide) -> dict[str, float]:
    return {kind: float(value or 0.0) for kind, value in (side.kinds_ms or {}).items()}


def rules_fired(profile: ProfileBlock | None) -> list[str]:
    """The rules a compiled cell's profile fires, in ``RULES``' order (``NO_PROFILE`` where none does)."""
    eager, compiled = (profile.eager, profile.compiled) if profile else (None, None)
    if eager is None or compiled is None:
        return [NO_PROFILE]
    fired = []
    busy = compiled.busy_fraction
    if busy is not None and not math.isnan(busy) and busy < HOST_BOUND_BUSY:
        fired.append(HOST_BOUND)
    before, after = _kinds(eager), _kinds(compiled)
    if after.get(WorkKind.MATMUL_CONV, 0.0) > SLOWER * before.get(WorkKind.MATMUL_CONV, 0.0) > 0:
        fired.append(MATMUL_CONV_UP)
    replaced = sum(before.get(kind, 0.0) - after.get(kind, 0.0) for kind in REPLACED_KINDS)
    if after.get(WorkKind.FUSED, 0.0) > SLOWER * max(replaced, 0.0) and after.get(WorkKind.FUSED, 0.0) > 0:
        fired.append(FUSION_COSTLY)
    return fired or [NO_PROFILE]


def _candidates(rule: str, cell: Variant, cuda: bool) -> list[Variant]:
    if rule == HOST_BOUND:
        graphs = [Variant(CompileMode.REDUCE_OVERHEAD.value, cell.memory_format, cell.inductor)] if cuda else []
        return graphs + [Variant(cell.compile_mode, cell.memory_format, InductorConfig.FREEZING.value)]
    if rule == MATMUL_CONV_UP:
        return [Variant(cell.compile_mode, cell.memory_format, InductorConfig.NO_LAYOUT_OPTIMIZATION.value),
                Variant(cell.compile_mode, MemoryFormat.CHANNELS_LAST.value, cell.inductor),
                Variant(CompileMode.MAX_AUTOTUNE_NO_CUDAGRAPHS.value, cell.memory_format, cell.inductor)]
    if rule == FUSION_COSTLY:
        return [Variant(CompileMode.MAX_AUTOTUNE_NO_CUDAGRAPHS.value, cell.memory_format, cell.inductor)]
    return [Variant(cell.compile_mode, cell.memory_format, InductorConfig.FREEZING.value),
            Variant(CompileMode.MAX_AUTOTUNE_NO_CUDAGRAPHS.value, cell.memory_format, cell.inductor)]


def remedies(profile: ProfileBlock | None, cell: Variant, cuda: bool) -> list[Remedy]:
    """The variants a slow cell's profile points to, each once (the first rule that chose it), none the cell
    itself."""
    chosen: dict[Variant, str] = {}
    for rule in rules_fired(profile):
        for variant in _candidates(rule, cell, cuda):
            if variant != cell:
                chosen.setdefault(variant, rule)
    return [Remedy(rule, variant) for variant, rule in chosen.items()]


def needs_inductor(variant: Variant) -> bool:
    """A remedy only the inductor backend can measure: a compile mode other than ``default`` (torch.compile's modes
    are Inductor's) or an Inductor configuration."""
    return variant.compile_mode not in (CompileMode.EAGER, CompileMode.DEFAULT) or variant.inductor != InductorConfig.DEFAULT


def measurable(chosen: list[Remedy], backend: str | None) -> tuple[list[Remedy], list[Remedy]]:
    """``chosen`` split into the remedies a study compiled with ``backend`` (None: inductor, the default) can
    measure and those it cannot (``needs_inductor``)."""
    if backend in (None, "inductor"):
        return list(chosen), []
    return ([remedy for remedy in chosen if not needs_inductor(remedy.variant)],
            [remedy for remedy in chosen if needs_inductor(remedy.variant)])


def diagnosable(*, compile_mode: str, memory_format: str, shapes: str, inductor: str, study: str,
                speedup: float | None, interval: tuple[float, float] | None) -> bool:
    """A compiled cell ``diagnose`` measures remedies for and the report sets them beside: of the guide's kind
    (contiguous, static shapes, Inductor's default configuration), no remedy itself (its study not
    ``REMEDY_STUDY_SUFFIX``'s: a remedy that loses too is its slow cell's verdict), and slower (``is_slower``)."""
    return (compile_mode != CompileMode.EAGER and memory_format == MemoryFormat.CONTIGUOUS and shapes == "static"
            and inductor == InductorConfig.DEFAULT and not str(study).endswith(REMEDY_STUDY_SUFFIX)
            and is_slower(speedup, interval))


def is_slower(speedup: float | None, interval: tuple[float, float] | None) -> bool:
    """A compiled cell worth diagnosing: its speed-up's interval lies below 1 or includes it (no interval: the
    speed-up itself below 1)."""
    if interval is None or any(value is None or math.isnan(value) for value in interval):
        return speedup is not None and not math.isnan(speedup) and speedup < 1.0
    return interval[0] <= 1.0
