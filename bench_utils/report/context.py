"""The report's context: how the study was measured, on what, and the timer check.

Pure functions from records (or the frame) to text and Markdown tables.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..records.schema import Record
from .frame import device_name
from .i18n import Catalog
from .markdown import environment_label, ltr, markdown_table, number
from ..vocabulary import Status


def methodology_text(data: pd.DataFrame, catalog: Catalog) -> str:
    ok = data[data["status"] == Status.OK] if not data.empty else data
    if ok.empty:
        return catalog.t("no_results")
    timers = sorted(set(ok["timer"].dropna()))
    weights = sorted(set(ok["weights"].dropna()))
    beside = ok["beside_compiles"].value_counts()
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
        " " + catalog.t("methodology_interval") if ok["ci_low"].notna().any() else "") + (
        # cells measured in replicates: their intervals are over fresh processes (``measurement.replicates``)
        " " + catalog.t("methodology_replicates") if (ok["replicates"].fillna(1) > 1).any() else "") + "".join(
        # compile processes beside the kernel (compile ahead): how many cells were timed with them compiling, or paused
        " " + catalog.t(f"methodology_beside_{state}", cells=ltr(str(beside[state]), catalog))
        for state in ("compiling", "paused") if state in beside)


# The environment's keys the page shows, in its order, each under its name in the catalogs (``env_<key>``). TF32 is
# shown for cuDNN's convolutions as for cuBLAS's matmuls: the H200's float32 cells ran TF32 convolutions (on by
# torch's default) with TF32 matmuls off, and a page naming only the second read as "no TF32".
ENVIRONMENT_KEYS = ["torch_version", "torch_git_version", "torch_cuda_version", "cudnn_version",
                    "driver_version", "transformers_version", "timm_version", "triton_version",
                    "python_version", "cpu_model", "cpu_count_logical", "ram_total_bytes", "os_release",
                    "torch_num_threads", "tf32_matmul", "tf32_cudnn", "cudnn_benchmark", "git_commit"]


def environment_tables(records: Iterable[Record], catalog: Catalog) -> list[tuple[str, str]]:
    """One table per device: the environment of its latest record, each key under its name in the page's language
    and its value as a reader reads it (cuDNN 9.19.0, not 91900; on or off, not True or False). Where the device's
    records came from several machines of that name (another GPU, host or commit: another lease), each is named with
    its number of records, so that a reader sees which figures came from where."""
    of_device: dict[str, list[Record]] = {}
    for record in records:
        of_device.setdefault(device_name(record), []).append(record)
    tables = []
    for device, device_records in sorted(of_device.items()):
        environment = device_records[-1].environment
        rows = [[catalog.t(f"env_{key}"), environment_value(key, environment.read(key), catalog)]
                for key in ENVIRONMENT_KEYS]
        for key, values in machine_spread(device_records).items():
            rows.append([catalog.t(f"env_{key}_all"), ltr(", ".join(f"{value} ({where})" for value, where in values),
                                                          catalog)])
        tables.append((environment_label(device, catalog),
                       markdown_table([catalog.t("col_key"), catalog.t("col_value")], rows)))
    return tables


def gpu_uuid(record: Record) -> str | None:
    """The UUID of the GPU a record's cell ran on, shortened to its first group (bdc136f9), as a page names it."""
    gpu = record.environment.gpu(record.cell.device)
    return gpu.uuid.removeprefix("GPU-").split("-")[0] if gpu and gpu.uuid else None


# what differs between the machines of one name that a page names with its records' count (where more than one)
SPREAD_KEYS = {"gpu_uuid": gpu_uuid, "cpu_model": lambda record: record.environment.cpu_model,
               "git_commit": lambda record: (record.environment.read("git_commit") or "")[:7] or None}
# how the records were measured, where that differs: each value with the GPUs (else the records' count) it was on
PROTOCOL_KEYS = {"torch_num_threads": lambda record: record.environment.read("torch_num_threads"),
                 "cpu_affinity_count": lambda record: record.environment.read("cpu_affinity_count"),
                 "runs": lambda record: record.config.runs, "blocks": lambda record: record.config.blocks,
                 "beside_compiles": lambda record: record.config.beside_compiles or "-"}


def machine_spread(records: list[Record]) -> dict[str, list[tuple[str, str]]]:
    """Per key of ``SPREAD_KEYS`` whose value differs between ``records``: each value, in the order first met, and
    how many records have it; where every record names its GPU, ``PROTOCOL_KEYS`` too, with the GPUs they ran on."""
    spread = {}
    on_gpus = all(gpu_uuid(record) for record in records)
    for key, read in {**SPREAD_KEYS, **(PROTOCOL_KEYS if on_gpus else {})}.items():
        found: dict[str, list[Record]] = {}
        for record in records:
            value = read(record)
            if value is not None:
                found.setdefault(str(value), []).append(record)
        if len(found) > 1:
            spread[key] = [(value, ", ".join(dict.fromkeys(str(gpu_uuid(record)) for record in kept))
                            if key in PROTOCOL_KEYS else str(len(kept))) for value, kept in found.items()]
    return spread


def environment_value(key: str, value: object, catalog: Catalog) -> str:
    """One environment value as the page shows it."""
    if value is None:
        return ltr(catalog.t("not_available"), catalog)
    if isinstance(value, bool):
        return catalog.t("setting_on" if value else "setting_off")
    if key == "ram_total_bytes" and isinstance(value, (int, float)):
        return ltr(f"{catalog.number(value / 2**30, 1)} GiB", catalog)
    if key == "cudnn_version":
        return ltr(cudnn_version_text(value), catalog)
    return ltr(str(value), catalog)


def cudnn_version_text(value: object) -> str:
    """cuDNN's version as torch reports it, one integer, in dotted form: major * 10000 + minor * 100 + patch since
    cuDNN 9 (91900: 9.19.0), major * 1000 + minor * 100 + patch before (8902: 8.9.2); anything else as written."""
    text = str(value)
    if not text.isdigit():
        return text
    major, rest = divmod(int(text), 10000 if int(text) >= 90000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def timer_check_text(paths: Iterable[str | os.PathLike], catalog: Catalog) -> str | None:
    """The timer check saved in a study folder (timer_check.json), in words; None if absent."""
    for path in map(Path, paths):
        saved = (path if path.is_dir() else path.parent) / "timer_check.json"
        if saved.exists():
            check = json.loads(saved.read_text(encoding="utf-8"))
            ours = number(check["measure_median_ms"], 3, catalog)
            do_bench = "" if check.get("do_bench_median_ms") is None else " " + catalog.t(
                "timer_check_do_bench", reference=ltr("triton.testing.do_bench", catalog), ours=ours,
                theirs=number(check["do_bench_median_ms"], 3, catalog),
                ratio=number(check["ratio_do_bench"], 3, catalog))
            return catalog.t(
                "timer_check_text", workload=ltr(check["workload"], catalog), device=ltr(check["device"], catalog),
                reference=ltr("torch.utils.benchmark.Timer", catalog), ours=ours,
                theirs=number(check["torch_timer_median_ms"], 3, catalog),
                ratio=number(check["ratio_torch_timer"], 3, catalog),
                overhead=number(check["noop_overhead_median_us"], 2, catalog)) + do_bench
    return None
