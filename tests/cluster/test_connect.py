"""Which cluster a run uses, and one clear line when it cannot be reached (through the command line)."""

import socket
import subprocess
import sys
import time

import pytest

from bench_utils.cluster.connect import ClusterUnreachable, head_endpoint, requested_address
from bench_utils.paths import PROJECT_ROOT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_cli(*args, env=None):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "bench_utils", "run", *args], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120, env=env)
    return result, time.monotonic() - started


def test_an_unreachable_address_is_one_line_and_exit_status_2():
    port = free_port()  # nothing listens there
    result, seconds = run_cli("params/smoke.yaml", "--executor", "ray", "--address", f"127.0.0.1:{port}")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port} ")
    assert seconds < 60  # not Ray's minute of retries


def test_an_unreachable_ray_client_address_is_one_line_too():
    port = free_port()
    result, seconds = run_cli("params/smoke.yaml", "--executor", "ray", "--address", f"ray://127.0.0.1:{port}")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port} ")
    assert seconds < 60


def test_auto_without_a_running_cluster_is_one_line_too(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["TMPDIR"] = str(tmp_path)  # Ray looks for the cluster `ray start` left under its temporary folder
    result, _ = run_cli("params/smoke.yaml", "--executor", "ray", "--address", "auto", env=env)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: ")


@pytest.mark.parametrize("args, message", [
    (["--address", "127.0.0.1:1"], "--address names a Ray cluster: use it with --executor ray"),
    (["--executor", "ray", "--devices", "cpu"], "--devices pins this machine's devices"),
    (["--executor", "ray", "--dry-run"], "--dry-run plans the run of this machine"),
])
def test_options_that_do_not_go_together_are_refused(args, message):
    result, _ = run_cli("params/smoke.yaml", *args)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {message}"), result.stderr


def test_a_grid_of_accelerator_types_needs_the_cluster(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("study: g\naccelerators: [H100, A100]\ngrids:\n  - models: [resnet]\n"
                    "    batch_sizes: [1]\n    compile_modes: [eager]\n")
    result, _ = run_cli(str(grid), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "(H100, A100): run it with --executor ray" in result.stderr


def test_addresses(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert requested_address(None) is None and requested_address(" ") is None
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert requested_address(None) == "10.1.2.3:6379" and requested_address("auto") == "auto"
    assert head_endpoint("ray://head.example:10001") == ("head.example", 10001)
    assert head_endpoint("[::1]:6379") == ("::1", 6379)
    for bad in ("head", "head:port", ":6379"):
        with pytest.raises(ClusterUnreachable, match="use auto, HOST:PORT or ray://HOST:PORT"):
            head_endpoint(bad)


def test_a_refused_connection_to_an_explicit_address_says_how_to_send_the_clusters_token(monkeypatch):
    from bench_utils.cluster.connect import _token_hint

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    # Ray sends its token to an address given explicitly only when told (RAY_AUTH_MODE=token)
    for address in ("ray://head:10001", "head:6379"):
        assert "set RAY_AUTH_MODE=token" in _token_hint(address)
    assert _token_hint("auto") == "" and _token_hint(None) == ""  # Ray sends it there itself
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert _token_hint("ray://head:10001") == ""  # it was sent: the hint would mislead


@pytest.mark.parametrize("address", [None, "auto"])
def test_without_ray_a_ray_run_says_so_in_one_line(monkeypatch, address):
    from bench_utils.cluster import connect as connect_module

    # what `import ray` meets where Ray is not installed (the GPU machines' image)
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray._private.services", None)
    monkeypatch.setenv(connect_module.LOOPBACK_ONLY_ENV, "0")  # connect() sets it: restored after the test
    monkeypatch.delenv(connect_module.ADDRESS_ENV, raising=False)
    with pytest.raises(ClusterUnreachable, match=r"Ray is not installed here .*pip install -e '\.\[ray\]'"):
        connect_module.connect(address)


def test_a_ray_client_server_that_dies_as_it_starts_is_tried_again(monkeypatch):
    ray = pytest.importorskip("ray", reason="needs Ray (the project's ray extra)")

    from bench_utils.cluster import connect as connect_module

    calls = []

    def init(address, **options):  # the client server's process for this driver died twice
        calls.append(address)
        if len(calls) < 3:
            raise ConnectionAbortedError("Initialization failure from server")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    with socket.socket() as head:  # something listens where the head's client server is
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"ray://127.0.0.1:{head.getsockname()[1]}"
        connect_module.connect(address)
        assert calls == [address] * 3
        calls.clear()
        monkeypatch.setattr(connect_module, "CLIENT_TRIES", 2)
        with pytest.raises(ClusterUnreachable, match="Initialization failure from server"):
            connect_module.connect(address)
        assert len(calls) == 2
