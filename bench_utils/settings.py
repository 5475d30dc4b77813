"""How a cell is measured: one ``Settings`` type, from which the grid, notebooks, CLI and records derive theirs.

Each field carries its default, its help text, where a grid file may give it (``grid``), its check, and
how a record keeps it (``record``). The grid file's keys and their types, the kernel groups, the task
notebooks' ``settings`` parameter, the ``cell`` command's flags and a record's ``config`` and its hash
all come from these fields: adding a setting is one field here, plus its use.

``grid``: ``TOP`` (a grid file's top level), ``ANYWHERE`` (top level, or a sub-grid for its cells),
``AXIS`` (a sub-grid's list under the plural name: each value is a cell of its own, part of the cell's
identity), or None (not a grid key).
``record``: ``HASHED`` (in the config and its hash: change it, and the cell is another cell),
``COMPILE`` (hashed for compiled cells only), ``WHEN_SET`` (hashed only where not None: the records
written before the setting existed keep their hashes), ``IDENTITY`` (the cell's variant, not in the
config) or None (the record says what it did elsewhere).
"""

from __future__ import annotations

from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import Any, Callable, Mapping

from .errors import UserError
from .parameters import one_of, quoted
from .vocabulary import (MAX_REPLICATES, InductorConfig, MemoryFormat, Replicate, Shapes, Sync, Tf32Policy, Weights,
                         check_inductor_config, check_memory_format, check_replicate, check_shapes, names, tf32_policy)

TOP, ANYWHERE, AXIS = "top", "anywhere", "axis"
HASHED, COMPILE, WHEN_SET, IDENTITY = "hashed", "compile", "when-set", "identity"
DEFAULT_BLOCKS = 30  # pairs of blocks where none are given, or runs if fewer
# fresh processes a GPU cell's runs are split over where a grid says nothing: the spread between processes is
# larger than one run's interval there (docs/measurement.md, "Between runs"); a CPU study measures once
GPU_REPLICATES = 3


def _at_least(value: int, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"must be an integer, got {quoted(value)}")
    if value < least:
        raise UserError(f"must be >= {least}, got {value}")
    return value


def _positive(value: int) -> int:
    return _at_least(value, 1)


def _non_negative(value: int) -> int:
    return _at_least(value, 0)


def _optional_positive(value: int | None) -> int | None:
    return None if value is None else _positive(value)


def _weights(value: str) -> str:
    if value not in names(Weights):
        raise UserError(f"unknown weights {quoted(value)}: use one of {', '.join(Weights)}")
    return str(value)


def _text(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"must be a non-empty string, got {quoted(value)}")
    return value


def _flag(value: bool) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"must be true or false, got {quoted(value)}")
    return value


def _optional_flag(value: bool | None) -> bool | None:
    return None if value is None else _flag(value)


def _gpu_memory_gib(value: float | None) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise UserError(f"must be a positive number of GiB (a 16 GB card: 16), got {quoted(value)}")
    return value


def _replicates(value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPLICATES):
        raise UserError(f"must be an integer from 1 to {MAX_REPLICATES} (None: {GPU_REPLICATES} on a GPU, 1 on a CPU), "
                        f"got {quoted(value)}")
    return value


def setting(default: Any, help: str, *, check: Callable[[Any], Any], accepts: type | tuple[type, ...],
            grid: str | None = ANYWHERE, record: str | None = HASHED, record_name: str | None = None,
            choices: tuple[str, ...] | None = None, plural: str | None = None, flag: bool = True) -> Any:
    """A ``Settings`` field: its default and what the rest of the package derives from it.

    ``accepts``: the types a grid file or a notebook may give; ``choices``: the names the ``cell``
    command offers; ``plural``: an ``AXIS`` setting's sub-grid key; ``record_name``: its key in a
    record's config where that differs from the field's name; ``flag``: the ``cell`` command offers it (a setting a
    grid resolves across cells, such as replicates, is no flag of one cell).
    """
    return field(default=default, metadata={
        "help": help, "check": check, "accepts": accepts, "grid": grid, "record": record,
        "record_name": record_name, "choices": choices, "plural": plural, "flag": flag})


