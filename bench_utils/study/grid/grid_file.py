"""Study grids: a YAML file validated, then expanded into cells (the keys: ``docs/study.md``, "Grid files").

Eager cells are always ``static`` (nothing compiles); ``aot-inductor`` packages are exported at fixed shapes, so
``dynamic`` applies to the torch.compile modes only. Each mistake is a one-line ``GridError`` naming file and key.
"""

from __future__ import annotations

import hashlib

from dataclasses import dataclass, field, replace
import itertools
import os
from pathlib import Path
import re
from typing import Any

from ...errors import UserError
from ...records.schema import CELL_FIELDS
from ...records.key import CellIdentity, cell_file_name
from ...parameters import quoted
from ...settings import ANYWHERE, AXIS, DEFAULT_BLOCKS, GPU_REPLICATES, TOP, Settings, setting_fields
from ...vocabulary import (AOT_MODES, BUILT_IN_BACKENDS, CompileMode, InductorConfig, Replicate, Shapes, check_mode,
                           dtype_name)
from ...zoo.registry import TASKS, resolve_key
from .checks import (GridError, check_accelerators, check_devices, check_timm, check_type, checked_names, fail,
                          non_empty, unknown_keys)
from .yaml_reading import GridFileError, read_yaml

# The keys of a grid file: the study's own, then each setting where it may be given (``settings``).
STUDY_KEYS = {"study": str, "description": str, "devices": list, "grids": list, "accelerators": list}
SUBGRID_KEYS = {"models": list, "batch_sizes": list, "compile_modes": list, "dtypes": list, "task": str}
TOP_LEVEL = {**STUDY_KEYS, **{item.name: item.metadata["accepts"] for item in setting_fields()
                              if item.metadata["grid"] in (TOP, ANYWHERE)}}
GRID_KEYS = {**SUBGRID_KEYS,
             **{item.name: item.metadata["accepts"] for item in setting_fields() if item.metadata["grid"] == ANYWHERE},
             **{item.metadata["plural"]: list for item in setting_fields() if item.metadata["grid"] == AXIS}}
REQUIRED_GRID_KEYS = ("models", "batch_sizes", "compile_modes")
NOTEBOOKS = {"image-classification": "classification.ipynb",
             "image-segmentation": "segmentation.ipynb",
             "object-detection": "detection.ipynb"}
STUDY_NAME_LENGTH = 100  # it names a folder, and file names are built from it
_STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}$" % (STUDY_NAME_LENGTH - 1))
GRID_COPY = "grid.yaml"  # the grid a study folder was last run from, kept beside its records: it is re-run from it


@dataclass(frozen=True)
class Cell:
    """One measurement: its identity (study, task, model, batch size, compile mode, dtype, device kind: a
    record's ``CELL_FIELDS``, in their order) and how it is measured (``settings``)."""

    study: str
    task: str
    model: str
    batch_size: int
    compile_mode: str
    dtype: str
    device: str                  # the kind: cpu or cuda
    settings: Settings = field(default_factory=Settings)

    @property
    def variant(self) -> tuple[str, ...]:
        """What sets the cell apart from the guide's way (empty for the guide's cells)."""
        return self.settings.variant()

    @property
    def cell_id(self) -> str:
        """A file-name-safe identifier, unique within a study (the guide's cells keep their old ids)."""
        return cell_file_name(self.task, self.model, self.batch_size, self.compile_mode, self.variant, self.dtype,
                              self.device)

    @property
    def notebook(self) -> str:
        return NOTEBOOKS[self.task]

    def identity(self) -> CellIdentity:
        """What its record's ``records.key.cell_identity`` will be."""
        return CellIdentity(self.study, self.task, self.model, self.batch_size, self.compile_mode,
                            self.dtype, self.settings.variant_values(), self.device)

    @property
    def replicate(self) -> Replicate:
        return Replicate(self.settings.replicate)

    def as_replicate(self, number: int) -> Cell:
        """The same cell, its ``number``-th replicate (1: the first)."""
        return replace(self, settings=replace(self.settings, replicate=Replicate(f"r{number}").value))

    def to_parameters(self) -> dict[str, Any]:
        """The cell as flat names and values (a Ray task carries it so); ``from_parameters`` reads it back."""
        return {**{name: getattr(self, name) for name in CELL_FIELDS}, **self.settings.to_parameters()}

    @classmethod
    def from_parameters(cls, values: dict[str, Any]) -> Cell:
        return cls(**{name: values[name] for name in CELL_FIELDS},
                   settings=Settings(**{key: value for key, value in values.items() if key not in CELL_FIELDS}))


