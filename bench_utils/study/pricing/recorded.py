"""A cell's cost from earlier records of it: what the dry run, the time limit and the a-priori calibration read.

Earlier records of this environment (the same torch version and processor, as ``records.key.environment_key``
says) that carry a ``phases`` block, the seconds spent inside the kernel (``startup_s``, ``load_s``,
``cell_s``, ``timed_s``...). A cell costs what its most recent record's ``cell_s`` was, the timed and warm-up
part scaled to the cell's runs and warm-up; a kernel adds its start (kernel boot and model build). What no
record covers is left to the caller (``plan``: counted, never guessed; ``prior``: priced a priori). No torch
and no pandas are imported here.
"""

from __future__ import annotations

import os
from pathlib import Path
import statistics
from typing import TYPE_CHECKING, Any, Iterable

from ...records.key import as_environment, cell_identity, environment_key, measured_as_eager_side
from ...records.results_file import read_records
from ...records.schema import EnvironmentBlock, Record


if TYPE_CHECKING:  # the grid imports the compile variants, and so torch
    from ..grid.grid_file import Cell

# The parts of cell_s that grow with the number of calls timed (warm-up and runs).
REPEATED_PHASES = ("timed_s", "warmup_s")


def _kind(device: str) -> str:
    return str(device).split(":")[0]


def _phase(record: Record, name: str) -> float:
    """Seconds of one phase; 0 where the record has no such figure."""
    return float(getattr(record.phases, name, None) or 0.0)


def records_of_environment(paths: Iterable[str | os.PathLike],
                           environment: EnvironmentBlock | dict[str, Any]) -> list[Record]:
    """The records of ``paths`` (missing files ignored), in file order, that were taken on
    ``environment`` (``environment_key`` for the record's device kind) and carry ``phases``."""
    # a line skipped here is said as any reader's is (once a command, by ``records.results_file.skipped_lines_said``)
    environment = as_environment(environment)
    records = read_records([Path(path) for path in paths if Path(path).is_file()])
    return [record for record in records
            if record.phases is not None
            and environment_key(record.environment, record.cell.device_kind)
            == environment_key(environment, record.cell.device_kind)]


def _same_cell(cell: Cell, record: Record) -> bool:
    """The same cell, whatever the study."""
    return cell_identity(record).without_study() == cell.identity().without_study()


def _calls(record: Record) -> int | None:
    """Warm-up and timed calls of a record, from its config; None when not recorded."""
    runs, warmup = record.config.runs, record.config.warmup or 0
    return runs + warmup if runs is not None and runs + warmup > 0 else None


def estimate_cell_seconds(cell: Cell, records: list[Record], shares_pairs: bool = False,
                          warm_share: float | None = None) -> float | None:
    """Seconds ``cell`` would take inside its kernel, from the most recent ``ok`` record of the
    same cell (task, model, batch size, mode, dtype, device kind): its ``cell_s``, with the timed
    and warm-up part scaled by the cell's calls over the record's. An eager cell that will take a
    compiled cell's pairs (``shares_pairs``) costs no timed runs; one that will be timed by itself
    is not estimated from a record that was not. ``warm_share``, where given: the cell will compile warm only
    (its cold compile kept by another process, ``prior.CellShape.cold_kept``), a warm compile taking that share of
    a cold one, so a record's own cold compile is not its cost (``_cold_saved``). None when no record has it: an error's time to failure, or a cell not run, says nothing
    of a measurement's cost."""
    for record in reversed(records):  # the last in file order is the most recent
        if (not _same_cell(cell, record) or not record.ok
                or record.phases is None or record.phases.cell_s is None):
            continue
        if measured_as_eager_side(record) and not shares_pairs:
            continue  # its eager runs were timed in another cell
        repeated = sum(_phase(record, name) for name in REPEATED_PHASES)
        calls = _calls(record)
        if repeated and calls is None and not shares_pairs:
            continue  # a timed part that cannot be scaled: not this cell's cost
        if shares_pairs:
            scale = 0.0
        else:  # a record without its calls has no repeated part here (it was passed over above)
            scale = (cell.settings.runs + cell.settings.warmup) / calls if repeated and calls else 1.0
        # a wait for a compile process (compile ahead, removed) was no cost of the cell's own
        seconds = _phase(record, "cell_s") - _phase(record, "compile_wait_s") - repeated + repeated * scale
        return seconds if warm_share is None else seconds - _cold_saved(record, warm_share)
    return None


def _cold_saved(record: Record, warm_share: float) -> float:
    """What compiling warm only saves on the record's own cold compile: its compiling calls, less the warm compile in
    their place (the record's own where it compiled warm too, else ``warm_share`` of the cold)."""
    compiled = record.compile
    if compiled is None or compiled.cold_measured_in is not None or not compiled.cold_calls_ms:
        return 0.0
    cold_s = sum(compiled.cold_calls_ms) / 1e3
    return cold_s if compiled.warm_calls_ms else cold_s * (1 - warm_share)


def started_ahead(record: Record) -> bool:
    """Whether the record's kernel was started ahead (an earlier design's): its ``startup_s`` is then only what
    followed its start gate, no kernel's whole start."""
    return record.phases is not None and record.phases.started_ahead_s is not None


def kernel_start(record: Record) -> float:
    """The kernel's own cost a first record says: its boot, the device's preparation (``ready_s``) and the model's
    build."""
    return _phase(record, "startup_s") + _phase(record, "ready_s") + _phase(record, "load_s")


def start_and_load(first: Cell, records: list[Record]) -> list[float]:
    """The kernel's own cost of the records that started a kernel of ``first``'s model (``kernel_start``)."""
    seconds = [kernel_start(record) for record in records
               if record.cell.model == first.model and record.cell.device_kind == _kind(first.device)
               and not started_ahead(record)]
    return [value for value in seconds if value > 0]


def estimate_kernel_start_seconds(group_first_cell: Cell, records: list[Record]) -> float | None:
    """Seconds from a kernel's start to its first cell: the median own cost of earlier kernels of the same model
    and device kind; else the median start of any kernel (the model build then unknown); None when no record
    started a kernel."""
    known = (start_and_load(group_first_cell, records)
             or [value for value in (_phase(record, "startup_s") + _phase(record, "ready_s") for record in records
                                     if not started_ahead(record)) if value > 0])
    return statistics.median(known) if known else None


def results_files(own: Path, reports_dir: Path) -> list[Path]:
    """Every study's results file under ``reports_dir``, then the study's own last, each once:
    where several records describe a cell, the study's own most recent one is used."""
    own = Path(own).resolve()
    others = sorted(path.resolve() for path in Path(reports_dir).glob("*/results.jsonl"))
    return [path for path in others if path != own] + [own]
