"""The cluster driver with a cluster of its own: nodes run the real node task (``node.stream_group``,
the local runner) in this process, with the fake notebook; the cluster can lose a node mid-task,
send a record twice, or fail a task. The real Ray cluster is in test_ray_cluster.py."""

from collections import Counter
import io
import os
import threading

import pytest

from bench_utils.cluster.cluster_api import HostOutOfMemory, NodeLost, TaskFailed
from bench_utils.cluster.driver import MAX_NODE_LOSSES, ClusterRunner
from bench_utils.cluster.node import stream_group
from bench_utils.environment.capture import ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV
from bench_utils.records.results_file import read_records
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner.progress_display import format_run_outcome
from fake_notebook import FakeNotebook

GRID = {"study": "c", "runs": 3, "warmup": 1, "blocks": 1, "accelerators": ["KA", "KB"], "grids": [
    {"models": ["resnet"], "batch_sizes": [1, 4, 16], "compile_modes": ["eager", "default"]},
    {"models": ["segformer"], "batch_sizes": [1], "compile_modes": ["eager"]}]}
NODES = {"a1": "KA", "b1": "KB", "b2": "KB"}


@pytest.fixture(autouse=True)
def placement_env():
    yield  # the node task sets them in this process, as in a Ray worker
    for name in (ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV):
        os.environ.pop(name, None)


class FakeCluster:
    """Nodes of accelerator types. ``lose`` = {(kind, cell_id): times} loses the node while that cell is
    measured (after its start); ``oom`` = {(kind, cell_id)} has Ray's memory monitor end the worker
    there (once); ``twice`` sends every record of a kind twice; ``fail`` = {kind: times} makes a task
    fail before it plans; ``last`` makes a kind's lost node its last one; ``gpus`` gives each task
    of a node one of that many GPUs."""

    def __init__(self, lose=None, oom=(), twice=(), fail=None, last=(), nodes=NODES, gpus=0):
        self.lose, self.oom, self.twice, self.fail = dict(lose or {}), set(oom), set(twice), dict(fail or {})
        self.node_list, self.dead, self.last, self.tasks, self.options = nodes, set(), set(last), [], []
        self.notebook, self.gpus = FakeNotebook(), gpus
        self.worker = threading.Lock()  # one task at a time: a Ray worker process runs one (its os.environ)

    def nodes(self):
        return [{"id": node, "alive": kind not in self.dead,
                 "resources": {"CPU": 2.0, f"accelerator_type:{kind}": 1.0}}
                for node, kind in self.node_list.items()]

    def submit(self, task, options):
        self.tasks.append(task)
        self.options.append(options)
        kind = task.accelerator
        node = [n for n, k in self.node_list.items() if k == kind][len(self.tasks) % 2 if kind == "KB" else 0]
        if self.fail.get(kind):
            self.fail[kind] -= 1
            raise TaskFailed("ModuleNotFoundError: No module named 'bench_utils'")
        with self.worker:
            slot = f"GPU {len(self.tasks) % self.gpus}" if self.gpus else None
            events = list(stream_group(task, node_id=node, slot=slot, executor=self.notebook))
        for event in events:
            key = (kind, event.get("cell_id"))
            if event["event"] == "cell" and key in self.oom:  # the worker ended before it could send it
                self.oom.discard(key)
                raise HostOutOfMemory("OutOfMemoryError: Task was killed due to the node running low on memory")
            yield event
            if event["event"] == "start" and self.lose.get(key):
                self.lose[key] -= 1
                if kind in self.last:
                    self.dead.add(kind)
                raise NodeLost("NodeDiedError: the node running the task died")
            if event["event"] == "cell" and kind in self.twice:
                yield event

    def cancel_all(self):
        pass


def run(tmp_path, cluster, grid=GRID, **kwargs):
    stream = io.StringIO()
    runner = ClusterRunner(parse_grid(grid), tmp_path, stream=stream, **kwargs)
    outcome = runner.run(cluster)
    return outcome, runner, stream.getvalue()


