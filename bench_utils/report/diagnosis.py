"""When compile loses, and what to use: the report's reading of ``bench_utils diagnose``'s remedies (docs/diagnosis.md).

Per slower cell (``measurement.slowdown.is_slower``): what got slower, every remedy measured for it with its
speed-up and interval, and a verdict in one line: the best remedy whose interval lies above 1 recovers it; else one
whose interval includes 1 leaves it open; else eager stays. "What to use" is, per device, model and batch size, the
configuration ``choose`` picks among those whose gate did not fail and whose interval lies above 1, else eager.
"""

from __future__ import annotations

import math

from babel.lists import format_list
import pandas as pd

from ..measurement import slowdown
from ..measurement.slowdown import diagnosable, rules_fired
from ..records.schema import ProfileBlock
from . import why
from .i18n import INDUCTOR_SEPARATOR, Catalog
from ..zoo.registry import label_of
from .markdown import environment_label, ltr, markdown_table, mode_label, number, rests_on, speedup_cells
from .tables import is_true
from ..vocabulary import COMPILED_MODE_ORDER, CompileMode, MemoryFormat, Status

SAME_CELL = ["environment", "model", "batch_size", "dtype"]


def _measured_compiled(data: pd.DataFrame) -> pd.DataFrame:
    if data.empty:
        return data
    return data[(data["compile_mode"] != CompileMode.EAGER) & (data["status"] == Status.OK) & data["speedup"].notna()]


def slower_cells(data: pd.DataFrame) -> pd.DataFrame:
    """The compiled cells ``measurement.slowdown.diagnosable`` says compile made slower, or left inconclusive,
    in the report's order (a remedy that loses too is its slow cell's verdict, not one of these)."""
    compiled = _measured_compiled(data)
    if compiled.empty:
        return compiled
    slower = pd.Series([diagnosable(compile_mode=row["compile_mode"], memory_format=row["memory_format"],
                                    shapes=row["shapes"], inductor=row["inductor"], study=row["study"],
                                    speedup=row["speedup"],
                                    interval=None if math.isnan(row["ci_low"]) else (row["ci_low"], row["ci_high"]))
                        for _, row in compiled.iterrows()], index=compiled.index, dtype=bool)
    return compiled[slower].sort_values(["environment", "task_rank", "label", "batch_size", "mode"])


def remedies_of(data: pd.DataFrame, slow: pd.Series) -> pd.DataFrame:
    """Every other configuration measured for the slow cell's model, batch size and dtype on its device."""
    compiled = _measured_compiled(data)
    same = (compiled[SAME_CELL] == slow[SAME_CELL]).all(axis=1) & (compiled["shapes"] == "static")
    other = ~((compiled["compile_mode"] == slow["compile_mode"]) & (compiled["memory_format"] == slow["memory_format"])
              & (compiled["inductor"] == slow["inductor"]))
    return compiled[same & other].sort_values("speedup", ascending=False)


def configuration(row: pd.Series, catalog: Catalog) -> str:
    """A measured configuration in words: its mode (with its Inductor configuration), and channels-last."""
    return _in_words(str(row["mode"]), row["memory_format"], catalog)


def variant_text(variant: slowdown.Variant, catalog: Catalog) -> str:
    """A remedy not measured, in words, as ``configuration`` names a measured one (``frame``'s mode name)."""
    mode = variant.compile_mode + (INDUCTOR_SEPARATOR + variant.inductor if variant.inductor != "default" else "")
    return _in_words(mode, variant.memory_format, catalog)


def _in_words(mode: str, memory_format: str, catalog: Catalog) -> str:
    text = mode_label(mode, catalog)
    if memory_format == MemoryFormat.CHANNELS_LAST:
        text = catalog.t("configuration_channels_last", configuration=text, layout=ltr("channels_last", catalog))
    return text


def _profile(slow: pd.Series) -> ProfileBlock | None:
    """The slow cell's profile (``frame``'s ``profile``), or None where it was not profiled."""
    profile = slow.get("profile")
    return profile if isinstance(profile, ProfileBlock) else None


def left_out(slow: pd.Series, catalog: Catalog) -> tuple[str | None, bool]:
    """The remedies the slow cell's profile points to that its study's backend cannot measure
    (``measurement.slowdown.measurable``), and why (None where there are none); and whether any can be."""
    profile = _profile(slow)
    cell = slowdown.Variant(str(slow["compile_mode"]), str(slow["memory_format"]), str(slow["inductor"]))
    chosen = slowdown.remedies(profile, cell, cuda=str(slow["device"]).startswith("cuda"))
    backend = slow.get("backend")
    can, cannot = slowdown.measurable(chosen, backend if isinstance(backend, str) else None)
    if not cannot:
        return None, bool(can)
    names = format_list([variant_text(remedy.variant, catalog) for remedy in cannot], locale=catalog.locale)
    return catalog.t("loses_left_out", remedies=names, backend=ltr(backend, catalog)), bool(can)


