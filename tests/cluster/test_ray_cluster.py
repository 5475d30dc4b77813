"""A real Ray cluster on this machine (``ray.cluster_utils.Cluster``): nodes declaring accelerator
types of their own, real papermill kernels on CPU cells, the driver as a user runs it."""

from collections import Counter
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.results_file import read_records

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")
# Alone, after the parallel tests (make test's serial pass): Ray gives a node 30 s to register with its head, which a
# two-node cluster started beside the parallel workers once missed ("the GCS has become overloaded")
pytestmark = pytest.mark.serial

GRID = """\
study: ray-test
runs: 2
warmup: 0
blocks: 1
weights: random
devices: [cpu]
accelerators: [{kinds}]
grids:
  - models: [timm:test_resnet]
    batch_sizes: [1, 2, 3]
    compile_modes: [eager]
"""
NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
HEAD = {**NODE, "include_dashboard": False,
        # a lost node is noticed in seconds, not Ray's default half-minute
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}}


@pytest.fixture(autouse=True)
def signal_handlers():
    """Ray's cluster utilities install SIGTERM and SIGINT handlers in this process: put back ours."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def start_cluster(*kinds, **head):
    cluster = ray_cluster_utils.Cluster(initialize_head=True, connect=False,
                                        head_node_args={**HEAD, **head,
                                                        "resources": {f"accelerator_type:{kinds[0]}": 1}})
    nodes = {kinds[0]: [cluster.head_node]}
    for kind in kinds[1:]:
        nodes.setdefault(kind, []).append(add_node(cluster, kind))
    return cluster, nodes


def add_node(cluster, kind):
    return cluster.add_node(**NODE, resources={f"accelerator_type:{kind}": 1})


def driver(tmp_path, address, kinds, grid=GRID):
    grid_text = grid.format(kinds=", ".join(kinds))
    grid = tmp_path / "grid.yaml"
    grid.write_text(grid_text)
    return subprocess.Popen([sys.executable, "-m", "bench_utils", "run", str(grid), "--executor", "ray",
                             "--address", address, "--out", str(tmp_path / "study")],
                            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def records(tmp_path):
    path = tmp_path / "study" / "results.jsonl"
    return read_records(path) if path.exists() else []


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.2)


def node_of_kind(nodes):
    return {node.node_id: kind for kind, members in nodes.items() for node in members}


@pytest.mark.slow  # about 1 min (make bench runs it)
def test_the_driver_killed_and_run_again_records_each_cell_once_on_a_node_of_its_kind(tmp_path):
    cluster, nodes = start_cluster("KA", "KB")
    try:
        first = driver(tmp_path, cluster.address, ["KA", "KB"])
        wait_for(lambda: records(tmp_path) or first.poll() is not None, 240, "a first record")
        assert first.poll() is None, first.communicate()[1]  # still running: killed mid-grid
        os.kill(first.pid, signal.SIGKILL)  # as an out-of-memory killer or a lost SSH session would
        first.wait()
        before = len(records(tmp_path))
        assert 0 < before < 6, "the grid was over before the driver was killed"
        again = driver(tmp_path, cluster.address, ["KA", "KB"])
        out, err = again.communicate(timeout=300)
        assert again.returncode == 0, err
        # it resumed: what the killed driver had recorded was not measured again
        assert f"6 in the grid, {before} already measured, {6 - before} run now: {6 - before} ok" in out
        kept = records(tmp_path)
        cells = Counter((r.environment.accelerator_type, r.cell.batch_size) for r in kept)
        assert cells == {(kind, batch): 1 for kind in ("KA", "KB") for batch in (1, 2, 3)}
        assert {r.status for r in kept} == {"ok"}
        kinds = node_of_kind(nodes)
        for record in kept:  # measured on a node of its kind, which its environment names
            assert kinds[record.environment.cluster_node_id] == record.environment.accelerator_type
        notebooks = sorted(path.name for path in (tmp_path / "study" / "notebooks").glob("*.ipynb"))
        assert any(name.endswith("__KA.ipynb") for name in notebooks)
        assert any(name.endswith("__KB.ipynb") for name in notebooks)
    finally:
        cluster.shutdown()


@pytest.mark.slow  # 40 s alone, with the machine to itself (make bench runs it)
def test_a_node_removed_mid_group_loses_no_finished_cell_and_duplicates_none(tmp_path, monkeypatch):
    marker = tmp_path / "stuck"
    # the KB node's kernel sticks at batch 2 (once): the node is removed while it measures that cell
    monkeypatch.setenv("BENCH_UTILS_INJECT_FAULT", "hang-once:timm:test_resnet:2")
    monkeypatch.setenv("BENCH_UTILS_HANG_MARKER", str(marker))
    cluster, nodes = start_cluster("KA", "KB")
    try:
        run = driver(tmp_path, cluster.address, ["KB"])
        # the stuck cell, and the record of the one before it, on its way to the driver
        wait_for(lambda: (marker.exists() and records(tmp_path)) or run.poll() is not None, 240, "the stuck cell")
        assert [r.cell.batch_size for r in records(tmp_path)] == [1]  # finished before the loss
        lost = nodes["KB"][0]
        spare = add_node(cluster, "KB")
        cluster.remove_node(lost)
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        kept = records(tmp_path)
        assert Counter(r.cell.batch_size for r in kept) == {1: 1, 2: 1, 3: 1}
        by_batch = {r.cell.batch_size: r.environment.cluster_node_id for r in kept}
        assert by_batch == {1: lost.node_id, 2: spare.node_id, 3: spare.node_id}
        assert "was lost while measuring" in err and "2 unrecorded cell(s) go to another node" in err
        assert json.loads(json.dumps(kept[0].to_json()))["environment"]["accelerator_type"] == "KB"
    finally:
        cluster.shutdown()


CLIENT_GRID = """\
study: ray-client-test
runs: 2
warmup: 0
blocks: 1
weights: random
devices: [cpu]
grids:
  - models: [timm:test_resnet, timm:test_vit]
    batch_sizes: [1, 2]
    compile_modes: [eager]