@dataclass
class Grid:
    path: str
    study: str
    description: str
    devices: list[str]               # as written: kinds, or pinned devices
    cells: list[Cell] = field(default_factory=list)
    accelerators: list[str] = field(default_factory=list)  # a cluster's kinds to cover, each all cells

    def with_settings(self, **values: Any) -> Grid:
        """The grid with these settings in every cell (``run --keep-traces``), checked."""
        return replace(self, cells=[replace(cell, settings=replace(cell.settings, **values).checked())
                                    for cell in self.cells])

    @property
    def device_kinds(self) -> list[str]:
        return sorted({device.split(":")[0] for device in self.devices})

    def workers(self, kind: str) -> list[str]:
        """The devices of ``kind`` that cells run on, one worker each."""
        pinned = [device for device in self.devices if device.startswith(kind + ":")]
        return pinned or [kind if kind == "cpu" else f"{kind}:0"]


def load_grid(path: str | Path) -> Grid:
    """Read, validate and expand a grid file; GridError on any mistake."""
    try:
        data = read_yaml(path)
    except GridFileError as exc:
        raise GridError(str(exc)) from None
    return parse_grid(data, str(path))


def keep_grid_copy(params: str | os.PathLike[str], study_folder: Path, name: str = GRID_COPY) -> Path:
    """The grid file copied, as written, into the study folder (``grid.yaml``): what ``reproduce`` re-runs. Called
    once a run has really started: a refused or failed run changes no study folder. A different ``grid.yaml`` there
    is kept beside it as ``grid.<hash>.yaml`` (the first 8 hex digits of its SHA-256), never written over."""
    study_folder.mkdir(parents=True, exist_ok=True)
    copy = study_folder / name
    text = Path(params).read_bytes()
    if Path(params).resolve() != copy.resolve() and (not copy.exists() or copy.read_bytes() != text):
        if copy.exists():
            earlier = copy.read_bytes()
            kept = study_folder / f"{Path(name).stem}.{hashlib.sha256(earlier).hexdigest()[:8]}.yaml"
            if not kept.exists():
                kept.write_bytes(earlier)
        temporary = copy.with_name(f".{name}.tmp")
        temporary.write_bytes(text)
        temporary.replace(copy)
    return copy


def parse_grid(data: Any, path: str = "<grid>") -> Grid:
    if not isinstance(data, dict):
        raise GridError(f"{path}: the grid file must be a mapping of keys (study, grids, ...)")
    _check_keys(path, "", data, TOP_LEVEL)
    for key in ("study", "grids"):
        if key not in data:
            raise fail(path, key, "is required")
    if not _STUDY_NAME.match(data["study"]):
        raise fail(path, "study", f"must be a file-name-safe name of at most {STUDY_NAME_LENGTH} characters "
                   f"(letters, digits, '.', '_', '-'), got {quoted(data['study'])}")
    devices = check_devices(path, data.get("devices", ["cpu"]))
    study_settings = _settings(path, "", data, Settings())
    _check_study_settings(path, study_settings, devices)
    non_empty(path, "grids", data["grids"])
    accelerators = check_accelerators(path, data["accelerators"]) if "accelerators" in data else []
    grid = Grid(path=path, study=data["study"], description=data.get("description", ""),
                devices=devices, accelerators=accelerators)
    seen = set()
    for index, item in enumerate(data["grids"]):
        for cell in _expand(path, f"grids[{index}]", item, study_settings, grid):
            if cell.identity() not in seen:  # sub-grids may overlap: each cell once
                seen.add(cell.identity())
                grid.cells.append(cell)
    grid.cells = replicated(grid.cells)
    return grid