def _speedup(row: pd.Series, catalog: Catalog) -> str:
    value, interval = speedup_cells(row, catalog)
    return value if interval == "–" else f"{value} ({interval})"


def verdict(slow: pd.Series, remedies: pd.DataFrame, catalog: Catalog) -> str:
    """One line: the remedy that recovers the cell, one that leaves it open, or eager."""
    if remedies.empty:
        return catalog.t("loses_not_diagnosed")
    passed = remedies[remedies["parity"] != "fail"]
    for key, found in (("loses_recovered", passed[passed["ci_low"] > 1.0]),
                       ("loses_open", passed[passed["ci_high"] >= 1.0])):
        if not found.empty:
            best = found.iloc[0]
            # a remedy whose accuracy gate could not have failed: it did not fail, and says nothing
            blind = " " + catalog.t("loses_gate_blind") if is_true(best.get("parity_blind")) else ""
            return catalog.t(key, configuration=configuration(best, catalog), speedup=_speedup(best, catalog)) + blind
    return catalog.t("loses_stay_eager")


def what_got_slower(slow: pd.Series, catalog: Catalog) -> str:
    """The profile's reading, eager beside compiled, and the rules it fires; or that there is no profile."""
    profile = _profile(slow)
    rules = ", ".join(catalog.t(f"rule_{rule}") for rule in rules_fired(profile))
    if profile is None or profile.eager is None or profile.compiled is None:
        return catalog.t("loses_no_profile", rules=rules)
    return why.sentence(slow, catalog)[:-1] + "; " + catalog.t("loses_rules", rules=rules) + "."


def parity_word(row: pd.Series, catalog: Catalog) -> str:
    """The gate's verdict in the locale's words; a pass that could not have failed is no pass (``parity_blind``)."""
    if is_true(row.get("parity_blind")):
        return catalog.t("parity_blind")
    key = f"parity_{row['parity']}"
    return catalog.t(key) if key in catalog.messages else ltr(row["parity"], catalog)


def remedies_table(remedies: pd.DataFrame, catalog: Catalog) -> str:
    rows = [[configuration(row, catalog), *speedup_cells(row, catalog), parity_word(row, catalog)]
            for _, row in remedies.iterrows()]
    return markdown_table([catalog.t("col_remedy"), catalog.t("col_speedup_plain"), catalog.t("col_ci95"),
                           catalog.t("col_parity")], rows)


def losses_markdown(data: pd.DataFrame, catalog: Catalog) -> str:
    """Per slower cell: a heading, what got slower, its remedies' table and the verdict; a line where none is."""
    slow = slower_cells(data)
    if slow.empty:
        return catalog.t("loses_none")
    parts = []
    profiled = why.profiled(data)  # its busy shares, and its eager cell's verdict as "Why it got faster" reads it
    for index, row in slow.iterrows():
        remedies = remedies_of(data, row)
        heading = catalog.t("loses_cell", model=ltr(str(row["label"]), catalog), batch=ltr(str(row["batch_size"]), catalog),
                            mode=mode_label(str(row["mode"]), catalog),
                            device=environment_label(row["environment"], catalog), speedup=_speedup(row, catalog))
        body = [f"### {heading}", what_got_slower(profiled.loc[index] if index in profiled.index else row, catalog)]
        if not remedies.empty:
            body.append(remedies_table(remedies, catalog))
        cannot, any_measurable = left_out(row, catalog)
        if cannot:
            body.append(cannot)
        said = (verdict(row, remedies, catalog) if any_measurable or not remedies.empty
                else catalog.t("loses_nothing_measurable"))  # running diagnose would not change it
        body.append(f"**{said}**")
        parts.append("\n\n".join(body))
    return "\n\n".join(parts)


def simplicity(row: pd.Series) -> tuple[int, int, int]:
    """How much a configuration asks of its user, least first: the mode (torch.compile's default before the modes
    that add CUDA graphs or autotuning), then the layout (contiguous before channels-last), then Inductor's own
    configuration before another."""
    modes = [str(mode) for mode in COMPILED_MODE_ORDER]
    mode = str(row["compile_mode"])
    return (modes.index(mode) if mode in modes else len(modes),
            int(row["memory_format"] != MemoryFormat.CONTIGUOUS), int(row["inductor"] != "default"))


