"""What makes two records the same measurement: the cell's identity, its settings' hash and its environment.

``RecordKey.of`` is the one way a key is made, a record's (``record_key``) and a grid cell's alike, so the two cannot
drift apart; keys are NamedTuples, equal and hashed by their values. No torch, no pandas.
"""

from __future__ import annotations

from dataclasses import Field
import hashlib
import json
import re
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from .schema import CELL_FIELDS, VARIANT_FIELDS, ConfigBlock, EnvironmentBlock, Record
from ..settings import COMPILE, HASHED, WHEN_SET, setting_fields
from ..vocabulary import CompileMode


def cell_file_name(task: str, model: str, batch_size: int, compile_mode: str, variant: tuple[str, ...], dtype: str,
                   device: str) -> str:
    """A file-name-safe name of a cell, unique within a study: its executed notebook's, log's and traces'.
    ``variant``: the identity settings that differ from their defaults (the guide's cells keep their old names)."""
    raw = "__".join((task, model, f"bs{batch_size}", compile_mode, *variant, dtype, device))
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)


class CellIdentity(NamedTuple):
    """A cell, whatever it was measured with or on. ``variant``: the values of ``VARIANT_FIELDS`` in their
    order (a new identity setting joins it with no change here); ``device``: the kind, cpu or cuda."""

    study: str | None     # None: the same cell in any study (``without_study``)
    task: str
    model: str
    batch_size: int | None  # None: any batch size (``without_batch_size``)
    compile_mode: str
    dtype: str
    variant: tuple[str, ...]
    device: str

    @classmethod
    def of_record(cls, record: Record) -> CellIdentity:
        cell = record.cell
        return cls(cell.study, cell.task, cell.model, cell.batch_size, cell.compile_mode, cell.dtype,
                   tuple(getattr(cell, name) for name in VARIANT_FIELDS), cell.device_kind)

    def variant_fields(self) -> dict[str, str]:
        """The variant by name (``{"memory_format": "contiguous", "shapes": "static"}``)."""
        return dict(zip(VARIANT_FIELDS, self.variant))

    def cell_block(self) -> dict[str, Any]:
        """The record's ``cell`` block for this identity, as JSON holds it (what ``records.build.make_record`` takes)."""
        identity = {name: getattr(self, name) for name in CELL_FIELDS}
        return {**identity, **self.variant_fields()}

    def without_study(self) -> CellIdentity:
        return self._replace(study=None)

    def without_replicate(self) -> CellIdentity:
        """The cell whichever of its replicates (``r1`` for all): what a page counts and shows as one row."""
        variant = dict(self.variant_fields(), replicate=VARIANT_FIELDS["replicate"][0])
        return self._replace(variant=tuple(variant.values()))


class RecordKey(NamedTuple):
    """A cell's identity, how it was measured (``settings_hash``) and on what (``environment_key``): the
    same key means the same measurement."""

    identity: CellIdentity
    settings_hash: str
    environment: tuple[Any, ...]

    @classmethod
    def of(cls, identity: CellIdentity, config: ConfigBlock | Mapping[str, Any],
           environment: EnvironmentBlock | Mapping[str, Any]) -> RecordKey:
        """The key of ``identity`` measured with ``config`` on ``environment``: a record's blocks, or the settings
        a grid cell would record and its machine's environment as captured (``environment.capture``)."""
        return cls(identity, settings_hash(config, identity.compile_mode),
                   environment_key(environment, identity.device))

    def without_study(self) -> RecordKey:
        """The same measurement in any study folder (the report keeps one record per such key)."""
        return self._replace(identity=self.identity.without_study())

    def without_settings(self) -> RecordKey:
        """The cell on its machine whatever settings measured it (and whatever study)."""
        return self._replace(identity=self.identity.without_study(), settings_hash="")

    def without_batch_size(self) -> RecordKey:
        """The cells an out-of-memory error ties together: the same but for their batch size."""
        return self._replace(identity=self.identity._replace(batch_size=None))


def latest_per_key(records: Iterable[Record],
                   key: Callable[[RecordKey], Any] = RecordKey.without_study) -> list[Record]:
    """Each measurement's latest record (``key`` of its ``record_key``; by default without the study: a study folder
    is the study), by its environment's timestamp: a cell measured again replaces its earlier record, an error
    included. In time order: where several keys fill one row (``report.frame.latest_records``), the later is last."""
    latest: dict[Any, Record] = {}
    for record in sorted(records, key=lambda record: record.timestamp):
        found = key(record_key(record))
        latest.pop(found, None)  # a record measured again goes where its time puts it, not where its first was
        latest[found] = record
    return list(latest.values())


