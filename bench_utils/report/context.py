"""The report's context: how the study was measured, on what, and the timer check.

Pure functions from records (or the frame) to text and Markdown tables.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..records.schema import EnvironmentBlock, Record
from .frame import device_name
from .i18n import Catalog
from .markdown import environment_label, ltr, markdown_table
from ..vocabulary import Status


def methodology_text(data: pd.DataFrame, catalog: Catalog) -> str:
    ok = data[data["status"] == Status.OK] if not data.empty else data
    if ok.empty:
        return catalog.t("no_results")
    timers = sorted(set(ok["timer"].dropna()))
    weights = sorted(set(ok["weights"].dropna()))
    return catalog.t(
        "methodology_text",
        timer="; ".join(catalog.t(f"timer_{timer}") if f"timer_{timer}" in catalog.messages else ltr(timer, catalog)
                        for timer in timers),
        # several studies' figures: "20 or 50", never "20, 50" (which reads as one number)
        warmup=catalog.alternatives([ltr(str(int(v)), catalog) for v in sorted(set(ok["warmup"].dropna()))]),
        runs=catalog.alternatives([ltr(str(int(v)), catalog) for v in sorted(set(ok["runs"].dropna()))]),
        # records written before the request was resolved may say "auto": shown as written
        weights="; ".join(catalog.t(f"weights_{w}") if f"weights_{w}" in catalog.messages
                          else ltr(str(w), catalog) for w in weights)) + (
        # what the intervals cover, where any is shown: one run's pairs (``measurement.paired``), not between runs
        " " + catalog.t("methodology_interval") if ok["ci_low"].notna().any() else "")


ENVIRONMENT_KEYS = ["torch_version", "torch_git_version", "torch_cuda_version", "cudnn_version",
                    "driver_version", "transformers_version", "timm_version", "triton_version",
                    "python_version", "cpu_model", "cpu_count_logical", "ram_total_bytes", "os_release",
                    "torch_num_threads", "tf32_matmul", "cudnn_benchmark", "git_commit"]


def environment_tables(records: Iterable[Record], catalog: Catalog) -> list[tuple[str, str]]:
    """One table per device: the environment of its latest record."""
    by_device: dict[str, EnvironmentBlock] = {}
    for record in records:
        by_device[device_name(record)] = record.environment
    tables = []
    for device, environment in sorted(by_device.items()):
        rows = []
        for key in ENVIRONMENT_KEYS:
            value = environment.read(key)
            if key == "ram_total_bytes" and value:
                value = f"{value / 2**30:.1f} GiB"
            rows.append([key, ltr(catalog.t("not_available") if value is None else str(value), catalog)])
        tables.append((environment_label(device, catalog),
                       markdown_table([catalog.t("col_key"), catalog.t("col_value")], rows)))
    return tables


def timer_check_text(paths: Iterable[str | os.PathLike], catalog: Catalog) -> str | None:
    """The timer check saved in a study folder (timer_check.json), in words; None if absent."""
    for path in map(Path, paths):
        saved = (path if path.is_dir() else path.parent) / "timer_check.json"
        if saved.exists():
            check = json.loads(saved.read_text(encoding="utf-8"))
            do_bench = "" if check.get("do_bench_median_ms") is None else " " + catalog.t(
                "timer_check_do_bench", reference=ltr("triton.testing.do_bench", catalog),
                ours=ltr(catalog.number(check["measure_median_ms"], 3), catalog),
                theirs=ltr(catalog.number(check["do_bench_median_ms"], 3), catalog),
                ratio=ltr(catalog.number(check["ratio_do_bench"], 3), catalog))
            return catalog.t(
                "timer_check_text", workload=ltr(check["workload"], catalog),
                device=ltr(check["device"], catalog), reference=ltr("torch.utils.benchmark.Timer", catalog),
                ours=ltr(catalog.number(check["measure_median_ms"], 3), catalog),
                theirs=ltr(catalog.number(check["torch_timer_median_ms"], 3), catalog),
                ratio=ltr(catalog.number(check["ratio_torch_timer"], 3), catalog),
                overhead=ltr(catalog.number(check["noop_overhead_median_us"], 2), catalog)) + do_bench
    return None
