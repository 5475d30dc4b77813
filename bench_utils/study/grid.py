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

Every mistake is reported before anything runs, in one line naming the file and
the key (``GridError``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import difflib
from pathlib import Path
import re
from typing import Any

from ..variants import modes as compile_module
from ..variants.precision import parse_dtype, tf32_policy
from ..zoo.registry import TASKS, WEIGHTS, resolve_key
from .grid_yaml import GridFileError, read_yaml

TOP_LEVEL = {
    "study": str, "description": str, "runs": int, "warmup": int, "blocks": int,
    "weights": str, "seed": int, "devices": list, "tf32": (str, bool), "backend": str,
    "fullgraph": bool, "dynamic": (bool, type(None)), "grids": list,
}
GRID_KEYS = {"models": list, "batch_sizes": list, "compile_modes": list, "dtypes": list,
             "task": str, "runs": int, "warmup": int, "blocks": int}
REQUIRED_GRID_KEYS = ("models", "batch_sizes", "compile_modes")
DEFAULTS = {"runs": 300, "warmup": 10, "blocks": 30, "weights": "random", "seed": 0,
            "devices": ["cpu"], "tf32": "default", "backend": "inductor", "fullgraph": False,
            "dynamic": None, "description": ""}
NOTEBOOKS = {"image-classification": "classification.ipynb",
             "image-segmentation": "segmentation.ipynb",
             "object-detection": "detection.ipynb"}
_STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class GridError(ValueError):
    """A grid file that cannot be run; the message is one line naming file and key."""


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

    @property
    def cell_id(self) -> str:
        """A file-name-safe identifier, unique within a study."""
        raw = f"{self.task}__{self.model}__bs{self.batch_size}__{self.compile_mode}__{self.dtype}__{self.device}"
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)

    @property
    def group(self) -> tuple[str, str, str, str]:
        """Cells that differ only in batch size (an OOM at one batch skips the larger ones)."""
        return (self.model, self.compile_mode, self.dtype, self.device)

    @property
    def notebook(self) -> str:
        return NOTEBOOKS[self.task]

    def identity(self) -> tuple:
        return (self.study, self.task, self.model, self.batch_size, self.compile_mode,
                self.dtype, self.device)

    def to_parameters(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Grid:
    path: str
    study: str
    description: str
    devices: list[str]               # as written: kinds, or pinned devices
    cells: list[Cell] = field(default_factory=list)

    @property
    def device_kinds(self) -> list[str]:
        return sorted({device.split(":")[0] for device in self.devices})

    def workers(self, kind: str) -> list[str]:
        """The devices of ``kind`` that cells run on, one worker each."""
        pinned = [device for device in self.devices if device.startswith(kind + ":")]
        return pinned or [kind if kind == "cpu" else f"{kind}:0"]


def _fail(path: str, key: str, message: str) -> GridError:
    return GridError(f"{path}: {key}: {message}")


def _check_type(path: str, key: str, value: Any, expected) -> None:
    if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise _fail(path, key, f"must be an integer, got {value!r}")
    if expected is list and not isinstance(value, list):
        raise _fail(path, key, f"must be a list, got {value!r}")
    if expected not in (int, list) and not isinstance(value, expected):
        names = (" or ".join(t.__name__ for t in expected) if isinstance(expected, tuple)
                 else expected.__name__)
        raise _fail(path, key, f"must be {names}, got {value!r}")


def _unknown_keys(path: str, where: str, mapping: dict, known) -> None:
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _fail(path, f"{where}{key}", f"unknown key{hint}; known keys: {', '.join(known)}")


def _non_empty(path: str, key: str, values: list) -> None:
    if not values:
        raise _fail(path, key, "must not be empty")


def _positive(path: str, key: str, value: int) -> None:
    if value < 1:
        raise _fail(path, key, f"must be >= 1, got {value}")


def _check_devices(path: str, devices: list) -> list[str]:
    _non_empty(path, "devices", devices)
    checked = []
    for device in devices:
        if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", device):
            raise _fail(path, "devices", f"unknown device {device!r}: use cpu, cuda or cuda:N")
        if device in checked:
            raise _fail(path, "devices", f"{device} is listed twice: one worker per device")
        checked.append(device)
    return checked


def _check_timm(path: str, where: str, model: str) -> str:
    import timm  # only for grids that name a timm model

    name = model[len("timm:"):]
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=1)
        hint = f" Did you mean 'timm:{close[0]}'?" if close else ""
        raise _fail(path, where + "models", f"unknown timm model {name!r}.{hint}")
    return model


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
    _unknown_keys(path, "", data, TOP_LEVEL)
    for key, expected in TOP_LEVEL.items():
        if key in data:
            _check_type(path, key, data[key], expected)
    for key in ("study", "grids"):
        if key not in data:
            raise _fail(path, key, "is required")
    settings = {**DEFAULTS, **{k: v for k, v in data.items() if k != "grids"}}
    if not _STUDY_NAME.match(settings["study"]):
        raise _fail(path, "study", f"must be a file-name-safe name, got {settings['study']!r}")
    for key in ("runs", "blocks"):
        _positive(path, key, settings[key])
    if settings["warmup"] < 0:
        raise _fail(path, "warmup", f"must be >= 0, got {settings['warmup']}")
    if settings["weights"] not in WEIGHTS:
        raise _fail(path, "weights", f"unknown weights {settings['weights']!r}: use one of {', '.join(WEIGHTS)}")
    try:
        settings["tf32"] = tf32_policy(settings["tf32"])
    except ValueError as exc:
        raise _fail(path, "tf32", str(exc)) from None
    devices = _check_devices(path, settings["devices"])
    try:
        if settings["backend"] != "inductor":
            compile_module.check_backend(settings["backend"])
    except ValueError as exc:
        raise _fail(path, "backend", str(exc)) from None
    _non_empty(path, "grids", data["grids"])

    grid = Grid(path=path, study=settings["study"], description=settings["description"],
                devices=devices)
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
        raise _fail(path, f"grids[{index}]", "must be a mapping with models, batch_sizes, compile_modes")
    _unknown_keys(path, where, item, GRID_KEYS)
    for key, expected in GRID_KEYS.items():
        if key in item:
            _check_type(path, where + key, item[key], expected)
    for key in REQUIRED_GRID_KEYS:
        if key not in item:
            raise _fail(path, where + key, "is required")
        _non_empty(path, where + key, item[key])
    dtypes = item.get("dtypes", ["float32"])
    _non_empty(path, where + "dtypes", dtypes)
    local = {key: item.get(key, settings[key]) for key in ("runs", "warmup", "blocks")}
    if not (blocks_given or "blocks" in item):  # the default (30 pairs) never asks for more than runs
        local["blocks"] = min(local["blocks"], local["runs"])
    for key in ("runs", "blocks"):
        _positive(path, where + key, local[key])
    if local["blocks"] > local["runs"]:
        raise _fail(path, where + "blocks", f"must not exceed runs ({local['runs']}), got {local['blocks']}")
    for value in item["batch_sizes"]:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(path, where + "batch_sizes", f"must be positive integers, got {value!r}")
    modes = []
    for mode in item["compile_modes"]:
        try:
            modes.append(compile_module.check_mode(str(mode)))
        except ValueError as exc:
            raise _fail(path, where + "compile_modes", str(exc)) from None
    dtype_names = []
    for dtype in dtypes:
        try:
            dtype_names.append(parse_dtype(str(dtype))[0])
        except ValueError as exc:
            raise _fail(path, where + "dtypes", str(exc)) from None
    task_override = item.get("task")
    if task_override is not None and task_override not in TASKS:
        raise _fail(path, where + "task", f"unknown task {task_override!r}: use one of {', '.join(TASKS)}")
    cells = []
    for model in item["models"]:
        try:
            spec = resolve_key(str(model))
        except ValueError as exc:
            raise _fail(path, where + "models", str(exc)) from None
        if spec is not None or str(model).startswith("timm:"):
            key, task = (spec.key, spec.task) if spec else (_check_timm(path, where, str(model)),
                                                            "image-classification")
            if task_override is not None and task_override != task:
                raise _fail(path, where + "task", f"{model!r} is an {task} model: the sub-grid's "
                            f"task ({task_override}) applies only to checkpoints outside the registry")
        elif task_override:
            key, task = str(model), task_override
        else:
            raise _fail(path, where + "task", f"model {model!r} is not in the registry: "
                        "give the sub-grid's task (image-classification, image-segmentation "
                        "or object-detection)")
        for kind in kinds:
            for dtype in dtype_names:
                for mode in modes:
                    for batch_size in sorted(set(item["batch_sizes"])):
                        cells.append(Cell(
                            study=settings["study"], task=task, model=key, batch_size=batch_size,
                            compile_mode=mode, dtype=dtype, device=kind, runs=local["runs"],
                            warmup=local["warmup"], blocks=local["blocks"],
                            weights=settings["weights"], seed=settings["seed"],
                            tf32=settings["tf32"], backend=settings["backend"],
                            fullgraph=settings["fullgraph"], dynamic=settings["dynamic"]))
    return cells