@dataclass(frozen=True)
class Settings:
    """Every setting of a measurement beyond the cell's model, batch size, compile mode, dtype and device."""

    runs: int = setting(300, "timed runs per cell, after warm-up (the guide: 300)", check=_positive, accepts=int)
    warmup: int = setting(10, "untimed warm-up calls (the first call, which compiles, is timed apart)",
                          check=_non_negative, accepts=int)
    blocks: int | None = setting(None, f"pairs of eager/compiled blocks of a compiled cell (None: {DEFAULT_BLOCKS}, "
                                 "or runs if fewer)", check=_optional_positive, accepts=(int, type(None)))
    weights: str = setting(Weights.RANDOM.value, "random (offline, the checkpoint's architecture), pretrained or "
                           "auto", check=_weights, accepts=str, grid=TOP, record_name="weights_requested",
                           choices=names(Weights))
    seed: int = setting(0, "seed of the random weights and inputs", check=_non_negative, accepts=int, grid=TOP)
    tf32: str = setting(Tf32Policy.DEFAULT.value, "float32 TF32 policy: default (PyTorch's: cuDNN TF32 on, matmul "
                        "off, as the guide ran), strict (none) or on (both)",
                        check=lambda value: str(tf32_policy(value)), accepts=(str, bool), grid=TOP,
                        choices=names(Tf32Policy))
    backend: str = setting("inductor", "torch.compile backend", check=_text, accepts=str, grid=TOP, record=COMPILE)
    fullgraph: bool = setting(False, "torch.compile's fullgraph", check=_flag, accepts=bool, grid=TOP,
                              record=COMPILE)
    dynamic: bool | None = setting(None, "torch.compile's dynamic: None, True or False", check=_optional_flag,
                                   accepts=(bool, type(None)), grid=TOP, record=COMPILE)
    memory_format: str = setting(MemoryFormat.CONTIGUOUS.value, "contiguous, or channels_last (model and images; "
                                 "eager too)", check=lambda value: str(check_memory_format(value)), accepts=str,
                                 grid=AXIS, plural="memory_formats", record=IDENTITY, choices=names(MemoryFormat))
    shapes: str = setting(Shapes.STATIC.value, "static (a compilation per batch size) or dynamic (one for all, the "
                          "batch marked dynamic)", check=lambda value: str(check_shapes(value)), accepts=str,
                          grid=AXIS, plural="shapes", record=IDENTITY, choices=names(Shapes))
    inductor: str = setting(InductorConfig.DEFAULT.value, "an Inductor configuration beyond the mode's: default, "
                            "freezing (the weights folded in as constants, inference's) or no-layout-optimization "
                            "(convolutions keep the model's layout)", check=lambda value: str(check_inductor_config(value)),
                            accepts=str, grid=AXIS, plural="inductor_configs", record=IDENTITY,
                            choices=names(InductorConfig))
    replicates: int | None = setting(None, f"fresh processes (kernels) a cell's runs and pairs are split over, so that "
                                     f"its interval includes the spread between runs (None: {GPU_REPLICATES} on a GPU, "
                                     "1 on a CPU)", check=_replicates, accepts=(int, type(None)),
                                     record=WHEN_SET, flag=False)
    remeasure_unsteady: bool | None = setting(None, "measure a compiled cell whose block means changed regime once more, "
                                              "after the grid, as one more replicate (None: on a GPU, not on a CPU)",
                                              check=_optional_flag, accepts=(bool, type(None)), grid=TOP, record=None,
                                              flag=False)
    replicate: str = setting(Replicate.R1.value, "which of the cell's replicates this is (r1: the first, or the only "
                             "one); the grid sets it", check=lambda value: str(check_replicate(value)), accepts=str,
                             grid=None, record=IDENTITY, choices=names(Replicate), flag=False)
    portable_cache: bool = setting(False, "also time a fresh process started from the saved compile cache (once "
                                   "per model and mode)", check=_flag, accepts=bool, record=None)
    sync: str = setting(Sync.PER_CALL.value, "how a timed call is bracketed on a GPU: per-call (each from an idle "
                        "device: a request's latency) or pipelined (one wait after the loop: throughput)",
                        check=lambda value: one_of("sync", value, names(Sync)), accepts=str,
                        choices=names(Sync))
    profile: bool = setting(True, "profile eager and compiled for a few calls after the timed runs: why it got "
                            "faster (the record's profile block)", check=_flag, accepts=bool, grid=TOP, record=None)
    keep_traces: bool = setting(False, "keep one profiled call's full trace per side in the study folder's traces/ "
                                "(Perfetto, TensorBoard)", check=_flag, accepts=bool, grid=TOP, record=None)
    gpu_memory_gib: float | None = setting(None, "CUDA: the GPU memory a cell may use, in GiB (a 16 GB card: 16); "
                                           "None: the whole card", check=_gpu_memory_gib,
                                           accepts=(int, float, type(None)), grid=TOP, record=WHEN_SET)

    @classmethod
    def from_parameters(cls, values: Mapping[str, Any]) -> Settings:
        """Settings from a mapping of field names (a notebook's ``settings``, a grid's), checked; a name
        that is no setting is a TypeError naming the valid ones."""
        unknown = sorted(set(values) - set(setting_names()))
        if unknown:
            raise TypeError(f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                            f"the settings are {', '.join(setting_names())}")
        return cls(**values).checked()

    def checked(self) -> Settings:
        """These settings, each checked and normalized (TF32 booleans as policy names); UserError
        naming the setting."""
        values = {}
        for item in fields(self):
            try:
                values[item.name] = item.metadata["check"](getattr(self, item.name))
            except UserError as exc:
                raise UserError(f"{item.name}: {exc}") from None
        return replace(self, **values)

    def to_parameters(self) -> dict[str, Any]:
        return asdict(self)

    def with_blocks(self) -> Settings:
        """``blocks`` given: as is; else the default, or ``runs`` where fewer."""
        return self if self.blocks is not None else replace(self, blocks=min(DEFAULT_BLOCKS, self.runs))

    def variant_fields(self) -> dict[str, Any]:
        """The settings that are part of a cell's identity (``IDENTITY``) by name, in field order: what a
        record's ``cell`` block carries beside the cell's model, batch size, mode, dtype and device."""
        return {item.name: getattr(self, item.name) for item in fields(self) if item.metadata["record"] == IDENTITY}

    def variant_values(self) -> tuple[Any, ...]:
        """The values of ``variant_fields``, in field order."""
        return tuple(self.variant_fields().values())

    def variant(self) -> tuple[Any, ...]:
        """The identity settings that differ from their defaults: what sets a cell apart from the guide's."""
        return tuple(getattr(self, item.name) for item in fields(self)
                     if item.metadata["record"] == IDENTITY and getattr(self, item.name) != item.default)


def setting_fields() -> tuple[Field, ...]:
    return fields(Settings)


def setting_names() -> tuple[str, ...]:
    return tuple(item.name for item in fields(Settings))

