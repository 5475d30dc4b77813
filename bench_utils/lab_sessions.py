"""``make lab``'s server extension: the notebooks' kernels started with the server, before a reader opens one.

JupyterLab drops the cells run before a notebook's session has a kernel (jupyterlab/jupyterlab#8490; docs/report.md);
a notebook whose path has a running session is connected to it as it opens, so the server starts one for the explore
and task notebooks as it starts (an idle kernel: 52 MiB measured; ``lab_extensions/`` runs a Run All that Lab still drops).
Enabled on ``make lab``'s command line only (``--ServerApp.jpserver_extensions bench_utils.lab_sessions=True``).
"""

from __future__ import annotations

import asyncio
from typing import Any

# from the server's root (the project): the notebooks a newcomer opens first
PRESTARTED = ("notebooks/explore.ipynb", "notebooks/classification.ipynb", "notebooks/segmentation.ipynb",
              "notebooks/detection.ipynb")
KERNEL = "bench-utils"                     # make setup's kernelspec


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "bench_utils.lab_sessions"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    async def start_sessions() -> None:
        for path in PRESTARTED:
            try:
                await serverapp.session_manager.create_session(path=path, name=path.rsplit("/", 1)[-1],
                                                               type="notebook", kernel_name=KERNEL)
                serverapp.log.info("bench_utils: started the kernel of %s ahead of its opening", path)
            except Exception as problem:  # the notebook then starts its kernel as it opens, as Lab does
                serverapp.log.warning("bench_utils: could not start the kernel of %s ahead: %s", path, problem)

    loop = asyncio.get_event_loop()
    if loop.is_running():  # a server already serving: as soon as it can
        serverapp.io_loop.add_callback(start_sessions)
    else:  # make lab: before the server serves (and prints its URL), so that the page always finds the kernel
        loop.run_until_complete(start_sessions())