def latest_per_cell(records: Iterable[Record]) -> list[Record]:
    """Each cell's latest record on each machine (``environment_key``), whatever settings measured it: a cell
    measured again with other settings (a later design, another lease's) replaces its earlier record."""
    return latest_per_key(records, RecordKey.without_settings)


def cell_identity(record: Record) -> CellIdentity:
    return CellIdentity.of_record(record)


def record_key(record: Record) -> RecordKey:
    """A record's key: its cell, its config's settings and its environment."""
    return RecordKey.of(cell_identity(record), record.config, record.environment)


# --- the settings' hash -------------------------------------------------------------

def record_name(item: Field) -> str:
    """A setting's key in a record's ``config``."""
    return item.metadata["record_name"] or item.name


def _record_keys(*kinds: str) -> tuple[str, ...]:
    return tuple(record_name(item) for item in setting_fields() if item.metadata["record"] in kinds)


SETTINGS_KEYS = _record_keys(HASHED, COMPILE)
COMPILE_SETTINGS = _record_keys(COMPILE)  # no part of an eager cell's measurement
# settings that enter the hash only where set: the records written before them keep their keys
OPTIONAL_SETTINGS = _record_keys(WHEN_SET)


def settings_hash(config: ConfigBlock | Mapping[str, Any], compile_mode: str) -> str:
    """A short hash of the settings that change a cell's measurement (a record's config, or the settings a cell
    would record): change one, and the cell is another cell (measured again on resume, shown apart in reports)."""
    value = config.read if isinstance(config, ConfigBlock) else config.get
    settings = {key: _number(value(key)) for key in SETTINGS_KEYS
                if not (compile_mode == CompileMode.EAGER and key in COMPILE_SETTINGS)}
    settings.update({key: _number(value(key)) for key in OPTIONAL_SETTINGS if value(key) is not None})
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:12]


def _number(value: Any) -> Any:
    # a setting of 16 is 16 however it was read: a grid says 16, a record's typed field holds 16.0
    return int(value) if isinstance(value, float) and value.is_integer() else value


def warmed_up_as_its_eager_cell(timed_warmup: Any, cell_warmup: Any) -> bool:
    """Whether the eager side of a compiled cell's pairs, warmed up ``timed_warmup`` calls, stands for the eager
    cell set to ``cell_warmup``: only where they are the same (a CUDA-graph mode warms up at least twice,
    ``variants.cell_plan``, which an eager cell set to once is not)."""
    return timed_warmup == cell_warmup


def eager_side_stands_for_its_cell(record: Record) -> bool:
    """Whether a compiled cell's record measured its eager cell too, as the eager side of its pairs: an ``ok``
    compiled record with eager's figures, warmed up as the eager cell (``warmed_up_as_its_eager_cell``)."""
    return (record.ok and record.compiled and record.speedup is not None
            and bool(record.speedup.eager_mean_ms) and record.latency is not None
            and warmed_up_as_its_eager_cell(record.latency.warmup, record.config.warmup))


def measured_as_eager_side(record: Record) -> bool:
    """Whether an eager cell's record holds a compiled cell's eager side (one measurement, two records; its
    ``shared_measurement`` says which): its runs were timed, and paid for, in that cell."""
    return record.shared_measurement is not None


def eager_side_key(record: Record) -> RecordKey | None:
    """The key of the eager cell a compiled cell's record measured too, as the eager side of its pairs (the
    same settings, static shapes: eager compiles nothing; ``eager_side_stands_for_its_cell``); None for any
    other record. Resume counts that eager cell as measured, and the report shows its figures from this
    record, where no record of its own exists (a time limit stopped the kernel before it)."""
    if not eager_side_stands_for_its_cell(record):
        return None
    identity = cell_identity(record)._replace(compile_mode=CompileMode.EAGER.value)
    variant = dict(identity.variant_fields(), shapes=VARIANT_FIELDS["shapes"][0])
    identity = identity._replace(variant=tuple(variant.values()))
    return RecordKey.of(identity, record.config, record.environment)


def as_environment(environment: EnvironmentBlock | Mapping[str, Any]) -> EnvironmentBlock:
    """A record's environment block, or a machine's environment as captured (``environment.capture``) as one."""
    if isinstance(environment, EnvironmentBlock):
        return environment
    return EnvironmentBlock.model_validate(environment, strict=True)


def environment_key(environment: EnvironmentBlock | Mapping[str, Any], kind: str) -> tuple[Any, ...]:
    """What a cell's identity takes from the environment: the torch version, the processor, and the host fact that
    changes latency on it (the GPU driver; the CPU's core count, and a cluster's declared accelerator type)."""
    environment = as_environment(environment)
    if kind == "cuda":
        return environment.torch_version, environment.gpu_name("cuda:0"), environment.driver_version
    return (environment.torch_version, environment.cpu_model, environment.cpu_count_logical,
            environment.accelerator_type)