def overlap(one: pd.Series, other: pd.Series) -> bool:
    """Whether two speed-ups' 95 % intervals share a value: then the data cannot tell which is faster."""
    return bool(one["ci_low"] <= other["ci_high"] and other["ci_low"] <= one["ci_high"])


def choose(candidates: pd.DataFrame) -> tuple[pd.Series, list[pd.Series]]:
    """The configuration to use among ``candidates`` (each beats eager), and those it ties with: every candidate
    whose interval overlaps the fastest's ties with it (a gap of a percent inside two intervals is no evidence), and
    the simplest of those (``simplicity``) is chosen (docs/diagnosis.md, "What to use")."""
    fastest = candidates.sort_values("speedup", ascending=False, kind="stable").iloc[0]
    tied = [row for _, row in candidates.iterrows() if overlap(row, fastest)]
    tied.sort(key=simplicity)
    return tied[0], tied[1:]


def _use_text(chosen: pd.Series, tied: list[pd.Series], catalog: Catalog) -> str:
    text = configuration(chosen, catalog)
    if tied:
        text = catalog.t("use_tie", configuration=text,
                         others=format_list([configuration(row, catalog) for row in tied], locale=catalog.locale))
    return text


def _new_machine_text(row: pd.Series, catalog: Catalog) -> str:
    low, high = row.get("new_low"), row.get("new_high")
    if low is None or pd.isna(low):
        return "–"
    return ltr(f"{catalog.number(low, 2)}–{catalog.number(high, 2)}", catalog)


def what_to_use(data: pd.DataFrame, catalog: Catalog) -> str:
    """Per device, model and batch size (batch sizes in numeric order): the configuration whose gate did not fail
    and whose interval lies above 1, chosen by ``choose`` (the simplest of those tied with the fastest), its
    speed-up, cold compile and break-even; eager where none."""
    if data.empty:
        return catalog.t("no_results")
    rows = []
    ok = data[data["status"] == Status.OK]
    # the interval for a new machine's figure, where the spread between machines is known (``machine_coverage``)
    new_machine = "new_low" in data and bool(data["new_low"].notna().any())
    ordered = ok.sort_values(["environment", "task_rank", "label", "batch_size"], kind="stable")
    for (environment, _, model, batch, dtype), group in ordered.groupby(
            ["environment", "task_rank", "model", "batch_size", "dtype"], sort=False):
        candidates = _measured_compiled(group)
        candidates = candidates[(candidates["parity"] != "fail") & (candidates["ci_low"] > 1.0)
                                & (candidates["shapes"] == "static")]
        # no recommendation on a gate that could not have failed (outputs below its tolerance): say so instead
        blind = candidates["parity_blind"].map(is_true).astype(bool) if "parity_blind" in candidates else None
        unjudged = blind is not None and bool(blind.any())
        candidates = candidates[~blind] if blind is not None else candidates
        label = ltr(label_of(model), catalog)  # the model's, whatever layout wins
        where = [environment_label(environment, catalog), label, ltr(str(batch), catalog)]
        if data["dtype"].nunique() > 1:
            where[-1] += f" ({ltr(dtype, catalog)})"
        if candidates.empty:
            use = catalog.t("use_unjudged") if unjudged else mode_label(CompileMode.EAGER.value, catalog)
            rows.append([*where, use, *["–"] * (7 if new_machine else 6)])
            continue
        best, tied = choose(candidates)
        even = best["break_even"]
        # the gate as it was: never "passed" where it could not have failed (``parity_word``); not judged where it
        # did not run (its parity None or NaN)
        gate = parity_word(best, catalog) if isinstance(best.get("parity"), str) else catalog.t("flag_parity_none")
        beside = [_new_machine_text(best, catalog)] if new_machine else []
        rows.append([*where, _use_text(best, tied, catalog), *speedup_cells(best, catalog), *beside,
                     rests_on(best, catalog), gate, number(best["compile_s"], 1, catalog),
                     catalog.t("never") if even is None or pd.isna(even) else ltr(catalog.number(even, 0), catalog)])
    headers = [catalog.t("col_device"), catalog.t("col_model"), catalog.t("col_batch"), catalog.t("col_use"),
               catalog.t("col_speedup_plain"), catalog.t("col_ci95"),
               *([catalog.t("col_new_machine")] if new_machine else []), catalog.t("col_rests_on"),
               catalog.t("col_parity"), catalog.t("col_compile_s"), catalog.t("col_break_even")]
    table = markdown_table(headers, rows)
    return f"{catalog.t('use_new_machine_text')}\n\n{table}" if new_machine else table
