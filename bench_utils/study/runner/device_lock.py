"""One measurement per device on this host, whichever runner or command is measuring (docs/study.md, *One
measurement per device on the host*): an ``flock`` on a file per physical device, released when its holder dies.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ...errors import UserError

def lock_name(device: str, cuda_visible_devices: str | None = None) -> str:
    """The file name that stands for ``device`` on this host: the physical GPU (through
    CUDA_VISIBLE_DEVICES, as a kernel pinned to it would see it), or the CPU."""
    if not device.startswith("cuda"):
        return "cpu.lock"
    from .papermill_execution import visible_devices_for

    physical = visible_devices_for(device, cuda_visible_devices)
    return f"cuda-{re.sub(r'[^A-Za-z0-9_.-]', '_', physical)}.lock"


@contextmanager
def device_lock(device: str, *, say: Callable[[str], None] = lambda line: None,
                cancelled: Callable[[], bool] = lambda: False, poll_s: float = 0.5) -> Iterator[bool]:
    """Hold ``device`` for the block (``as held``: True); wait, saying so once, while another
    process holds it; give up (``held`` False) as soon as ``cancelled()`` is true."""
    # where the device locks live: $BENCH_UTILS_LOCK_DIR, else the host's temporary folder
    directory = Path(os.environ.get("BENCH_UTILS_LOCK_DIR") or Path(tempfile.gettempdir()) / "bench_utils-device-locks")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / lock_name(device, os.environ.get("CUDA_VISIBLE_DEVICES"))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if cancelled():
                    yield False
                    return
                if not told:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
                    say(f"waiting for {device}: another measurement (pid {holder}) holds it")
                    told = True
                time.sleep(poll_s)  # a plain blocking flock could not be interrupted by Ctrl-C
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield True
    finally:
        os.close(fd)  # releases the lock


def split_cpus(cpus: set[int] | list[int], workers: int) -> list[set[int]]:
    """``cpus`` cut into ``workers`` disjoint, contiguous, near-equal sets (one per worker), so
    that two workers' kernels never compete for a core; one worker keeps them all."""
    ordered = sorted(cpus)
    if workers > len(ordered):
        raise UserError(f"{workers} workers need at least as many CPUs; this process may use {len(ordered)}")
    size, extra = divmod(len(ordered), workers)
    parts, start = [], 0
    for index in range(workers):
        end = start + size + (1 if index < extra else 0)
        parts.append(set(ordered[start:end]))
        start = end
    return parts
