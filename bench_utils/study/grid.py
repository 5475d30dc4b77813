"""Study grids: a YAML file validated, then expanded into cells.

A grid file names a study and one or more sub-grids, each a product of models x
batch sizes x compile modes x dtypes, measured on each device kind listed::

    study: hf-guide
    runs: 300            # timed runs per cell (after warm-up)
    devices: [cuda]      # device kinds (cpu, cuda); 'cuda:0, cuda:1' also pins workers
    grids:
      - models: [vit, resnet]
        batch_sizes: [1, 4, 16]
        compile_modes: [eager, default]
        dtypes: [float32]
        memory_formats: [contiguous, channels_last]   # optional (default: contiguous)
        shapes: [static, dynamic]   # optional: dynamic is one compilation for all batch sizes

``gpu_memory_gib: 16`` holds each CUDA cell to that much GPU memory, as a 16 GB card would
(``measurement.memory_cap``): its OOMs, on a larger GPU.
A grid may name the accelerator types of a Ray cluster to cover (``accelerators: [H100, A100]``):
each kind measures every cell, and only ``run --executor ray`` runs it (``bench_utils.cluster``).
Eager cells are always ``static`` (nothing compiles); ``aot-inductor`` packages are exported at
fixed shapes, so ``dynamic`` applies to the torch.compile modes only.
Every mistake is reported before anything runs, in one line naming the file and
the key (``GridError``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
import re
from typing import Any

from ..vocabulary import (AOT_MODES, CompileMode, MemoryFormat, Shapes, check_memory_format, check_mode,
                          check_shapes, dtype_name, tf32_policy)
from ..zoo.registry import TASKS, WEIGHTS, resolve_key
from .grid_checks import (GridError, check_accelerators, check_devices, check_gpu_memory, check_timm, check_type, checked_names, fail, non_empty,
                          positive, unknown_keys)
from .grid_yaml import GridFileError, read_yaml

TOP_LEVEL = {
    "study": str, "description": str, "runs": int, "warmup": int, "blocks": int,
    "weights": str, "seed": int, "devices": list, "tf32": (str, bool), "backend": str,
    "fullgraph": bool, "dynamic": (bool, type(None)), "portable_cache": bool, "grids": list,
    "accelerators": list, "gpu_memory_gib": (int, float),
}
GRID_KEYS = {"models": list, "batch_sizes": list, "compile_modes": list, "dtypes": list,
             "task": str, "runs": int, "warmup": int, "blocks": int, "memory_formats": list,
             "shapes": list, "portable_cache": bool}
REQUIRED_GRID_KEYS = ("models", "batch_sizes", "compile_modes")
DEFAULTS = {"runs": 300, "warmup": 10, "blocks": 30, "weights": "random", "seed": 0,
            "devices": ["cpu"], "tf32": "default", "backend": "inductor", "fullgraph": False,
            "dynamic": None, "portable_cache": False, "description": "", "gpu_memory_gib": None}
NOTEBOOKS = {"image-classification": "classification.ipynb",
             "image-segmentation": "segmentation.ipynb",
             "object-detection": "detection.ipynb"}
_STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Cell:
    """One measurement: what the task notebook receives as parameters."""

    study: str
    task: str
    model: str
    batch_size: int
    compile_mode: str
    dtype: str
    device: str                  # the kind: cpu or cuda
    runs: int
    warmup: int
    blocks: int
    weights: str
    seed: int
    tf32: str                    # the TF32 policy: default, strict or on
    backend: str
    fullgraph: bool
    dynamic: bool | None
    memory_format: str = MemoryFormat.CONTIGUOUS.value  # or channels_last
    shapes: str = Shapes.STATIC.value                 # or dynamic: one compilation for all batch sizes
    portable_cache: bool = False      # also time a fresh process started from the saved compile cache
    gpu_memory_gib: float | None = None   # the GPU memory a CUDA cell may use (a smaller card), None: all

    @property
    def variant(self) -> tuple[str, ...]:
        """What sets the cell apart from the guide's way (empty for the guide's cells)."""
        return tuple(part for part, default in ((self.memory_format, MemoryFormat.CONTIGUOUS),
                                                (self.shapes, Shapes.STATIC))
                     if part != default)

    @property
    def cell_id(self) -> str:
        """A file-name-safe identifier, unique within a study (the guide's cells keep their old ids)."""
        raw = "__".join((self.task, self.model, f"bs{self.batch_size}", self.compile_mode, *self.variant,
                         self.dtype, self.device))
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)

    @property
    def group(self) -> tuple[str, ...]:
        """Cells that differ only in batch size (an OOM at one batch skips the larger ones)."""
        return (self.model, self.compile_mode, self.dtype, self.memory_format, self.shapes, self.device)

    @property
    def notebook(self) -> str:
        return NOTEBOOKS[self.task]

    def identity(self) -> tuple:
        return (self.study, self.task, self.model, self.batch_size, self.compile_mode,
                self.dtype, self.memory_format, self.shapes, self.device)

    def to_parameters(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Grid:
    path: str
    study: str
    description: str
    devices: list[str]               # as written: kinds, or pinned devices
    cells: list[Cell] = field(default_factory=list)
    accelerators: list[str] = field(default_factory=list)  # a cluster's kinds to cover, each all cells

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


def parse_grid(data: Any, path: str = "<grid>") -> Grid:
    if not isinstance(data, dict):
        raise GridError(f"{path}: the grid file must be a mapping of keys (study, grids, ...)")
    unknown_keys(path, "", data, TOP_LEVEL)
    for key, expected in TOP_LEVEL.items():
        if key in data:
            check_type(path, key, data[key], expected)
    for key in ("study", "grids"):
        if key not in data:
            raise fail(path, key, "is required")
    settings = {**DEFAULTS, **{k: v for k, v in data.items() if k != "grids"}}
    if not _STUDY_NAME.match(settings["study"]):
        raise fail(path, "study", f"must be a file-name-safe name, got {settings['study']!r}")
    for key in ("runs", "blocks"):
        positive(path, key, settings[key])
    if settings["warmup"] < 0:
        raise fail(path, "warmup", f"must be >= 0, got {settings['warmup']}")
    if settings["weights"] not in WEIGHTS:
        raise fail(path, "weights", f"unknown weights {settings['weights']!r}: use one of {', '.join(WEIGHTS)}")
    try:
        settings["tf32"] = str(tf32_policy(settings["tf32"]))
    except ValueError as exc:
        raise fail(path, "tf32", str(exc)) from None
    devices = check_devices(path, settings["devices"])
    if settings["gpu_memory_gib"] is not None:
        check_gpu_memory(path, settings["gpu_memory_gib"], devices)
    try:
        if settings["backend"] != "inductor":  # only torch knows its backends: read with torch here alone
            from ..variants.modes import check_backend

            check_backend(settings["backend"])
    except ValueError as exc:
        raise fail(path, "backend", str(exc)) from None
    non_empty(path, "grids", data["grids"])

    accelerators = check_accelerators(path, data["accelerators"]) if "accelerators" in data else []
    grid = Grid(path=path, study=settings["study"], description=settings["description"],
                devices=devices, accelerators=accelerators)
    seen = set()
    for index, item in enumerate(data["grids"]):
        for cell in _expand(path, index, item, settings, grid.device_kinds, "blocks" in data):
            if cell.identity() not in seen:  # sub-grids may overlap: each cell once
                seen.add(cell.identity())
                grid.cells.append(cell)
    return grid


def _expand(path: str, index: int, item: Any, settings: dict, kinds: list[str],
            blocks_given: bool) -> list[Cell]:
    where = f"grids[{index}]."
    if not isinstance(item, dict):
        raise fail(path, f"grids[{index}]", "must be a mapping with models, batch_sizes, compile_modes")
    unknown_keys(path, where, item, GRID_KEYS)
    for key, expected in GRID_KEYS.items():
        if key in item:
            check_type(path, where + key, item[key], expected)
    for key in REQUIRED_GRID_KEYS:
        if key not in item:
            raise fail(path, where + key, "is required")
        non_empty(path, where + key, item[key])
    dtypes = item.get("dtypes", ["float32"])
    non_empty(path, where + "dtypes", dtypes)
    local = {key: item.get(key, settings[key]) for key in ("runs", "warmup", "blocks", "portable_cache")}
    if not (blocks_given or "blocks" in item):  # the default (30 pairs) never asks for more than runs
        local["blocks"] = min(local["blocks"], local["runs"])
    for key in ("runs", "blocks"):
        positive(path, where + key, local[key])
    if local["blocks"] > local["runs"]:
        raise fail(path, where + "blocks", f"must not exceed runs ({local['runs']}), got {local['blocks']}")
    for value in item["batch_sizes"]:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(path, where + "batch_sizes", f"must be positive integers, got {value!r}")
    modes = []
    for mode in item["compile_modes"]:
        try:
            modes.append(str(check_mode(str(mode))))
        except ValueError as exc:
            raise fail(path, where + "compile_modes", str(exc)) from None
    dtype_names = []
    for dtype in dtypes:
        try:
            dtype_names.append(str(dtype_name(str(dtype))))
        except ValueError as exc:
            raise fail(path, where + "dtypes", str(exc)) from None
    memory_formats = checked_names(path, where + "memory_formats",
                                   item.get("memory_formats", [MemoryFormat.CONTIGUOUS]), check_memory_format)
    shapes = checked_names(path, where + "shapes", item.get("shapes", [Shapes.STATIC]), check_shapes)
    if Shapes.DYNAMIC in shapes:
        if any(mode in AOT_MODES for mode in modes):
            raise fail(path, where + "shapes", "dynamic needs a torch.compile mode: aot-inductor packages "
                        "are exported at fixed shapes (put aot-inductor in a sub-grid of its own)")
        if settings["dynamic"] is False:
            raise fail(path, where + "shapes", "dynamic marks the batch dimension dynamic, but the grid "
                        "sets dynamic: false (torch.compile's own setting); remove one of them")
    task_override = item.get("task")
    if task_override is not None and task_override not in TASKS:
        raise fail(path, where + "task", f"unknown task {task_override!r}: use one of {', '.join(TASKS)}")
    cells = []
    for model in item["models"]:
        try:
            spec = resolve_key(str(model))
        except ValueError as exc:
            raise fail(path, where + "models", str(exc)) from None
        if spec is not None or str(model).startswith("timm:"):
            key, task = (spec.key, spec.task) if spec else (check_timm(path, where, str(model)),
                                                            "image-classification")
            if task_override is not None and task_override != task:
                raise fail(path, where + "task", f"{model!r} is an {task} model: the sub-grid's "
                            f"task ({task_override}) applies only to checkpoints outside the registry")
        elif task_override:
            key, task = str(model), task_override
        else:
            raise fail(path, where + "task", f"model {model!r} is not in the registry: "
                        "give the sub-grid's task (image-classification, image-segmentation "
                        "or object-detection)")
        for kind in kinds:
            for dtype in dtype_names:
                for memory_format in memory_formats:
                    for shape in shapes:
                        for mode in modes:
                            for batch_size in sorted(set(item["batch_sizes"])):
                                cells.append(Cell(
                                    study=settings["study"], task=task, model=key, batch_size=batch_size,
                                    compile_mode=mode, dtype=dtype, device=kind, runs=local["runs"],
                                    warmup=local["warmup"], blocks=local["blocks"],
                                    weights=settings["weights"], seed=settings["seed"],
                                    tf32=settings["tf32"], backend=settings["backend"],
                                    fullgraph=settings["fullgraph"], dynamic=settings["dynamic"],
                                    memory_format=memory_format,
                                    portable_cache=local["portable_cache"],
                                    gpu_memory_gib=settings["gpu_memory_gib"] if kind == "cuda" else None,
                                    # eager compiles nothing: the same cell whatever the shapes
                                    shapes=Shapes.STATIC.value if mode == CompileMode.EAGER else shape))
    return cells
