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
from .i18n import Catalog

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


def compare_environments(data: pd.DataFrame, baseline: str, candidate: str, tolerance: float = 0.10,
                         catalog: Catalog | None = None) -> pd.DataFrame:
    """One row per compiled cell measured in both environments, with ``verdict`` (regression, improvement,
    inconclusive or same) and ``why``, in ``catalog``'s words (English by default)."""
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
    catalog = catalog or Catalog("en")
    verdicts = [_verdict(row, tolerance, catalog) for row in both.itertuples()]
    both["verdict"] = [verdict for verdict, _ in verdicts]
    both["why"] = [why for _, why in verdicts]
    both = both.sort_values(KEYS).drop(columns=["task_rank", "speedup_method_base", "speedup_method_cand"])
    both = both.rename(columns={"label": "model"})
    return both.reset_index(drop=True)


def _verdict(row, tolerance: float, catalog: Catalog) -> tuple[str, str]:
    status = catalog.status_name
    if row.status_base == Status.OK and row.status_cand != Status.OK:
        return "regression", catalog.t("why_no_longer_ok", now=status(row.status_cand))
    if row.status_base != Status.OK and row.status_cand == Status.OK:
        return "improvement", catalog.t("why_now_ok", was=status(row.status_base))
    if row.status_base != Status.OK:
        return "inconclusive", catalog.t("why_neither_ok", now=status(row.status_cand), was=status(row.status_base))
    if row.parity_base == "pass" and row.parity_cand == "fail":
        return "regression", catalog.t("why_gate_failed")
    if row.speedup_method_base != paired.METHOD or row.speedup_method_cand != paired.METHOD:
        return "inconclusive", catalog.t("why_other_method")
    if not (np.isfinite(row.ratio_low) and np.isfinite(row.ratio_high)) or row.ratio_low == row.ratio_high:
        return "inconclusive", catalog.t("why_no_interval")
    if row.ratio_high < 1 and row.speedup_ratio < 1 - tolerance:
        return "regression", catalog.t("why_lower", percent=catalog.percent(1 - row.speedup_ratio))
    if row.ratio_low > 1 and row.speedup_ratio > 1 / (1 - tolerance):  # the mirror of 1 - tolerance
        return "improvement", catalog.t("why_higher", percent=catalog.percent(row.speedup_ratio - 1))
    return "same", ""
