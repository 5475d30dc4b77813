"""A cluster node's task (``node.stream_group``) in this process, with the fake notebook."""

import fcntl
import os

import pytest

from bench_utils.cluster import node as node_module
from bench_utils.cluster.node import OWNER_LOCK, GroupTask, stream_group
from bench_utils.environment.capture import ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV
from bench_utils.study.grid.grid_file import parse_grid
from fake_notebook import FakeNotebook

GRID = {"study": "n", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["eager", "default"]}]}


@pytest.fixture(autouse=True)
def scratch(tmp_path, monkeypatch):
    monkeypatch.setattr(node_module, "SCRATCH_DIR", tmp_path / "scratch")
    yield tmp_path / "scratch"
    for name in (ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV):
        os.environ.pop(name, None)


def task(**kwargs):
    cells = [cell.to_parameters() for cell in parse_grid(GRID).cells]
    return GroupTask(study="n", cells=cells, timeout=60, **kwargs)


def test_events_tell_the_plan_each_cell_with_its_record_then_the_files(scratch):
    events = list(stream_group(task(accelerator="KA"), node_id="n1", executor=FakeNotebook()))
    names = [event["event"] for event in events]
    assert names[0] == "plan" and names[-2:] == ["files", "end"]
    assert events[0]["node"] == "n1" and len(events[0]["pending"]) == 4 and events[0]["resumed"] == 0
    cells = [event for event in events if event["event"] == "cell"]
    assert [event["status"] for event in cells] == ["ok"] * 4
    for event in cells:  # each cell's start comes before its record
        began = [i for i, e in enumerate(events) if e["event"] == "start" and e["cell_id"] == event["cell_id"]]
        assert began and began[0] < events.index(event)
    for event in cells:  # every record says where it was measured
        environment = event["record"]["environment"]
        assert (environment["accelerator_type"], environment["cluster_node_id"]) == ("KA", "n1")
    assert list(events[-2]["files"]) == ["logs/image-classification__resnet__float32__cpu.1.log"]
    assert events[-2]["folder"].startswith(os.path.relpath(scratch, node_module.PROJECT_ROOT))
    assert not list(scratch.glob("node-*"))  # the node's folder is gone with its task


def test_a_failure_record_names_its_log_relative_to_the_nodes_folder():
    notebook = FakeNotebook(crash={("resnet", 4)})
    events = list(stream_group(task(), node_id="n1", executor=notebook))
    crashed = [e for e in events if e["event"] == "cell" and e["status"] == "error"]
    assert crashed and crashed[0]["record"]["log"].startswith("logs/")
    assert any(e["event"] == "say" and "a new kernel takes up" in e["text"] for e in events)


def test_the_node_skips_what_the_seed_records_hold_for_its_own_environment():
    first = [e["record"] for e in stream_group(task(accelerator="KA"), node_id="n1", executor=FakeNotebook())
             if e["event"] == "cell"][:2]
    notebook = FakeNotebook()
    events = list(stream_group(task(accelerator="KA", seed_records=first), node_id="n1", executor=notebook))
    assert events[0]["resumed"] == 2 and len(notebook.calls) == 2
    # the same records say nothing of another accelerator type: there, all four are measured
    other = FakeNotebook()
    events = list(stream_group(task(accelerator="KB", seed_records=first), node_id="n2", executor=other))
    assert events[0]["resumed"] == 0 and len(other.calls) == 4


def test_folders_of_tasks_that_died_are_removed_and_running_ones_kept(scratch):
    scratch.mkdir()
    # the folders of node n1's tasks, and one of another node's on a shared file system
    dead, running, elsewhere = scratch / "node-n1-dead", scratch / "node-n1-running", scratch / "node-n2-dead"
    for folder in (dead, running, elsewhere):
        folder.mkdir()
        (folder / OWNER_LOCK).touch()
    held = os.open(running / OWNER_LOCK, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # its task runs
    try:
        list(stream_group(task(), node_id="n1", executor=FakeNotebook()))
        assert not dead.exists() and running.exists()
        assert elsewhere.exists()  # its lock says nothing on this node: never removed from here
    finally:
        os.close(held)
