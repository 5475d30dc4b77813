"""The one rule that prices a cell and a kernel's start, for the dry run and ``run --time-limit`` (the records it
reads, and each rule in full: ``docs/study.md``, "Dry run"): 1. the cell's own record, else 2. on a GPU the
calibrated prior (``prior``), else 3. nothing, counted and never guessed. Energy windows are a design cost: left out
of the ratio and not scaled (the first H200 records spent 10.8 s in 5-second windows). ``compile_wait_s`` and a
kernel started ahead are a removed design's: no cost of the cell's, and only part of the kernel's start. No torch.
"""

from __future__ import annotations

import os
from pathlib import Path
import statistics
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ...measurement.peaks import gpu_key
from ...records.blocks import KERNEL_START_PHASES
from ...records.key import as_environment, cell_identity, environment_key, measured_as_eager_side
from ...records.results_file import read_records
from ...records.schema import Record
from ...variants.cell_plan import timed_in_rows
from .prior import Prior, Shape, Span, device_key

if TYPE_CHECKING:  # the grid imports the compile variants, and so torch
    from ..grid.grid_file import Cell

RATIO_SPREAD = 1.25       # a calibrated range is at least the median ratio /1.25 to x1.25


def results_files(own: str | os.PathLike, reports_dir: str | os.PathLike) -> list[Path]:
    """Every study's results file under ``reports_dir``, then the study's own, each once."""
    own, others = Path(own).resolve(), sorted(path.resolve() for path in Path(reports_dir).glob("*/results.jsonl"))
    return [path for path in others if path != own] + [own]


def gpu_of(environment: dict[str, Any], device_model: str | None) -> str | None:
    """The datasheet key of ``device_model`` (UserError where unknown), else of this machine's GPU (None: none)."""
    return device_key(device_model) if device_model else gpu_key(as_environment(environment).gpu_name("cuda:0"))


def device_environment(results_path: str | os.PathLike, device_model: str) -> dict[str, Any] | None:
    """The environment of the study folder's latest record on a GPU of ``device_model``'s key: a dry run priced for
    that GPU resumes as that GPU would. None where the folder holds none."""
    key, path = device_key(device_model), Path(results_path)
    records = [r for r in (read_records(path) if path.is_file() else []) if r.cell.device_kind == "cuda"
               and gpu_key(r.environment.gpu_name("cuda:0")) == key]
    return records[-1].environment.to_json() if records else None


def _phase(record: Record, name: str) -> float:
    return float(getattr(record.phases, name, None) or 0.0)


def kernel_start(record: Record) -> float:
    """The kernel's own cost a first record says: its boot, the device's preparation, the heap's freeze and the model's
    build (0: not a kernel's first record, or a kernel started ahead)."""
    ahead = record.phases is None or not record.phases.startup_s or record.phases.started_ahead_s is not None
    return 0.0 if ahead else sum(_phase(record, name) for name in KERNEL_START_PHASES)


def calibrated(prior: Span, ratios: list[float]) -> Span:
    """``prior``'s point scaled by the ratios' median, its range theirs, at least +-25 % (``prior`` without any)."""
    if not ratios:
        return prior
    median = statistics.median(ratios)
    return Span(prior.point * min(min(ratios), median / RATIO_SPREAD), prior.point * median,
                prior.point * max(max(ratios), median * RATIO_SPREAD))


