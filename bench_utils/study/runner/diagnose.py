"""``python -m bench_utils diagnose STUDY``: every compiled cell compile made slower, its remedies measured
(``docs/diagnosis.md``) by the study runner, as a grid kept in the study folder as ``diagnosis.yaml``. No torch.
"""

from __future__ import annotations

from pathlib import Path
import tempfile
from typing import Any

import yaml

from ...errors import UserError
from ...measurement.slowdown import REMEDY_STUDY_SUFFIX, Variant, diagnosable, measurable, remedies, rules_fired
from ...records.key import latest_per_cell
from ...records.results_file import check_readable, read_records
from ...records.schema import Record
from ...vocabulary import InductorConfig, MemoryFormat

DIAGNOSIS_GRID = "diagnosis.yaml"


def slow_cells(records: list[Record]) -> list[Record]:
    """Each cell's latest ``ok`` record that ``measurement.slowdown.diagnosable`` says to diagnose: a cell measured
    again (another lease, other settings) is diagnosed on its latest record only, as its page shows it."""
    slow = []
    for record in latest_per_cell(records):
        speedup, cell = record.speedup, record.cell
        if not record.ok or speedup is None:
            continue
        interval = speedup.mean_ci95
        if diagnosable(compile_mode=cell.compile_mode, memory_format=cell.memory_format, shapes=cell.shapes,
                       inductor=cell.inductor, study=cell.study, speedup=speedup.mean,
                       interval=(interval[0], interval[1]) if interval else None):
            slow.append(record)
    return slow


def remedy_grid(slow: list[Record]) -> tuple[dict[str, Any], list[str]]:
    """The grid of every slow cell's remedies (a grid file's mapping; no sub-grid where none can be measured), and
    a line per slow cell saying which rules its profile fired, what they chose, and what its backend cannot
    measure (``measurement.slowdown.measurable``). The study-wide settings are those of the slow cell measured last
    (the study's latest design: a cell measured again on a later lease in fewer runs a replicate, say)."""
    lead = max(slow, key=lambda record: record.timestamp)
    first = lead.config
    lines, grids, kinds = [], [], []
    for record in slow:
        cell, profile = record.cell, record.profile
        kind = cell.device_kind
        kinds.append(kind)
        backend = record.config.backend
        variant = Variant(cell.compile_mode, cell.memory_format, cell.inductor)
        chosen, left_out = measurable(remedies(profile, variant, cuda=kind == "cuda"), backend)
        speedup = record.speedup.mean if record.speedup else float("nan")
        lines.append(printable(
            f"{cell.model} batch {cell.batch_size} {cell.compile_mode} on {kind}: speed-up "
            f"{speedup:.2f}x; rules: {', '.join(rules_fired(profile))}; remedies: "
            + (", ".join(_name(remedy.variant) for remedy in chosen) or "none measurable")
            + (f"; left out, needing the inductor backend (this study's is {backend}): "
               + ", ".join(_name(remedy.variant) for remedy in left_out) if left_out else "")))
        grids += [{"models": [cell.model], "batch_sizes": [cell.batch_size],
                   "compile_modes": [remedy.variant.compile_mode], "dtypes": [cell.dtype],
                   "memory_formats": [remedy.variant.memory_format], "inductor_configs": [remedy.variant.inductor]}
                  for remedy in chosen]
    study = lead.cell.study
    count = first.replicates or 1
    grid = {"study": f"{study}{REMEDY_STUDY_SUFFIX}",
            "description": f"remedies of the compiled cells compile made slower in {study} (bench_utils diagnose)",
            # as the slow cell was measured: in as many replicates (none: once), each with its share of the runs
            "replicates": count, "runs": first.runs * count if first.runs else None, "warmup": first.warmup,
            "blocks": first.blocks * count if first.blocks else None,
            "weights": first.weights_requested or "random", "seed": first.seed if first.seed is not None else 0,
            "tf32": first.tf32 or "default", "devices": sorted(set(kinds)), "grids": grids}
    if first.backend not in (None, "inductor"):
        grid["backend"] = first.backend
    return {key: value for key, value in grid.items() if value is not None}, lines


def printable(text: str) -> str:
    """A line for the terminal from a record's strings: control characters (a colleague's record may hold escape
    sequences) shown as ``?``."""
    return "".join(char if char.isprintable() else "?" for char in text)


def _name(variant: Variant) -> str:
    parts = [variant.compile_mode]
    if variant.memory_format != MemoryFormat.CONTIGUOUS:
        parts.append(variant.memory_format)
    if variant.inductor != InductorConfig.DEFAULT:
        parts.append(variant.inductor)
    return "+".join(parts)


def diagnose(study: str | Path, *, dry_run: bool = False, time_limit: str | None = None,
             device_model: str | None = None, timeout: int | None = None, started: float | None = None,
             say=print) -> int:
    """Diagnose the study folder's slow cells: print what each profile says, then run (or plan) their remedies;
    the exit status (``run``'s)."""
    from ..grid.grid_file import parse_grid
    from .run_command import run_locally

    folder = Path(study)
    results = folder / "results.jsonl"
    if not results.is_file():
        raise UserError(f"{folder} holds no results.jsonl: not a study folder")
    check_readable([results])
    slow = slow_cells(read_records([results]))
    if not slow:
        say(f"[diagnose] {folder}: no compiled cell is slower than eager, or inconclusive: nothing to diagnose")
        return 0
    data, lines = remedy_grid(slow)
    say(f"[diagnose] {len(slow)} compiled cell(s) slower than eager or inconclusive in {folder}:")
    for line in lines:
        say(f"  {line}")
    if not data["grids"]:
        say("[diagnose] no remedy of these cells can be measured with their backend: nothing to run")
        return 0
    text = ("# The remedies of the compiled cells compile made slower (bench_utils diagnose), per cell:\n"
            + "".join(f"#   {line}\n" for line in lines) + yaml.safe_dump(data, sort_keys=False))
    with tempfile.TemporaryDirectory(prefix="diagnose-") as scratch:
        source = Path(scratch) / DIAGNOSIS_GRID
        source.write_text(text, encoding="utf-8")
        # named as what it is: its file is written into the study folder only once its run starts
        grid = parse_grid(data, f"the remedies' grid of {folder}")
        return run_locally(grid, source, out=folder, dry_run=dry_run, time_limit=time_limit,
                           device_model=device_model, timeout=timeout, started=started, grid_copy=DIAGNOSIS_GRID)
