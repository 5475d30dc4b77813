"""The record, typed: a ``Record`` of immutable blocks (``records.blocks``) that reads and writes its JSON
(docs/records.md, "A typed, immutable record"). Nothing here imports torch or pandas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping

from annotated_types import Ge, Len
from pydantic import Field, PrivateAttr, ValidationError

from .blocks import (Block, CellBlock, LatencyBlock, ThroughputBlock, BlockClock, SwitchCalls, BlockClocks,
                     SpeedupBlock, AotFreshProcess, AotBlock, PortableCacheBlock, BatchShapesBlock,
                     CompileBlock, MemoryBlock, ToleranceBlock, ParityBlock, AgreementBlock, ComputeBlock,
                     EnergySide, EnergyBlock, PhasesBlock, ProfileSide,
                     ProfileBlock, SharedMeasurementBlock)
from .measured_on import ConfigBlock, EnvironmentBlock, GpuEntry, ModelBlock
from .check import InvalidRecord, consistency_problem, error_reason, rules_problem
from .upgrade import upgrade
from .value_types import CELL_FIELDS, VARIANT_FIELDS

SCHEMA_VERSION = 3  # what each version changed: ``records.upgrade``
Status = Literal["ok", "oom", "error", "skipped"]  # vocabulary.Status's names (tests check they agree)
__all__ = ["SCHEMA_VERSION", "CELL_FIELDS", "VARIANT_FIELDS", "Record", "problem", "BLOCK_TYPES",
           "InvalidRecord", "Block", "CellBlock", "LatencyBlock", "ThroughputBlock", "BlockClock",
           "SwitchCalls", "BlockClocks", "SpeedupBlock", "AotFreshProcess", "AotBlock", "PortableCacheBlock",
           "BatchShapesBlock", "CompileBlock", "MemoryBlock", "ToleranceBlock", "ParityBlock", "AgreementBlock",
           "ComputeBlock", "EnergySide", "EnergyBlock", "PhasesBlock", "GpuEntry", "EnvironmentBlock",
           "ConfigBlock", "ProfileSide", "ProfileBlock", "ModelBlock", "SharedMeasurementBlock"]


class Record(Block):
    """A whole record: its blocks (``records.blocks``) under their names. ``from_json`` reads any version the schema had,
    ``to_json`` writes this one; ``origin`` is the file and line it was read from (None: built here)."""

    schema_version: Literal[3]
    record_id: Annotated[str, Len(1, 64)]
    cell: CellBlock
    status: Status
    error: str | None = None
    config: ConfigBlock = Field(default_factory=ConfigBlock)
    latency: LatencyBlock | None = None
    throughput: ThroughputBlock | None = None
    memory: MemoryBlock | None = None
    compile: CompileBlock | None = None
    environment: EnvironmentBlock
    speedup: SpeedupBlock | None = None
    parity: ParityBlock | None = None
    agreement: AgreementBlock | None = None
    compute: ComputeBlock | None = None
    energy: EnergyBlock | None = None
    phases: PhasesBlock | None = None
    profile: ProfileBlock | None = None
    model: ModelBlock | None = None
    shared_measurement: SharedMeasurementBlock | None = None
    skipped_after_oom: Annotated[int, Ge(1)] | None = None  # a smaller batch of its group ran out of memory
    log: str | None = None  # a cell its kernel did not record: the kernel's log, a file of the study folder

    _origin: tuple[str, int] | None = PrivateAttr(default=None)

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """The record ``data`` (a JSON object of any schema version) holds, lifted and checked; ``InvalidRecord``
        (a ValueError) naming the first field that fails, and what it holds."""
        if not isinstance(data, Mapping):
            raise InvalidRecord(f"a record must be a JSON object, got {type(data).__name__}")
        try:
            record = upgrade(dict(data), SCHEMA_VERSION)
        except ValueError as exc:
            raise InvalidRecord(str(exc)) from None
        reason = rules_problem(record)
        if reason:
            raise InvalidRecord(reason)
        try:
            result = cls.model_validate(record, strict=True)
        except ValidationError as exc:
            raise InvalidRecord(error_reason(exc.errors(include_url=False)[0])) from None
        reason = consistency_problem(result)
        if reason:
            raise InvalidRecord(reason)
        return result

    @classmethod
    def of(cls, record: Record | Mapping[str, Any]) -> Record:
        """``record`` as a ``Record``: itself, or the JSON object read (``from_json``)."""
        return record if isinstance(record, Record) else cls.from_json(record)

    def read_from(self, source: str, line: int) -> Record:
        """This record, saying the file and line it was read from."""
        self._origin = (source, line)
        return self

    @property
    def origin(self) -> tuple[str, int] | None:
        return self._origin

    def __eq__(self, other: object) -> bool:
        """The same record whatever file it was read from (its ``origin``)."""
        return isinstance(other, Record) and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]  # its blocks hold lists

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def compiled(self) -> bool:
        """A compiled cell (any mode but eager)."""
        return self.cell.compile_mode != "eager"

    @property
    def error_line(self) -> str | None:
        """The error text's last line (a traceback's exception); None for a record without one."""
        lines = (self.error or "").strip().splitlines()
        return lines[-1] if lines else None

    @property
    def gpu_name(self) -> str | None:
        """The GPU the cell ran on, by the environment's list; None on a CPU."""
        return self.environment.gpu_name(self.cell.device)

    @property
    def timestamp(self) -> str:
        return self.environment.timestamp_utc or ""

    def value_at(self, dotted: str) -> Any:
        """The value at a dotted path of the record as JSON holds it (``environment.git_commit``: what a
        correction names); None where there is none."""
        value: Any = self.to_json()
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value


def problem(data: Any) -> str | None:
    """Why ``data`` is no record of the schema (``Record.from_json``'s reason: its first such field), or None."""
    try:
        Record.from_json(data)
    except InvalidRecord as exc:
        return str(exc)
    return None


BLOCK_TYPES: dict[str, type[Block]] = {
    "cell": CellBlock, "latency": LatencyBlock, "throughput": ThroughputBlock, "speedup": SpeedupBlock,
    "compile": CompileBlock, "memory": MemoryBlock, "parity": ParityBlock, "agreement": AgreementBlock,
    "compute": ComputeBlock, "energy": EnergyBlock, "phases": PhasesBlock, "environment": EnvironmentBlock,
    "config": ConfigBlock, "profile": ProfileBlock, "model": ModelBlock, "shared_measurement": SharedMeasurementBlock}
