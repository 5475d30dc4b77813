"""Two environments side by side (two GPUs, two torch versions), with the regressions named (docs/report.md,
"Two environments", says what a regression, an improvement and an inconclusive cell are).

Verdicts judge the speed-up over eager; the compiled latency ratio is shown, not judged (two GPUs differ in latency
by design). The ratio's interval is Welch's, in log space, from each speed-up's own interval and pair count. Its
``tolerance`` is there because a run's interval covers the noise within that run, not between runs: two ``make
report`` runs on one CPU gave DETR 1.18x and 1.27x, each interval excluding the other.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import UserError
from ..measurement import paired
from ..vocabulary import CompileMode, Status

KEYS = ["task_rank", "label", "batch_size", "mode", "dtype"]
SHOWN = ["mean_ms", "speedup", "ci_low", "ci_high", "pairs", "speedup_method", "parity", "status"]


def log_standard_error(low, high, pairs):
    """The standard error of log(speed-up) that its 95 % interval implies: the interval is
    Student's t on the pairs' log ratios (``measurement.paired``), pairs - 1 degrees of freedom."""
    return (np.log(high) - np.log(low)) / (2 * stats.t.ppf(0.975, np.asarray(pairs, dtype=float) - 1))


def ratio_interval(base, base_low, base_high, base_pairs, cand, cand_low, cand_high, cand_pairs):
    """candidate / baseline speed-up and its 95 % interval: Welch's, in log space, from each
    speed-up's own interval and pair count (the two runs are independent)."""
    se_base = log_standard_error(base_low, base_high, base_pairs)
    se_cand = log_standard_error(cand_low, cand_high, cand_pairs)
    variance = se_base ** 2 + se_cand ** 2
    freedom = variance ** 2 / (se_base ** 4 / (np.asarray(base_pairs, dtype=float) - 1)
                               + se_cand ** 4 / (np.asarray(cand_pairs, dtype=float) - 1))
    spread = stats.t.ppf(0.975, freedom) * np.sqrt(variance)
    log_ratio = np.log(cand) - np.log(base)
    return np.exp(log_ratio), np.exp(log_ratio - spread), np.exp(log_ratio + spread)


def compare_environments(data: pd.DataFrame, baseline: str, candidate: str,
                         tolerance: float = 0.10) -> pd.DataFrame:
    """One row per compiled cell measured in both environments, with ``verdict`` (regression,
    improvement or same) and ``why``."""
    present = sorted(set(data["environment"])) if not data.empty else []
    for name in (baseline, candidate):
        if name not in present:
            raise UserError(f"no environment {name!r} in the results; they hold: {', '.join(present) or 'none'}")
    if baseline == candidate:
        raise UserError("baseline and candidate are the same environment")
    if not 0 <= tolerance < 1:
        raise UserError(f"tolerance is a fraction in [0, 1), not {tolerance}")
    compiled = data[data["mode"] != CompileMode.EAGER]
    side = {name: compiled[compiled["environment"] == name][KEYS + SHOWN] for name in (baseline, candidate)}
    both = pd.merge(side[baseline], side[candidate], on=KEYS, suffixes=("_base", "_cand"))
    ratio, low, high = ratio_interval(*(both[f"{field}_{side}"] for side in ("base", "cand")
                                        for field in ("speedup", "ci_low", "ci_high", "pairs")))
    both["speedup_ratio"], both["ratio_low"], both["ratio_high"] = ratio, low, high
    # > 1: the candidate's compiled model is slower (no interval: shown, not judged)
    both["compiled_latency_ratio"] = both["mean_ms_cand"] / both["mean_ms_base"]
    both[["pairs_base", "pairs_cand"]] = both[["pairs_base", "pairs_cand"]].astype(float).round().astype("Int64")
    verdicts = [_verdict(row, tolerance) for row in both.itertuples()]
    both["verdict"] = [verdict for verdict, _ in verdicts]
    both["why"] = [why for _, why in verdicts]
    both = both.sort_values(KEYS).drop(columns=["task_rank", "speedup_method_base", "speedup_method_cand"])
    both = both.rename(columns={"label": "model"})
    return both.reset_index(drop=True)


def _verdict(row, tolerance: float) -> tuple[str, str]:
    if row.status_base == Status.OK and row.status_cand != Status.OK:
        return "regression", f"{row.status_cand} (was ok)"
    if row.status_base != Status.OK and row.status_cand == Status.OK:
        return "improvement", f"ok (was {row.status_base})"
    if row.status_base != Status.OK:
        return "inconclusive", f"{row.status_cand} (was {row.status_base})"
    if row.parity_base == "pass" and row.parity_cand == "fail":
        return "regression", "fails the accuracy gate (passed)"
    if row.speedup_method_base != paired.METHOD or row.speedup_method_cand != paired.METHOD:
        return "inconclusive", "speed-up intervals of another method: not comparable here"
    if not (np.isfinite(row.ratio_low) and np.isfinite(row.ratio_high)) or row.ratio_low == row.ratio_high:
        return "inconclusive", "no interval for a speed-up (fewer than 2 pairs, or none recorded)"
    if row.ratio_high < 1 and row.speedup_ratio < 1 - tolerance:
        return "regression", f"speed-up {1 - row.speedup_ratio:.0%} lower"
    if row.ratio_low > 1 and row.speedup_ratio > 1 / (1 - tolerance):  # the mirror of 1 - tolerance
        return "improvement", f"speed-up {row.speedup_ratio - 1:.0%} higher"
    return "same", ""


def highlighted(comparison: pd.DataFrame):
    """The comparison as a pandas Styler: regressions in red, improvements in green."""
    colours = {"regression": "background-color: #f8d7da", "improvement": "background-color: #d4edda",
               "inconclusive": "background-color: #fff3cd"}

    def row_style(row: pd.Series) -> list[str]:
        return [colours.get(row["verdict"], "")] * len(row)

    # escape: the names and reasons are the records' (a Styler shows its cells as HTML otherwise)
    return comparison.style.apply(row_style, axis=1).format(precision=3, na_rep="–", escape="html").hide(axis="index")