def recorded(tmp_path):
    return Counter((r.environment.accelerator_type, r.cell.model, r.cell.batch_size,
                    r.cell.compile_mode) for r in read_records(tmp_path / "results.jsonl"))


def test_every_cell_is_measured_once_on_each_accelerator_type(tmp_path):
    cluster = FakeCluster()
    outcome, runner, _ = run(tmp_path, cluster)
    counts = recorded(tmp_path)
    assert len(counts) == 2 * 7 and set(counts.values()) == {1}
    assert {kind for kind, *_ in counts} == {"KA", "KB"}
    assert outcome.exit_status() == 0 and outcome.counts() == {"ok": 14} and outcome.total == 14
    # each task asked for its kind, and a CPU group for a whole node
    assert {(o["accelerator_type"], o["num_cpus"]) for o in cluster.options} == {("KA", 2), ("KB", 2)}
    for record in read_records(tmp_path / "results.jsonl"):  # the node's placement, in its environment
        assert NODES[record.environment.cluster_node_id] == record.environment.accelerator_type
    # the nodes' executed notebooks and logs are kept, one per kind
    assert sorted(path.name for path in (tmp_path / "logs").glob("*.log")) == [
        f"image-classification__resnet__float32__cpu.1__{k}.log" for k in ("KA", "KB")] + [
        f"image-segmentation__segformer__float32__cpu.1__{k}.log" for k in ("KA", "KB")]


def test_progress_names_the_gpu_of_its_node_each_task_was_given(tmp_path):
    grid = {**GRID, "accelerators": ["KA"]}
    _, _, said = run(tmp_path, FakeCluster(gpus=2), grid=grid)
    # two tasks on one node measure at once: each shows by its own GPU
    assert "measuring resnet bs1 eager float32 on node a1 GPU 1 (KA)" in said
    assert "measuring segformer bs1 eager float32 on node a1 GPU 0 (KA)" in said


def test_a_second_run_measures_nothing_and_says_so(tmp_path):
    run(tmp_path, FakeCluster())
    cluster = FakeCluster()
    outcome, _, _ = run(tmp_path, cluster)
    assert outcome.resumed == 14 and not outcome.outcomes and not cluster.notebook.calls
    assert "all 14 cells already measured" in format_run_outcome(outcome, tmp_path / "results.jsonl")
    assert sum(recorded(tmp_path).values()) == 14


def test_a_node_lost_mid_group_loses_no_recorded_cell_and_duplicates_none(tmp_path):
    cell_id = "image-classification__resnet__bs4__default__float32__cpu"
    cluster = FakeCluster(lose={("KB", cell_id): 1})
    outcome, _, said = run(tmp_path, cluster)
    assert set(recorded(tmp_path).values()) == {1} and len(recorded(tmp_path)) == 14
    assert "was lost while measuring image-classification__resnet__float32__cpu on KB" in said
    # the second task on KB carried only the cells the first had not recorded
    resnet_kb = [task for task in cluster.tasks if task.accelerator == "KB" and "resnet" in task.cells[0]["model"]]
    assert [len(task.cells) for task in resnet_kb] == [6, 4]  # default 1 and eager 1 were recorded
    assert outcome.exit_status() == 0 and outcome.counts() == {"ok": 14}


def test_a_cell_whose_node_is_lost_too_often_is_an_error_and_the_group_goes_on(tmp_path):
    cell_id = "image-classification__resnet__bs4__default__float32__cpu"
    outcome, _, _ = run(tmp_path, FakeCluster(lose={("KA", cell_id): MAX_NODE_LOSSES}))
    errors = [r for r in read_records(tmp_path / "results.jsonl") if r.status == "error"]
    assert [(r.cell.batch_size, r.cell.compile_mode) for r in errors] == [(4, "default")]
    assert f"its node was lost {MAX_NODE_LOSSES} times while it measured this cell" in errors[0].error
    # in the environment of the node that would have measured it, not the driver's
    assert (errors[0].environment.accelerator_type, errors[0].environment.cluster_node_id) == ("KA", "a1")
    assert outcome.counts() == {"ok": 13, "error": 1} and outcome.exit_status() == 1
    assert set(recorded(tmp_path).values()) == {1}


