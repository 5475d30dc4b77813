"""The Jupyter kernel that executes the notebooks: its name, installing it, and speaking to it (docs/study.md).

The study and the report both execute notebooks with papermill in this kernel (this interpreter), so it lives below
both. papermill speaks to it over Unix sockets (``ENGINE_NAME``): localhost TCP can be read by any user of the
machine. ``python -m bench_utils.kernel`` is papermill's command line with that engine. A command's kernels keep
their files in a folder of the command's own (``kernel_folder``), removed when the command ends however it ends.
"""

from __future__ import annotations

from contextlib import contextmanager
import functools
import os
from pathlib import Path
import shutil
import sys
import tempfile
import time
from typing import Iterator
import uuid

KERNEL_NAME = "bench-utils"
KERNEL_DISPLAY_NAME = "Python (bench-utils)"
ENGINE_NAME = "bench-utils"
UNIX_SOCKET_PATH_MAX = 107  # bytes: sun_path holds 108, the last a NUL
# Where a kernel started in this process writes its stderr, where set (the report's); unset, it shares this process's
KERNEL_STDERR_ENV = "BENCH_UTILS_KERNEL_STDERR"
# The folder of the connection files and sockets of the kernels this process and its children start
KERNEL_DIR_ENV = "BENCH_UTILS_KERNEL_DIR"
IPYTHON_DIR_ENV = "IPYTHONDIR"  # IPython's own: its profile and history database go there
STALE_AFTER_S = 3600  # a killed command's kernel folder, unchanged this long, is the next command's to remove


@contextmanager
def kernel_folder() -> Iterator[str]:
    """A private folder (mode 0700) for the connection files and sockets of every kernel started within, by this
    process or its children; removed on leaving, with whatever a killed kernel left. Nested: the outer one's."""
    if os.environ.get(KERNEL_DIR_ENV):
        yield os.environ[KERNEL_DIR_ENV]
        return
    remove_stale_folders()
    folder = tempfile.mkdtemp(prefix=f"kernels-{os.getpid()}-")  # short: a Unix socket path holds 107 bytes
    ipython_dir = os.environ.get(IPYTHON_DIR_ENV)
    os.environ[KERNEL_DIR_ENV] = folder
    os.environ[IPYTHON_DIR_ENV] = os.path.join(folder, "ipython")  # IPython's profile and history: not the home's
    try:
        yield folder
    finally:
        os.environ.pop(KERNEL_DIR_ENV, None)
        if ipython_dir is None:
            os.environ.pop(IPYTHON_DIR_ENV, None)
        else:
            os.environ[IPYTHON_DIR_ENV] = ipython_dir
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale_folders() -> None:
    """The kernel folders of commands killed outright (SIGKILL: no cleanup of theirs ran), this user's, whose process
    is gone: the next command's to remove. A folder named by a living process stays (another command's)."""
    import psutil

    for path in Path(tempfile.gettempdir()).glob("kernels-*-*"):
        pid = path.name.split("-")[1]
        try:
            stat = path.stat()
        except OSError:
            continue
        # an hour unchanged too: a process of another PID namespace sharing this temp folder is not seen here
        idle = time.time() - stat.st_mtime > STALE_AFTER_S
        if path.is_dir() and stat.st_uid == os.getuid() and idle and pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def ensure_kernel() -> str:
    """Install the project's kernel (this interpreter) into the environment if missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL_NAME not in KernelSpecManager().find_kernel_specs():
        from ipykernel.kernelspec import install

        install(kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY_NAME, prefix=sys.prefix)
    return KERNEL_NAME


@functools.cache  # once a process: a report renders one notebook per locale
def register_engine() -> str:
    """Register papermill's engine for this kernel (``engine_name=``, ``--engine``); return its name."""
    from jupyter_client.manager import AsyncKernelManager
    from papermill.engines import NBClientEngine, papermill_engines
    from traitlets import default

    class UnixSocketKernelManager(AsyncKernelManager):
        """A kernel of this machine, its sockets beside its connection file in the command's kernel folder
        (``kernel_folder``; the temp folder outside one): a path of its own per kernel, where jupyter_client's
        default would be shared by the kernels a runner starts side by side. A path too long for a socket: TCP."""

        @default("connection_file")
        def _connection_file_default(self) -> str:
            folder = os.environ.get(KERNEL_DIR_ENV) or tempfile.gettempdir()
            return os.path.join(folder, f"kernel-{uuid.uuid4().hex[:16]}.json")

        @default("transport")
        def _transport_default(self) -> str:
            longest = os.path.splitext(self.connection_file)[0] + "-ipc-99999"  # ports count from 1
            return "ipc" if len(os.fsencode(longest)) <= UNIX_SOCKET_PATH_MAX else "tcp"

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            target = os.environ.get(KERNEL_STDERR_ENV)
            if not target:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            with open(target, "ab") as stderr:  # the kernel keeps its own descriptor
                return await super()._async_launch_kernel(kernel_cmd, **{**kw, "stderr": stderr})

    class UnixSocketEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            kwargs.setdefault("kernel_manager_class", UnixSocketKernelManager)
            # Killed once its last cell has run: each cell appends its records fsynced and keeps its caches itself,
            # so a graceful exit only cost time (docs/study.md).
            kwargs.setdefault("shutdown_kernel", "immediate")
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register(ENGINE_NAME, UnixSocketEngine)
    return ENGINE_NAME


def end_tree(pid: int) -> None:
    """A kernel's process tree (or papermill's and its kernel's) ended: SIGKILL ``pid`` and all its descendants,
    children first found, then wait for them."""
    import psutil

    try:
        parent = psutil.Process(pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def end_children() -> None:
    """End this process's children (a report's or a re-run's kernels) and their trees."""
    import psutil

    for child in psutil.Process().children():
        end_tree(child.pid)


def _end_kernels_then_interrupt(signum, frame) -> None:
    """Ctrl-C: the kernels this process started end first (killed, they print nothing), then the interrupt
    unwinds papermill; else a kernel whose parent closes its sockets prints a ZMQ traceback."""
    end_children()
    raise KeyboardInterrupt


if __name__ == "__main__":
    # jsonschema, which nbformat imports, builds rfc3987_syntax's grammar for an IRI check no notebook schema uses:
    # 1.4 s of every papermill process (one per kernel) on a 2-core CPU. None in sys.modules: its import fails fast.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import click
    import signal
    from papermill.cli import papermill

    register_engine()
    signal.signal(signal.SIGINT, _end_kernels_then_interrupt)
    with kernel_folder():  # a runner's kernel uses the runner's
        try:  # not click's standalone mode: its Ctrl-C is "Aborted!" and exit 1
            status = papermill(standalone_mode=False) or 0
        except click.ClickException as exc:
            exc.show()
            status = exc.exit_code
        except (KeyboardInterrupt, click.exceptions.Abort):  # Ctrl-C (explore.ipynb...): one line
            print("interrupted: the notebook's run stopped; its output notebook holds the cells run so far",
                  file=sys.stderr)
            status = 130
    sys.exit(status)
