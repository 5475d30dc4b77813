"""The Jupyter kernel that executes the notebooks: its name, installing it, and speaking to it.

Both the study (task notebooks) and the report (the report notebook) execute
notebooks with papermill in this kernel, so it lives below both. The kernel is
this interpreter, so a notebook sees the same packages as the command that ran it.

papermill speaks to it over Unix sockets (``ENGINE_NAME``), not TCP: a kernel on
localhost TCP can be read by any user of the machine (a shared GPU node), and
ipykernel 7.4 says so in every kernel's log, which the study publishes.
``python -m bench_utils.kernel`` is papermill's command line with that engine.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import uuid

KERNEL_NAME = "bench-utils"
KERNEL_DISPLAY_NAME = "Python (bench-utils)"
ENGINE_NAME = "bench-utils"
UNIX_SOCKET_PATH_MAX = 107  # bytes: sun_path holds 108, the last a NUL
# Where a kernel started in this process writes its own stderr, where set (the report's: its kernel's
# "[IPKernelApp] ..." lines are not the command's to print); unset, the kernel shares this process's.
KERNEL_STDERR_ENV = "BENCH_UTILS_KERNEL_STDERR"


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
        """A kernel of this machine, its sockets beside its connection file in the temp folder.

        A path of its own per kernel: jupyter_client's default (``kernel-ipc`` in the working
        folder) would be shared by the kernels a runner starts side by side. The sockets and
        the file go when the kernel ends. Where the temp folder's path is too long for a Unix
        socket, TCP on localhost as before (and ipykernel says so in the log).
        """

        @default("connection_file")
        def _connection_file_default(self) -> str:
            return os.path.join(tempfile.gettempdir(), f"kernel-{uuid.uuid4().hex[:16]}.json")

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
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register(ENGINE_NAME, UnixSocketEngine)
    return ENGINE_NAME


def end_tree(pid: int) -> None:
    """A kernel's process tree (or papermill's and its kernel's) ended: SIGKILL ``pid`` and all its descendants, children first found, then wait for them."""
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
    import click
    import signal
    from papermill.cli import papermill

    register_engine()
    signal.signal(signal.SIGINT, _end_kernels_then_interrupt)
    try:  # not click's standalone mode: its Ctrl-C is "Aborted!" and exit 1
        sys.exit(papermill(standalone_mode=False) or 0)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.exceptions.Abort):  # Ctrl-C (explore.ipynb...): one line
        print("interrupted: the notebook's run stopped; its output notebook holds the cells run so far",
              file=sys.stderr)
        sys.exit(130)
