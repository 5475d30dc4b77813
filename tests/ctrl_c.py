"""Ctrl-C, as a terminal sends it, to a command whose kernel is running: for the tests of one line and exit 130."""

import os
import signal
import subprocess
import time

import psutil


def start(command, **options):
    """``command`` started with SIGINT handled by default (a background test process may ignore it)."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **options)


def interrupt_once_a_kernel_runs(process, settle_s=1.0, timeout_s=120):
    """Wait for ``process``'s Jupyter kernel, let it work ``settle_s``, send SIGINT; its kernels, as found."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not any("ipykernel" in " ".join(child.cmdline())
                                                  for child in psutil.Process(process.pid).children(recursive=True)):
        time.sleep(0.1)
    time.sleep(settle_s)
    kernels = psutil.Process(process.pid).children(recursive=True)
    os.kill(process.pid, signal.SIGINT)
    return kernels
