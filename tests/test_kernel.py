"""The notebooks' kernel, spoken to over Unix sockets through papermill's command line."""

import json
import os
import re
import shutil
from pathlib import Path
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

from bench_utils.kernel import ENGINE_NAME, UNIX_SOCKET_PATH_MAX, end_tree, ensure_kernel
from bench_utils.paths import PROJECT_ROOT

SHOW_CONNECTION = ("import json\n"
                   "from ipykernel.connect import get_connection_file\n"
                   "print(json.dumps(json.load(open(get_connection_file()))))")


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "in.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SHOW_CONNECTION)]), path)
    return path


def _start(notebook, out, temp_dir):
    # TMPDIR: where the kernel's connection file and sockets go
    command = [sys.executable, "-m", "bench_utils.kernel", str(notebook), str(out), "--engine", ENGINE_NAME,
               "-k", ensure_kernel(), "--no-progress-bar", "--log-level", "WARNING"]
    return subprocess.Popen(command, cwd=PROJECT_ROOT, env={**os.environ, "TMPDIR": str(temp_dir)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _connections(runs, outs):
    logs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0] * len(runs), logs
    return logs, [json.loads(nbformat.read(out, 4).cells[0].outputs[0].text) for out in outs]


def test_kernels_side_by_side_get_unix_sockets_of_their_own_that_go_when_they_end(notebook, tmp_path):
    temp_dir = Path(tempfile.mkdtemp(dir="/tmp"))  # short, as a Unix socket's path must be
    try:
        outs = [tmp_path / f"out{n}.ipynb" for n in (1, 2)]
        logs, seen = _connections([_start(notebook, out, temp_dir) for out in outs], outs)
        for log in logs:
            assert "WARNING" not in log, log  # ipykernel 7.4 warns of every kernel on TCP
        assert [connection["transport"] for connection in seen] == ["ipc", "ipc"]
        assert seen[0]["ip"] != seen[1]["ip"]
        # in the command's kernel folder (bench_utils.kernel.kernel_folder) in the temp folder
        assert all(re.match(f"{temp_dir}{os.sep}kernels-[^/]+{os.sep}kernel-", connection["ip"]) for connection in seen)
        assert list(temp_dir.iterdir()) == []  # sockets, connection files and the folder removed
    finally:
        shutil.rmtree(temp_dir)


def test_a_temp_folder_too_long_for_a_unix_socket_falls_back_to_tcp(notebook, tmp_path):
    temp_dir = tmp_path / ("t" * UNIX_SOCKET_PATH_MAX)
    temp_dir.mkdir()
    logs, seen = _connections([_start(notebook, tmp_path / "out.ipynb", temp_dir)], [tmp_path / "out.ipynb"])
    assert seen[0]["transport"] == "tcp" and seen[0]["ip"] == "127.0.0.1"
    assert list(temp_dir.iterdir()) == []


def test_ctrl_c_while_a_notebook_runs_is_one_line_and_exit_130_with_its_kernel_ended(tmp_path):
    # explore.ipynb, or any notebook run with papermill's command line and the project's engine
    import sys

    import psutil
    from nbformat.v4 import new_code_cell, new_notebook

    from ctrl_c import interrupt_once_a_kernel_runs, start

    from bench_utils.kernel import ENGINE_NAME, KERNEL_NAME, ensure_kernel

    ensure_kernel()
    slow = tmp_path / "slow.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("import time\ntime.sleep(60)")]), slow)
    temp = tmp_path / "tmp"
    temp.mkdir()
    process = start([sys.executable, "-m", "bench_utils.kernel", str(slow), str(tmp_path / "out.ipynb"),
                     "-k", KERNEL_NAME, "--engine", ENGINE_NAME], env={**os.environ, "TMPDIR": str(temp)})
    kernels = interrupt_once_a_kernel_runs(process, settle_s=2.0)  # the kernel is in the cell
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted: the notebook's run stopped")
    assert "Traceback" not in err and "Aborted" not in err
    assert not [kernel for kernel in kernels if kernel.is_running() and kernel.status() != psutil.STATUS_ZOMBIE]
    # its connection file and sockets went with the command's kernel folder
    left = [path.name for path in temp.rglob("*") if path.name.startswith(("kernel-", "kernels-"))]
    assert not left, left


def test_ending_a_tree_ends_its_grandchildren_too():
    import psutil  # a dependency of the kernel's Ctrl-C
    parent = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"])
    shell = psutil.Process(parent.pid)
    deadline = time.monotonic() + 5
    while len(shell.children()) < 2 and time.monotonic() < deadline:  # the shell starts its sleeps
        time.sleep(0.05)
    sleeps = shell.children()
    assert len(sleeps) == 2
    end_tree(parent.pid)
    parent.wait(timeout=5)
    gone, alive = psutil.wait_procs(sleeps, timeout=5)
    assert not alive


def test_a_commands_kernel_folder_is_private_used_by_its_kernels_and_gone_after(monkeypatch):
    import stat

    from bench_utils.kernel import KERNEL_DIR_ENV, kernel_folder

    monkeypatch.delenv(KERNEL_DIR_ENV, raising=False)
    with kernel_folder() as folder:
        assert os.environ[KERNEL_DIR_ENV] == folder and stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        with kernel_folder() as inner:  # a command inside a command: one folder
            assert inner == folder
        left = os.path.join(folder, "kernel-0123456789abcdef-ipc-1")
        open(left, "w").close()  # what a killed kernel leaves
    assert not os.path.exists(folder) and KERNEL_DIR_ENV not in os.environ


def test_a_kernels_ipython_profile_and_history_stay_in_the_commands_kernel_folder(tmp_path):
    # IPython's history database went under the user's home with every kernel a study or a report started
    path = tmp_path / "in.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nprint(os.environ.get('IPYTHONDIR'), get_ipython().history_manager.hist_file)")]), path)
    temp_dir, home = Path(tempfile.mkdtemp(dir="/tmp")), tmp_path / "home"
    home.mkdir()
    try:
        command = [sys.executable, "-m", "bench_utils.kernel", str(path), str(tmp_path / "out.ipynb"), "--engine",
                   ENGINE_NAME, "-k", ensure_kernel(), "--no-progress-bar", "--log-level", "WARNING"]
        done = subprocess.run(command, cwd=PROJECT_ROOT, env={**os.environ, "TMPDIR": str(temp_dir), "HOME": str(home)},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        ipython_dir, history = nbformat.read(tmp_path / "out.ipynb", 4).cells[0].outputs[0].text.split()
        assert re.match(f"{temp_dir}{os.sep}kernels-[0-9]+-[^/]+{os.sep}ipython$", ipython_dir)
        assert history.startswith(ipython_dir) and not (home / ".ipython").exists()
        assert list(temp_dir.iterdir()) == []  # gone with the folder
    finally:
        shutil.rmtree(temp_dir)


def test_the_kernel_folders_of_commands_killed_outright_go_with_the_next_command(tmp_path, monkeypatch):
    from bench_utils.kernel import KERNEL_DIR_ENV, kernel_folder

    monkeypatch.delenv(KERNEL_DIR_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / "kernels-4194399-abcd1234"  # above Linux's largest pid: no process has it
    alive = tmp_path / f"kernels-{os.getpid()}-efgh5678"  # another command of this process's, still running
    recent = tmp_path / "kernels-4194398-ijkl9012"  # no process here, but changed a minute ago: another namespace's?
    for folder in (dead, alive, recent):
        folder.mkdir()
        (folder / "kernel-0123-ipc-1").write_text("")
    for folder in (dead, alive):
        os.utime(folder, (time.time() - 7200, time.time() - 7200))  # two hours unchanged
    with kernel_folder() as folder:
        assert Path(folder).name.startswith(f"kernels-{os.getpid()}-")
    assert not dead.exists() and alive.exists() and recent.exists()


def test_a_kernel_is_killed_once_its_last_cell_has_run_and_papermill_skips_jsonschemas_uri_grammar(tmp_path):
    # a graceful exit would run the kernel's atexit hooks (the interpreter's teardown, a compile-worker pool's
    # shutdown): killed, it runs none
    marker = tmp_path / "exited"
    notebook = tmp_path / "in.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).touch)")]), notebook)
    done = _start(notebook, tmp_path / "out.ipynb", tmp_path)
    assert done.wait(timeout=120) == 0, done.stdout.read()
    time.sleep(0.5)
    assert not marker.exists()
    # papermill's process: jsonschema's import of rfc3987_syntax (a grammar built at import) fails fast
    probe = ("import runpy, sys\nsys.argv = ['kernel', '--help']\n"
             "try:\n    runpy.run_module('bench_utils.kernel', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print('jsonschema' in sys.modules, sys.modules.get('rfc3987_syntax'))")
    shown = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True,
                           timeout=120).stdout.split()
    assert shown[-2:] == ["True", "None"]
