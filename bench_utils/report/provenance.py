"""What the page says about its records before any figure: how much of each grid they cover, which cells were
measured with an earlier design, and the fields a study folder says are wrong.

Records are never edited. A field known to be wrong is listed in the study folder's ``corrections.yaml``::

    # each entry: a record field known wrong, which records (all, or a list of record_id), and why
    - field: environment.git_commit
      records: all
      reason: enclosing_repository   # the catalog's correction_enclosing_repository says it in each language

and the page says so in every locale. Coverage ("21 of the grid's 80 cells") comes from the command that
renders the page (``study.runner.coverage``: the report does not read grids).
"""

from __future__ import annotations

import os
from pathlib import Path
import re
from typing import Any, Iterable

from babel.lists import format_list
import pandas as pd
import yaml

from ..errors import UserError
from ..parameters import quoted
from ..records.schema import Record
from .i18n import Catalog
from .markdown import code, ltr
from ..zoo.registry import label_of
from ..vocabulary import CompileMode, Status

CORRECTIONS = "corrections.yaml"


def coverage_lines(coverage: Iterable[dict[str, Any]], catalog: Catalog) -> list[str]:
    """One sentence per study folder and environment: the grid's cells measured, of how many."""
    lines = []
    for item in coverage:
        key = "coverage_complete" if item["measured"] >= item["cells"] else "coverage"
        line = catalog.t(key, device=ltr(str(item["device"]), catalog),
                         measured=ltr(catalog.number(item["measured"], 0), catalog),
                         cells=ltr(catalog.number(item["cells"], 0), catalog),
                         grid=ltr(str(item["grid"]), catalog), folder=code(item["folder"], catalog))
        if item.get("from_pairs"):  # eager cells no record of their own holds
            line += " " + catalog.plural("coverage_from_pairs", item["from_pairs"], count=ltr(catalog.number(item["from_pairs"], 0), catalog))
        if item.get("unmeasured_models"):  # named, not only counted: which of the grid's models are still to come
            names = [ltr(label_of(model), catalog) for model in item["unmeasured_models"]]
            line += " " + catalog.t("coverage_unmeasured_models", models=format_list(names, locale=catalog.locale))
        lines.append(line)
    return lines


def measured_before_switch_calls(data: pd.DataFrame, catalog: Catalog) -> str | None:
    """The compiled cells measured before each block's first call was kept out of the statistics
    (``measurement.compare``; their records have no ``switch_calls``), named; None where there are none."""
    if data.empty or "switch_calls" not in data:
        return None
    before = data[(data["compile_mode"] != CompileMode.EAGER) & (data["status"] == Status.OK)
                  & data["speedup"].notna() & data["switch_calls"].isna()]
    if before.empty:
        return None
    cells = sorted(set(zip(before["label"], before["batch_size"].astype(int), before["mode"])))  # 1, 4, 16: not 1, 16, 4
    names = [f"{label} {batch} ({mode})" for label, batch, mode in cells]
    return catalog.plural("measured_before_switch_calls", len(before), count=ltr(catalog.number(len(before), 0), catalog),
                     cells=ltr(", ".join(names), catalog))


def read_corrections(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """The corrections of every study folder given (a folder, or the folder of a results file); UserError
    naming the file for an entry without its field, records or reason."""
    found = []
    for path in map(Path, paths):
        file = (path if path.is_dir() else path.parent) / CORRECTIONS
        if not file.is_file():
            continue
        try:
            entries = yaml.safe_load(file.read_text(encoding="utf-8")) or []
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            where = getattr(exc, "problem_mark", None)
            line = f" line {where.line + 1}" if where is not None else ""
            raise UserError(f"{file}:{line} not a YAML list of corrections ({str(exc).splitlines()[0]})") from None
        if not isinstance(entries, list):
            raise UserError(f"{file}: a list of corrections (field, records, reason), got {type(entries).__name__}")
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or not {"field", "records", "reason"} <= set(entry):
                raise UserError(f"{file}: entry {index} needs field, records (all, or record ids) and reason")
            problem = _entry_problem(entry)
            if problem:
                raise UserError(f"{file}: entry {index}: {problem}")
            found.append({**entry, "folder": file.parent.name})
    return found


def _entry_problem(entry: dict[str, Any]) -> str | None:
    """Why a correction cannot be said (a study folder travels with its corrections too), or None."""
    reasons = sorted(key[len("correction_"):] for key in Catalog("en").messages
                     if key.startswith("correction_") and not key.endswith("_one"))
    if not isinstance(entry["field"], str) or not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*", entry["field"]):
        return f"field must be a record field such as environment.git_commit, got {quoted(entry['field'])}"
    blocks = sorted(Record.model_fields)  # the record's blocks and top-level fields
    if entry["field"].split(".")[0] not in blocks:
        return f"field must be in one of a record's blocks ({', '.join(blocks)}), got {quoted(entry['field'])}"
    records = entry["records"]
    if records != "all" and not (isinstance(records, list) and all(isinstance(item, str) for item in records)):
        return f"records must be all or a list of record ids, got {quoted(records)}"
    if entry["reason"] not in reasons:
        return f"reason must be one the report can say ({', '.join(reasons)}), got {quoted(entry['reason'])}"
    return None


def correction_lines(corrections: Iterable[dict[str, Any]], records: list[Record],
                     catalog: Catalog) -> list[str]:
    """A sentence per correction: the field, how many of the page's records it concerns, the value they hold,
    and why it is wrong (the catalog's ``correction_<reason>``); KeyError for a reason no catalog knows."""
    lines = []
    for item in corrections:
        wanted = item["records"]
        concerned = [record for record in records
                     if wanted == "all" and record.origin and Path(record.origin[0]).parent.name == item["folder"]
                     or isinstance(wanted, list) and record.record_id in wanted]
        if not concerned:
            continue
        values = sorted({str(record.value_at(item["field"])) for record in concerned})
        lines.append(catalog.plural(f"correction_{item['reason']}", len(concerned), field=code(item["field"], catalog),
                               count=ltr(catalog.number(len(concerned), 0), catalog),
                               value=", ".join(code(value[:12], catalog) for value in values)))
    return lines
