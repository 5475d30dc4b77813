"""Reading a record's blocks, one way for any record of the schema (``records.schema`` types them).

``block(record, name)`` reads a block as its type, ``{}`` where the record has none or it is null (a failed cell has
no latency) and a KeyError for a name that is no block; ``part`` reads a block inside a block the same way;
``eager_memory`` and ``energy_side`` a compiled cell's eager side; ``last_error_line`` the error's exception;
``gpu_name`` the GPU a device names. Nothing here imports torch, pandas or pydantic.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, overload

from .schema import (BLOCK_TYPES, AgreementBlock, CellBlock, CompileBlock, ComputeBlock, ConfigBlock, EnergyBlock,
                     EnergySide, EnvironmentBlock, LatencyBlock, MemoryBlock, ParityBlock, PhasesBlock, ProfileBlock,
                     SpeedupBlock, ThroughputBlock)


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