class Prices:
    """The records of ``files`` by device, and the prior of ``gpu`` (a datasheet key, or None) calibrated on them."""

    def __init__(self, files: Iterable[str | os.PathLike], environment: dict[str, Any], gpu: str | None) -> None:
        self.environment, self.gpu = as_environment(environment), gpu
        self.prior = prior = Prior(gpu) if gpu else None
        self.records = [r for r in read_records([f for f in map(Path, files) if f.is_file()]) if r.phases is not None]
        self.ratios: dict[str, list[float]] = {}   # recorded / prior, per model, over the GPU's ok cells
        self.start_ratios: list[float] = []
        for record in self.on_device("cuda") if prior else []:
            assert prior is not None
            shape, seconds = Shape.of_record(record), _phase(record, "cell_s") - _phase(record, "compile_wait_s")
            cell, start = prior.cell(shape), prior.start(shape.model)
            if cell is not None and record.ok and seconds > 0 and not measured_as_eager_side(record):
                self.ratios.setdefault(shape.model, []).append(
                    (seconds - _phase(record, "energy_s")) / (cell - prior.energy(shape)).point)
            if start is not None and kernel_start(record):
                self.start_ratios.append(kernel_start(record) / start.point)

    def on_device(self, kind: str) -> list[Record]:
        """The records taken on the device a ``kind`` cell would run on here."""
        if kind == "cuda" and self.gpu:
            return [r for r in self.records
                    if r.cell.device_kind == kind and gpu_key(r.environment.gpu_name("cuda:0")) == self.gpu]
        key = environment_key(self.environment, kind)
        return [r for r in self.records if r.cell.device_kind == kind and environment_key(r.environment, kind) == key]

    @property
    def calibrated_on(self) -> int:
        return sum(map(len, self.ratios.values()))

    def recorded(self, cell: Cell, kept: bool, shares_pairs: bool) -> float | None:
        """Rule 1: the cell's own most recent record's seconds, scaled to its calls; None where it has none."""
        identity = cell.identity().without_study()
        for record in reversed(self.on_device(cell.device.split(":")[0])):
            if (not record.ok or record.phases is None or record.phases.cell_s is None
                    or cell_identity(record).without_study() != identity
                    or (measured_as_eager_side(record) and not shares_pairs)  # its runs were timed in another cell
                    or (record.compile is not None and record.compile.cold_measured_in is not None) != kept):
                continue
            repeated = _phase(record, "timed_s") + _phase(record, "warmup_s")
            calls = (record.config.runs or 0) + (record.config.warmup or 0)  # none: the record's part as it is
            scale = 0.0 if shares_pairs else (cell.settings.runs + cell.settings.warmup) / calls if calls else 1.0
            energy = _phase(record, "energy_s")  # on a GPU the prior knows, today's windows in place of the record's
            if self.prior and cell.device.startswith("cuda"):
                energy -= self.prior.energy(Shape.of_cell(cell, kept, shares_pairs)).point
            return _phase(record, "cell_s") - _phase(record, "compile_wait_s") - energy + repeated * (scale - 1)
        return None

    def cell(self, cell: Cell, kept: bool = False, shares_pairs: bool = False, warm: bool = True) -> Span | None:
        """Rules 2 and 3 (``recorded`` is the first): ``kept``, its cold compile kept before it starts; ``warm``, its
        mode's first batch size in its kernel, which compiles warm too."""
        shape = Shape.of_cell(cell, kept, shares_pairs, warm)
        prior = self.prior.cell(shape) if self.prior and cell.device.startswith("cuda") else None
        if prior is None or self.prior is None:
            return None
        energy = self.prior.energy(shape)
        return calibrated(prior - energy, self.ratios.get(cell.model) or sum(self.ratios.values(), [])) + energy

    def start(self, cell: Cell) -> Span | None:
        """A kernel's start, ``cell`` its first."""
        own = [kernel_start(r) for r in self.on_device(cell.device.split(":")[0]) if r.cell.model == cell.model]
        if any(own):
            seconds = [value for value in own if value]
            return Span(min(seconds), statistics.median(seconds), max(seconds))
        prior = self.prior.start(cell.model) if self.prior and cell.device.startswith("cuda") else None
        return None if prior is None else calibrated(prior, self.start_ratios)

    def kernel(self, cells: list[Cell], sharing: set[Cell],
               kept: Callable[[Cell], bool]) -> tuple[Span | None, list[Span | None], int]:
        """A kernel's start, its cells' prices in order, and how many its own records priced. ``kept(cell)``: its cold
        compile kept before the kernel starts (only a static torch.compile cell's counts)."""
        prices: list[Span | None] = []
        modes, recorded = set(), 0
        for cell in cells:
            keeps = timed_in_rows(cell.compile_mode, cell.settings.shapes) and kept(cell)
            seconds = self.recorded(cell, keeps, cell in sharing)
            recorded += seconds is not None
            prices.append(Span.exact(seconds) if seconds is not None else
                          self.cell(cell, keeps, cell in sharing, warm=cell.compile_mode not in modes))
            modes.add(cell.compile_mode)
        return self.start(cells[0]), prices, recorded

