"""The environment of a measurement, as every result record carries it.

The machine and software facts are captured once per process; the settings a cell may change (thread counts, TF32,
cudnn.benchmark) and the timestamp afresh on every call. No host name, user name or home-directory path is collected.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import os
import platform
from pathlib import Path
import subprocess
from typing import Any

import psutil

from .packages import measured_with
from ..paths import PROJECT_ROOT, REPORTS_DIR

# Set by a cluster node's task (``bench_utils.cluster.node``) for its kernels: Ray's accelerator type and the node's id
ACCELERATOR_TYPE_ENV = "BENCH_UTILS_ACCELERATOR_TYPE"
CLUSTER_NODE_ENV = "BENCH_UTILS_CLUSTER_NODE"

# torch is imported inside the functions that read it: importing this module (as the records do) must not load torch


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _git(*args: str) -> str | None:
    try:
        # no optional locks: a status taken while the user commits must not hold (or meet) the index's lock
        result = subprocess.run(["git", "--no-optional-locks", *args], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


# The commit a copy without .git (a GPU host's working tree) was made from, written by ``make wheelhouse`` (carried)
SOURCE_COMMIT_FILE = ".source-commit.json"
# The published studies' folder: a study measured into it rewrites tracked files, which says nothing of the code
STUDY_OUTPUTS = REPORTS_DIR.relative_to(PROJECT_ROOT).as_posix()


def project_git() -> dict[str, Any]:
    """Commit of this project's checkout and whether tracked files other than ``STUDY_OUTPUTS`` differ from it;
    both None, with ``git_commit_note`` saying why, where there is no repository or the one found is not the
    project's own (a copy inside another checkout). A copy that carries ``SOURCE_COMMIT_FILE`` records its commit."""
    root = _git("rev-parse", "--show-toplevel")
    if root is not None and Path(root).resolve() == PROJECT_ROOT.resolve():
        commit = _git("rev-parse", "HEAD")
        if commit is None:
            return {"git_commit": None, "git_dirty": None, "git_commit_note": "the checkout has no commit"}
        status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){STUDY_OUTPUTS}")
        return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None,
                "git_commit_note": None}
    copied = _source_commit()
    if copied is not None:
        return copied
    note = ("not a git checkout" if root is None else "the project is not the root of the git repository around it "
            "(a copy inside another checkout): that repository's commit is not this code's")
    return {"git_commit": None, "git_dirty": None, "git_commit_note": note}