"""


@pytest.mark.slow  # over 1 min: a Ray client server of its own (make bench runs it)
def test_a_driver_outside_the_cluster_through_ray_client_gets_each_record_as_it_is_measured(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        client_port = probe.getsockname()[1]
    cluster, nodes = start_cluster("KA", ray_client_server_port=client_port)
    try:
        run = driver(tmp_path, f"ray://127.0.0.1:{client_port}", [], grid=CLIENT_GRID)
        wait_for(lambda: records(tmp_path) or run.poll() is not None, 240, "a first record")
        assert run.poll() is None, run.communicate()[1]  # streamed while the group still runs
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        kept = records(tmp_path)
        assert Counter((r.cell.model, r.cell.batch_size) for r in kept) == {
            (model, batch): 1 for model in ("timm:test_resnet", "timm:test_vit") for batch in (1, 2)}
        assert {r.status for r in kept} == {"ok"}
        assert {r.environment.cluster_node_id for r in kept} == {nodes["KA"][0].node_id}
        assert "4 ok" in out
        # the two groups each ask for the whole node: one ran after the other, never beside it
        assert "waiting for cpu" not in err and "error" not in err, err
        assert err.startswith("[run] study ray-client-test: 4 cells"), err  # nothing of Ray's before it
    finally:
        cluster.shutdown()


def test_an_inbox_the_head_cannot_start_is_one_line_before_any_task(monkeypatch):
    from bench_utils.cluster import ray_cluster
    from bench_utils.cluster.connect import ClusterUnreachable

    monkeypatch.setattr(ray_cluster, "HEAD_NODE_RESOURCE", "no-such-node")  # never schedulable
    monkeypatch.setattr(ray_cluster, "INBOX_READY_S", 3.0)
    with pytest.raises(ClusterUnreachable, match="the Ray cluster's head did not start the run's inbox in 3 s"):
        with ray_cluster.RayCluster(None):
            pass
    import ray

    assert not ray.is_initialized()  # disconnected, the cluster of this machine gone with it


def test_an_inbox_lost_mid_run_stops_the_run_instead_of_failing_the_task(tmp_path):
    import ray

    from bench_utils.cluster import ray_cluster
    from bench_utils.cluster.node import GroupTask

    task = GroupTask(study="s", cells=[], timeout=60)
    with ray_cluster.RayCluster(None) as cluster:
        ray.kill(cluster._inbox)
        with pytest.raises(ray_cluster.InboxLost, match="run the command again to resume"):
            list(cluster.submit(task, {"num_cpus": 1}))


def test_without_an_address_a_cluster_of_this_machine_alone_runs_the_grid_and_ray_says_nothing(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(CLIENT_GRID.replace("[timm:test_resnet, timm:test_vit]", "[timm:test_resnet]")
                    .replace("[1, 2]", "[1]"))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    done = subprocess.run([sys.executable, "-m", "bench_utils", "run", str(grid), "--executor", "ray",
                           "--out", str(tmp_path / "study")], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    # Ray's own notes (its token authentication of a local cluster, say) are not the run's output
    assert done.stderr.startswith("[run] study ray-client-test: 1 cells"), done.stderr
    assert "(1 node)" in done.stderr and "WARNING" not in done.stderr
    kept = records(tmp_path)
    assert [r.status for r in kept] == ["ok"] and kept[0].environment.cluster_node_id