def test_a_host_out_of_memory_is_the_cells_oom_and_the_next_node_skips_the_larger_batches(tmp_path):
    cell_id = "image-classification__resnet__bs4__default__float32__cpu"
    outcome, _, _ = run(tmp_path, FakeCluster(oom={("KA", cell_id)}))
    ka = {(r.cell.batch_size, r.cell.compile_mode): r for r in read_records(tmp_path / "results.jsonl")
          if r.environment.accelerator_type == "KA" and r.cell.model == "resnet"}
    assert ka[(4, "default")].status == "oom" and "memory monitor" in ka[(4, "default")].error
    assert ka[(16, "default")].skipped_after_oom == 4 and ka[(1, "default")].status == "ok"
    assert outcome.exit_status() == 0 and set(recorded(tmp_path).values()) == {1}


def test_a_group_whose_last_node_of_its_type_is_lost_ends_with_errors(tmp_path):
    cell_id = "image-segmentation__segformer__bs1__eager__float32__cpu"
    outcome, _, _ = run(tmp_path, FakeCluster(lose={("KA", cell_id): 1}, last={"KA"}))
    segformer = [r for r in read_records(tmp_path / "results.jsonl")
                 if r.environment.accelerator_type == "KA" and r.cell.model == "segformer"]
    assert [r.status for r in segformer] == ["error"]
    assert "no live node of accelerator type KA that can run it is left" in segformer[0].error
    assert outcome.exit_status() == 1


def test_a_task_that_fails_is_tried_again_then_its_cells_are_not_run(tmp_path):
    outcome, _, said = run(tmp_path, FakeCluster(fail={"KA": 1}))
    assert "failed on" in said and outcome.counts() == {"ok": 14}  # once: tried again
    outcome, _, _ = run(tmp_path / "again", FakeCluster(fail={"KA": 9}))
    kept = read_records(tmp_path / "again" / "results.jsonl")
    # no node said where they would have run: no record in the driver's own environment, not run
    assert {r.environment.accelerator_type for r in kept} == {"KB"} and len(kept) == 7
    assert outcome.not_run == 7 and outcome.exit_status() == 1
    assert any("failed on the cluster 2 times: ModuleNotFoundError" in error and "were not run" in error
               for error in outcome.worker_errors)


def test_a_record_sent_twice_is_appended_once(tmp_path):
    outcome, runner, _ = run(tmp_path, FakeCluster(twice={"KA"}))
    assert set(recorded(tmp_path).values()) == {1} and runner.duplicates == 7
    assert outcome.counts() == {"ok": 14}


def test_earlier_records_reach_the_node_which_resumes_on_its_own_environment(tmp_path):
    grid = {**GRID, "accelerators": ["KA"]}
    run(tmp_path, FakeCluster(), grid=grid)
    more = {**grid, "grids": [{**GRID["grids"][0], "batch_sizes": [1, 4, 16, 32]}, GRID["grids"][1]]}
    cluster = FakeCluster()
    outcome, _, _ = run(tmp_path, cluster, grid=more)
    assert outcome.resumed == 7 and outcome.counts() == {"ok": 2}
    assert sorted(call[1:3] for call in cluster.notebook.calls) == [(32, "default"), (32, "eager")]


def test_the_cluster_must_offer_every_accelerator_type_before_anything_runs(tmp_path):
    cluster = FakeCluster(nodes={"a1": "KA"})
    with pytest.raises(ValueError, match="no live node of accelerator type KB .*its types: KA"):
        run(tmp_path, cluster)
    assert not cluster.tasks and not (tmp_path / "results.jsonl").exists()
