"""The Jupyter kernel that executes the notebooks: its name, and installing it.

Both the study (task notebooks) and the report (the report notebook) execute
notebooks with papermill in this kernel, so it lives below both. The kernel is
this interpreter, so a notebook sees the same packages as the command that ran it.
"""

from __future__ import annotations

import sys

KERNEL_NAME = "bench-utils"
KERNEL_DISPLAY_NAME = "Python (bench-utils)"


def ensure_kernel() -> str:
    """Install the project's kernel (this interpreter) into the environment if missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL_NAME not in KernelSpecManager().find_kernel_specs():
        from ipykernel.kernelspec import install

        install(kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY_NAME, prefix=sys.prefix)
    return KERNEL_NAME