def split_over_replicates(path: str, where: str, settings: Settings, device_kind: str) -> Settings:
    """One replicate's settings: its share of the runs and of the pairs (``runs // r``, ``blocks // r``), and the
    count (None where it is 1: a cell measured once keeps the hash it had before replicates existed)."""
    count = settings.replicates or (GPU_REPLICATES if device_kind == "cuda" else 1)  # the grid's, else the device's
    if count == 1:
        return replace(settings, replicates=None)
    blocks = settings.blocks if settings.blocks is not None else min(DEFAULT_BLOCKS, settings.runs)
    if blocks < count:
        told = "" if settings.replicates else " (the default on a GPU; replicates: 1 measures each cell once)"
        raise fail(path, where + "blocks", f"{count} replicates{told} need at least {count} pairs of blocks and "
                   f"{count} runs (each replicate times its share), got runs {settings.runs}, blocks {blocks}")
    return replace(settings, replicates=count, runs=settings.runs // count, blocks=blocks // count)


# Steps between a kernel's replicates (at least 1: its first keeps the cold compiles its next compiles warm from):
# with 2, another kernel's first replicate runs between them.
REPLICATE_LAG = 2


def kernel_key(cell: Cell) -> tuple:
    """What the cells of one kernel share: all but batch size and compile mode (``kernel_groups``)."""
    return (cell.study, cell.task, cell.model, cell.dtype, cell.device, cell.settings)


def replicated(cells: list[Cell]) -> list[Cell]:
    """Every cell's replicates, staggered by kernel, ``REPLICATE_LAG`` steps apart, the later replicates of each step
    before its new first one (why: docs/study.md, *Grid files*)."""
    most = max((cell.settings.replicates or 1 for cell in cells), default=1)
    if most == 1:
        return list(cells)
    kernels: dict[tuple, list[Cell]] = {}
    for cell in cells:
        kernels.setdefault(kernel_key(cell), []).append(cell)
    firsts = list(kernels.values())
    ordered: list[Cell] = []
    for step in range(len(firsts) + (most - 1) * REPLICATE_LAG):
        for index in range(most, 0, -1):  # the later replicates of earlier kernels, then this step's first one
            kernel = step - (index - 1) * REPLICATE_LAG
            if 0 <= kernel < len(firsts):
                ordered += [cell.as_replicate(index) for cell in firsts[kernel]
                            if (cell.settings.replicates or 1) >= index]
    return ordered


def _check_keys(path: str, where: str, mapping: dict, known: dict) -> None:
    unknown_keys(path, where, mapping, known)
    for key, expected in known.items():
        if key in mapping:
            check_type(path, where + key, mapping[key], expected)


def _settings(path: str, where: str, mapping: dict, base: Settings) -> Settings:
    """``base`` with the settings ``mapping`` gives, each checked (the error names its key)."""
    keys = {item.name for item in setting_fields() if item.metadata["grid"] in (TOP, ANYWHERE)}
    given = {key: value for key, value in mapping.items() if key in keys}
    for key, value in given.items():
        item = next(item for item in setting_fields() if item.name == key)
        try:
            given[key] = item.metadata["check"](value)
        except UserError as exc:
            raise fail(path, where + key, str(exc)) from None
    return replace(base, **given)


def _check_study_settings(path: str, settings: Settings, devices: list[str]) -> None:
    if settings.gpu_memory_gib is not None and not any(device.startswith("cuda") for device in devices):
        raise fail(path, "gpu_memory_gib", "caps a GPU's memory, but the grid has no CUDA device (devices: "
                   f"{', '.join(devices)})")
    if settings.backend not in BUILT_IN_BACKENDS:  # only torch knows the others: read with torch here alone
        from ...variants.modes import check_backend

        try:
            check_backend(settings.backend)
        except UserError as exc:
            raise fail(path, "backend", str(exc)) from None


def _expand(path: str, where: str, item: Any, study_settings: Settings, grid: Grid) -> list[Cell]:
    """A sub-grid's cells: models x device kinds x dtypes x axes (memory formats, shapes) x modes x batch sizes."""
    if not isinstance(item, dict):
        raise fail(path, where, "must be a mapping with models, batch_sizes, compile_modes")
    where += "."
    _check_keys(path, where, item, GRID_KEYS)
    for key in REQUIRED_GRID_KEYS:
        if key not in item:
            raise fail(path, where + key, "is required")
        non_empty(path, where + key, item[key])
    settings = _sub_grid_settings(path, where, item, study_settings)
    batch_sizes = _batch_sizes(path, where, item["batch_sizes"])
    modes = checked_names(path, where + "compile_modes", item["compile_modes"], check_mode)
    dtypes = checked_names(path, where + "dtypes", item.get("dtypes", ["float32"]), dtype_name)
    axes = {axis.name: checked_names(path, where + axis.metadata["plural"],
                                     item.get(axis.metadata["plural"], [axis.default]),
                                     axis.metadata["check"])
            for axis in setting_fields() if axis.metadata["grid"] == AXIS}
    _check_dynamic_shapes(path, where, axes.get("shapes", []), modes, settings)
    if settings.backend != "inductor" and any(name != InductorConfig.DEFAULT for name in axes.get("inductor", [])):
        raise fail(path, where + "inductor_configs", f"Inductor's options need the inductor backend, "
                   f"not {settings.backend!r}")
    cells = []
    for model in item["models"]:
        key, task = _model(path, where, str(model), item.get("task"))
        for kind in grid.device_kinds:
            for dtype in dtypes:
                for values in itertools.product(*axes.values()):
                    axis_values: dict[str, Any] = dict(zip(axes, values))  # each its own setting's type
                    axis_settings = split_over_replicates(path, where, replace(
                        settings, **axis_values, gpu_memory_gib=settings.gpu_memory_gib if kind == "cuda" else None),
                        kind)
                    for mode in modes:
                        # eager compiles nothing: the same cell whatever the shapes or Inductor's configuration
                        cell_settings = (replace(axis_settings, shapes=Shapes.STATIC.value,
                                                 inductor=InductorConfig.DEFAULT.value)
                                         if mode == CompileMode.EAGER else axis_settings)
                        cells += [Cell(study=grid.study, task=task, model=key, batch_size=batch, compile_mode=mode,
                                       dtype=dtype, device=kind, settings=cell_settings) for batch in batch_sizes]
    return cells


def _sub_grid_settings(path: str, where: str, item: dict, study_settings: Settings) -> Settings:
    """The study's settings with the sub-grid's own; ``blocks`` resolved (never more than runs)."""
    settings = _settings(path, where, item, study_settings)
    if settings.blocks is not None and settings.blocks > settings.runs:
        raise fail(path, where + "blocks", f"must not exceed runs ({settings.runs}), got {settings.blocks}")
    return settings.with_blocks()


def _batch_sizes(path: str, where: str, values: list) -> list[int]:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(path, where + "batch_sizes", f"must be positive integers, got {quoted(value)}")
    return sorted(set(values))


def _check_dynamic_shapes(path: str, where: str, shapes: list[str], modes: list[str], settings: Settings) -> None:
    if Shapes.DYNAMIC not in shapes:
        return
    if any(mode in AOT_MODES for mode in modes):
        raise fail(path, where + "shapes", "dynamic needs a torch.compile mode: aot-inductor packages "
                   "are exported at fixed shapes (put aot-inductor in a sub-grid of its own)")
    if settings.dynamic is False:
        raise fail(path, where + "shapes", "dynamic marks the batch dimension dynamic, but the grid "
                   "sets dynamic: false (torch.compile's own setting); remove one of them")


def _model(path: str, where: str, model: str, task_override: str | None) -> tuple[str, str]:
    """The model's key and task: from the registry, timm, or the sub-grid's task for another checkpoint."""
    if task_override is not None and task_override not in TASKS:
        raise fail(path, where + "task", f"unknown task {quoted(task_override)}: use one of {', '.join(TASKS)}")
    try:
        spec = resolve_key(model)
    except UserError as exc:
        raise fail(path, where + "models", str(exc)) from None
    if spec is not None or model.startswith("timm:"):
        key, task = (spec.key, spec.task) if spec else (check_timm(path, where, model), "image-classification")
        if task_override is not None and task_override != task:
            raise fail(path, where + "task", f"{model!r} is an {task} model: the sub-grid's "
                       f"task ({task_override}) applies only to checkpoints outside the registry")
        return key, task
    if task_override:
        return model, task_override
    raise fail(path, where + "task", f"model {model!r} is not in the registry: give the sub-grid's task "
               "(image-classification, image-segmentation or object-detection)")
