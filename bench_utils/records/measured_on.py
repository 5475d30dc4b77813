"""What a cell was measured on and with, typed: its environment, its configuration, its model (``records.blocks``
holds the figures measured). Nothing here imports torch or pandas.
"""

from __future__ import annotations

from typing import Annotated, Literal

from annotated_types import Ge

from .blocks import Block
from .value_types import Count, MachineName, NamePart, PackageName, Positive, Version


class GpuEntry(Block):
    """A GPU as ``environment.capture`` lists it."""

    index: Count | None = None
    name: MachineName | None = None
    uuid: MachineName | None = None
    total_memory_bytes: Count | None = None


class EnvironmentBlock(Block):
    """What the cell was measured on (``environment.capture.capture_environment``); the keys a record's identity,
    the report and a study's environment files read are typed here, the rest (settings in force) are the block's
    own. ``python_version``, ``machine`` and ``torch_version`` name a study's environment file; ``packages`` (or, in
    records before it, the ``*_version`` keys) pin what ``make reproduce`` installs: each is checked to be what it
    says, never a path or a pip option."""

    torch_version: Version | None = None
    torch_git_version: str | None = None
    torch_cuda_version: str | None = None
    cudnn_version: int | str | None = None
    transformers_version: Version | None = None
    timm_version: Version | None = None
    triton_version: Version | None = None
    torchvision_version: Version | None = None
    numpy_version: Version | None = None
    python_version: NamePart | None = None
    machine: NamePart | None = None
    os_release: str | None = None
    cpu_model: MachineName | None = None
    cpu_count_logical: Count | None = None
    ram_total_bytes: Count | None = None
    torch_num_threads: Count | None = None
    driver_version: str | None = None
    gpus: list[GpuEntry] | None = None
    packages: dict[PackageName, Version] | None = None
    git_commit: str | None = None
    accelerator_type: str | None = None     # a cluster's declared kind of node; None locally
    cluster_node_id: str | None = None
    timestamp_utc: str | None = None

    def gpu(self, device: str) -> GpuEntry | None:
        """The GPU that ``device`` (such as 'cuda:0') designates; None for a CPU or a GPU not listed."""
        if not device.startswith("cuda"):
            return None
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        return next((gpu for gpu in self.gpus or [] if gpu.index == index), None)

    def gpu_name(self, device: str) -> str | None:
        """Name of the GPU that ``device`` designates; None for a CPU or a GPU not listed."""
        gpu = self.gpu(device)
        return gpu.name if gpu else None


class ConfigBlock(Block):
    """How the cell was measured: its settings under their record names (``records.build.measurement_settings``),
    the weights measured (None: nothing was) and the TF32 settings in force."""

    weights: Literal["random", "pretrained", "auto"] | None = None  # "auto": records before it was resolved
    weights_requested: Literal["random", "pretrained", "auto"] | None = None
    runs: Annotated[int, Ge(1)] | None = None
    warmup: Count | None = None
    blocks: Annotated[int, Ge(1)] | None = None
    seed: int | None = None
    tf32: str | None = None
    backend: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    sync: Literal["per-call", "pipelined"] | None = None
    gpu_memory_gib: Positive | None = None
    replicates: Annotated[int, Ge(2)] | None = None   # fresh processes the cell was split over (None: one)
    gpu_memory_fraction: Positive | None = None
    heap_frozen: bool | None = None  # its kernel froze what lives through its cells (``kernel_start``); None: before
    # records of compile ahead (an earlier design, removed): compile processes beside the kernel, "compiling"
    # through its timed windows or "paused" (stopped) through them; None: none beside it
    beside_compiles: Literal["compiling", "paused"] | None = None


class ModelBlock(Block):
    """The model measured (``zoo.loading``): its key, checkpoint and weights, and the image it was fed."""

    key: str | None = None
    label: str | None = None
    task: str | None = None
    checkpoint: str | None = None
    weights: str | None = None
    param_count: Count | None = None
