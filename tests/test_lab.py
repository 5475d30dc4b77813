"""``make lab``: JupyterLab on the project, with the project's kernel, started the way a user does."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

from bench_utils.paths import PROJECT_ROOT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode("utf-8", errors="replace")


def test_make_lab_serves_the_project_with_its_kernel_selected():
    port = free_port()
    lab = subprocess.Popen(["make", "-s", "lab", f"LAB_PORT={port}"], cwd=PROJECT_ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(lab.stdout), daemon=True)
    reader.start()
    try:
        url = None
        deadline = time.monotonic() + 300
        while url is None and time.monotonic() < deadline and lab.poll() is None:
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", "".join(lines))
            url = found and found.group(0)
            time.sleep(0.2)
        assert url, "".join(lines)[-3000:]
        assert "ssh -N -L" in "".join(lines)  # how to reach it from another machine
        token = url.rsplit("=", 1)[1]
        status, body = get(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}")
        specs = json.loads(body)
        assert status == 200 and specs["default"] == "bench-utils" and "bench-utils" in specs["kernelspecs"]
        status, body = get(f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}")
        names = {item["name"] for item in json.loads(body)["content"]}
        assert {"classification.ipynb", "report.ipynb"} <= names  # rooted at the project
        status, page = get(f"http://127.0.0.1:{port}/lab/tree/notebooks/classification.ipynb?token={token}")
        assert status == 200 and "JupyterLab" in page
    finally:  # the server goes, whatever happened
        for signum in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(lab.pid, signum)
                lab.wait(timeout=30)
                break
            except ProcessLookupError:
                break  # already gone
            except subprocess.TimeoutExpired:
                continue
        lab.wait()