def _source_commit() -> dict[str, Any] | None:
    """The commit a copy of the project was made from (``write_source_commit``), or None."""
    try:
        written = json.loads((PROJECT_ROOT / SOURCE_COMMIT_FILE).read_text(encoding="utf-8"))
        commit, dirty, at = written["git_commit"], written["git_dirty"], written["written_utc"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {"git_commit": commit, "git_dirty": dirty,
            "git_commit_note": f"a copy with no repository of its own: the commit of the checkout it was copied "
                               f"from, written to {SOURCE_COMMIT_FILE} at {at}"}


def write_source_commit() -> Path:
    """Write this checkout's commit, for a copy of it that travels without ``.git`` (``make wheelhouse``)."""
    found = project_git()
    if found["git_commit"] is None or found["git_commit_note"] is not None:
        raise SystemExit(f"no commit of this project's own to write: {found['git_commit_note']}")
    path = PROJECT_ROOT / SOURCE_COMMIT_FILE
    stamp = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    path.write_text(json.dumps({"git_commit": found["git_commit"], "git_dirty": found["git_dirty"],
                                "written_utc": stamp}) + "\n", encoding="utf-8")
    return path


def _nvml_gpus() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every GPU NVML sees, and the driver facts; empty where NVML is absent."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return [], {"nvml": False}
    facts: dict[str, Any] = {"nvml": True}
    try:
        facts["driver_version"] = pynvml.nvmlSystemGetDriverVersion()
        cuda_driver = pynvml.nvmlSystemGetCudaDriverVersion()
        facts["cuda_driver_version"] = f"{cuda_driver // 1000}.{cuda_driver % 1000 // 10}"
    except Exception:
        pass
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        gpu: dict[str, Any] = {"index": index, "name": pynvml.nvmlDeviceGetName(handle),
                               "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)}
        for key, query in (("power_limit_w", lambda: pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000),
                           ("sm_clock_max_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                           ("persistence_mode", lambda: bool(pynvml.nvmlDeviceGetPersistenceMode(handle))),
                           ("uuid", lambda: pynvml.nvmlDeviceGetUUID(handle))):  # torch's gpus[].uuid, prefixed
            try:
                gpu[key] = query()
            except Exception:
                gpu[key] = None
        gpus.append(gpu)
    return gpus, facts


def _torch_gpus() -> list[dict[str, Any]]:
    """The GPUs torch can use here (after CUDA_VISIBLE_DEVICES), with compute capability."""
    import torch

    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpus.append({"index": index, "name": props.name,
                     "memory_total_bytes": int(props.total_memory),
                     "compute_capability": f"{props.major}.{props.minor}",
                     "multiprocessors": props.multi_processor_count,
                     "uuid": str(getattr(props, "uuid", "")) or None})  # CUDA's; NVML's is GPU-/MIG-<uuid>
    return gpus


@functools.lru_cache(maxsize=1)
def _static_environment() -> dict[str, Any]:
    import torch

    nvml_gpus, nvml_facts = _nvml_gpus()
    memory = psutil.virtual_memory()
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "os": platform.system(),
        "os_release": platform.release(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "cpu_affinity_count": affinity,
        "ram_total_bytes": int(memory.total),
        "torch_version": torch.__version__,
        "torch_git_version": torch.version.git_version,
        "torch_cuda_version": torch.version.cuda,
        "cudnn_version": cudnn,
        "cuda_available": torch.cuda.is_available(),
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        # torch's view (visible devices) first; NVML's view (all devices) beside it.
        "gpus": _torch_gpus(),
        "nvml_gpus": nvml_gpus,
        "nvml_available": nvml_facts.get("nvml", False),
        "driver_version": nvml_facts.get("driver_version"),
        "cuda_driver_version": nvml_facts.get("cuda_driver_version"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        **{f"{name}_version": _version(name) for name in ("transformers", "timm", "torchvision", "triton", "numpy")},
        "bench_utils_version": _version("bench-utils"),
        **project_git(),
        # every package a cell imports, at its version: what a study's environment file is derived from
        "packages": measured_with(),
    }


# torch's per-backend float32 settings, ``torch.backends.<path>.fp32_precision`` (torch 2.9 on)
FP32_PRECISION_PATHS = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")


def fp32_precision_settings() -> dict[str, str] | None:
    """torch's per-backend float32 precisions by path ({"cuda.matmul": "tf32", ...}); None on a torch
    without that API (before 2.9), where the legacy flags say it all."""
    import torch

    found = {}
    for path in FP32_PRECISION_PATHS:
        try:
            found[path] = functools.reduce(getattr, path.split("."), torch.backends).fp32_precision
        except AttributeError:  # a torch without this backend's setting
            continue
    return found if {"cuda.matmul", "cudnn.conv"} <= found.keys() else None


def fp32_math_in_force() -> dict[str, Any]:
    """The float32 math in force: TF32 for cuBLAS matmuls and cuDNN convolutions, the matmul precision by its legacy
    name, and ``fp32_precision_settings()``. Read through the per-backend API where torch has it: torch raises on
    the legacy getters once the two APIs disagree (``variants.precision.set_fp32_math`` sets both)."""
    import torch

    settings = fp32_precision_settings()
    if settings is None:
        return {"tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
                "float32_matmul_precision": torch.get_float32_matmul_precision(), "fp32_precision": None}
    tf32_matmul = settings["cuda.matmul"] == "tf32"
    # the legacy names as torch maps them: "medium" is bf16 for oneDNN matmuls, "high" TF32 for cuBLAS
    legacy_name = "medium" if settings.get("mkldnn.matmul") == "bf16" else "high" if tf32_matmul else "highest"
    return {"tf32_matmul": tf32_matmul, "tf32_cudnn": settings["cudnn.conv"] == "tf32",
            "float32_matmul_precision": legacy_name, "fp32_precision": settings}


def runtime_settings() -> dict[str, Any]:
    """Settings that a cell may change, read now."""
    import torch

    math = fp32_math_in_force()
    return {
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        **{key: math[key] for key in ("tf32_matmul", "tf32_cudnn", "float32_matmul_precision")},
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def cluster_placement() -> dict[str, Any]:
    """Where a cluster placed this process: the accelerator type it was scheduled for and the
    cluster node's id (both null outside a cluster). Read afresh: one worker runs many tasks."""
    return {"accelerator_type": os.environ.get(ACCELERATOR_TYPE_ENV) or None,
            "cluster_node_id": os.environ.get(CLUSTER_NODE_ENV) or None}


def capture_environment() -> dict[str, Any]:
    """The full environment: static facts (cached), current settings, placement, UTC timestamp."""
    return {
        **_static_environment(),
        **runtime_settings(),
        **cluster_placement(),
        "timestamp_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def format_environment(environment: dict[str, Any]) -> str:
    """A two-column plain-text table of an environment, for terminals and logs."""
    rows = []
    for key, value in environment.items():
        if key in ("gpus", "nvml_gpus"):
            if not value:
                rows.append((key, "none"))
            for gpu in value:
                memory = gpu.get("memory_total_bytes")
                gib = f", {memory / 2**30:.1f} GiB" if memory else ""
                cc = f", sm {gpu['compute_capability']}" if gpu.get("compute_capability") else ""
                rows.append((f"{key}[{gpu['index']}]", f"{gpu['name']}{gib}{cc}"))
            continue
        if key == "packages":
            value = f"{len(value)} distributions (--json lists them)"
        elif key.endswith("_bytes") and isinstance(value, int):
            value = f"{value / 2**30:.1f} GiB"
        rows.append((key, "n/a" if value is None else str(value)))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in rows)
