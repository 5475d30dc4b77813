import getpass
import json
import socket

import torch

from bench_utils import capture_environment
from bench_utils.environment.capture import format_environment
from bench_utils.records.schema import EnvironmentBlock

REQUIRED = [
    "python_version", "torch_version", "torch_git_version", "torch_cuda_version", "cudnn_version",
    "transformers_version", "timm_version", "gpus", "driver_version", "cpu_model",
    "cpu_count_logical", "ram_total_bytes", "os", "torch_num_threads", "tf32_matmul",
    "tf32_cudnn", "cudnn_benchmark", "git_commit", "timestamp_utc",
]


def test_environment_has_every_key():
    env = capture_environment()
    missing = [key for key in REQUIRED if key not in env]
    assert not missing
    assert env["torch_version"] == torch.__version__
    assert env["torch_num_threads"] == torch.get_num_threads()
    assert env["cpu_count_logical"] >= 1 and env["ram_total_bytes"] > 2**28
    assert env["timestamp_utc"].endswith("+00:00")
    assert isinstance(env["gpus"], list)
    json.dumps(env)  # serializable as is


def test_no_host_or_user_names():
    text = json.dumps(capture_environment())
    host = socket.gethostname()
    if len(host) >= 4:
        assert host not in text
    user = getpass.getuser()
    if len(user) >= 4:
        assert f'"{user}"' not in text and f"/{user}/" not in text
    assert "/home/" not in text and "/root/" not in text


def test_settings_are_read_fresh_on_every_call():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert capture_environment()["torch_num_threads"] == 1
    finally:
        torch.set_num_threads(before)
    assert capture_environment()["torch_num_threads"] == before


def test_gpu_name_lookup_and_format():
    env = {"gpus": [{"index": 0, "name": "NVIDIA H100", "memory_total_bytes": 80 * 2**30}]}
    block = EnvironmentBlock.model_validate(env)
    assert block.gpu_name("cuda:0") == "NVIDIA H100" and block.gpu_name("cuda") == "NVIDIA H100"
    assert block.gpu_name("cpu") is None and block.gpu_name("cuda:3") is None
    text = format_environment({**env, "torch_version": "2.5", "driver_version": None})
    assert "NVIDIA H100, 80.0 GiB" in text and "n/a" in text


def test_cuda_fields_agree_with_torch():
    env = capture_environment()
    assert env["cuda_available"] == torch.cuda.is_available()
    assert env["gpu_count"] == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    if not torch.cuda.is_available():
        assert env["gpus"] == []


def test_nvml_gpus_and_driver_with_a_fake_nvml(monkeypatch):
    import sys

    from fake_nvml import make_fake_pynvml

    from bench_utils.environment.capture import _nvml_gpus

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml())
    gpus, facts = _nvml_gpus()
    assert facts == {"nvml": True, "driver_version": "580.65.06", "cuda_driver_version": "13.0"}
    assert [g["name"] for g in gpus] == ["NVIDIA H100 80GB HBM3 #0", "NVIDIA H100 80GB HBM3 #1"]
    assert gpus[0]["memory_total_bytes"] == 80 * 2**30 and gpus[0]["power_limit_w"] == 700.0
    assert gpus[1]["uuid"].startswith("GPU-")  # which physical GPU, as the energy and memory blocks name it
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(fail_init=True))
    assert _nvml_gpus() == ([], {"nvml": False})


def test_a_cluster_node_says_where_it_placed_the_process(monkeypatch):
    from bench_utils.environment.capture import ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV

    monkeypatch.delenv(ACCELERATOR_TYPE_ENV, raising=False)
    monkeypatch.delenv(CLUSTER_NODE_ENV, raising=False)
    local = capture_environment()
    assert local["accelerator_type"] is None and local["cluster_node_id"] is None
    monkeypatch.setenv(ACCELERATOR_TYPE_ENV, "H100")
    monkeypatch.setenv(CLUSTER_NODE_ENV, "a1b2")
    placed = capture_environment()  # read afresh: one Ray worker runs tasks of several kinds
    assert (placed["accelerator_type"], placed["cluster_node_id"]) == ("H100", "a1b2")


def _git_repo(path, monkeypatch):
    """A repository at ``path`` with one commit; git's identity from the environment, not this machine's."""
    import subprocess
    for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(name, "test")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(name, "test@example.com")
    path.mkdir(parents=True, exist_ok=True)
    (path / "file.txt").write_text("x\n")
    for args in (["init", "-q"], ["add", "file.txt"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_commit_is_recorded_where_the_project_is_the_repositorys_root(tmp_path, monkeypatch):
    import bench_utils.environment.capture as env
    commit = _git_repo(tmp_path / "project", monkeypatch)
    monkeypatch.setattr(env, "PROJECT_ROOT", tmp_path / "project")
    assert env.project_git() == {"git_commit": commit, "git_dirty": False, "git_commit_note": None}
    (tmp_path / "project" / "file.txt").write_text("changed\n")
    assert env.project_git()["git_dirty"] is True


def test_a_study_rewriting_its_tracked_outputs_leaves_the_code_clean(tmp_path, monkeypatch):
    # the second H200 lease: measured into reports/hf-guide-h200, its executed notebooks overwrote the committed
    # ones, and every record said git_dirty: true of a clean copy
    import subprocess
    import bench_utils.environment.capture as env
    root = tmp_path / "project"
    _git_repo(root, monkeypatch)
    notebook = root / env.STUDY_OUTPUTS / "study" / "notebooks" / "k.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "a study"], cwd=root, check=True)
    monkeypatch.setattr(env, "PROJECT_ROOT", root)
    notebook.write_text('{"executed": true}')
    assert env.project_git()["git_dirty"] is False
    (root / "file.txt").write_text("the code changed\n")
    assert env.project_git()["git_dirty"] is True


def test_a_copy_inside_another_checkout_records_no_commit_and_says_why(tmp_path, monkeypatch):
    # the first GPU run: a plain copy of the project inside another repository recorded that repository's commit
    import bench_utils.environment.capture as env
    _git_repo(tmp_path / "outer", monkeypatch)
    copy = tmp_path / "outer" / "copy-of-project"
    copy.mkdir()
    monkeypatch.setattr(env, "PROJECT_ROOT", copy)
    found = env.project_git()
    assert found["git_commit"] is None and found["git_dirty"] is None
    assert "not the root of the git repository" in found["git_commit_note"]


def test_no_repository_records_no_commit_and_says_why(tmp_path, monkeypatch):
    import bench_utils.environment.capture as env
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git must not find a repository above
    monkeypatch.setattr(env, "PROJECT_ROOT", tmp_path)
    assert env.project_git() == {"git_commit": None, "git_dirty": None, "git_commit_note": "not a git checkout"}


def test_a_copy_with_no_repository_records_the_commit_it_was_copied_from(tmp_path, monkeypatch):
    # a GPU host gets the working tree without .git: make wheelhouse writes the commit down beforehand
    import bench_utils.environment.capture as env
    commit = _git_repo(tmp_path / "project", monkeypatch)
    monkeypatch.setattr(env, "PROJECT_ROOT", tmp_path / "project")
    written = env.write_source_commit()
    copy = tmp_path / "host" / "copy"
    copy.mkdir(parents=True)
    (copy / env.SOURCE_COMMIT_FILE).write_text(written.read_text())
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setattr(env, "PROJECT_ROOT", copy)
    found = env.project_git()
    assert found["git_commit"] == commit and found["git_dirty"] is False
    assert found["git_commit_note"].startswith("a copy with no repository of its own")
    (copy / env.SOURCE_COMMIT_FILE).write_text("{not json")
    assert env.project_git()["git_commit_note"] == "not a git checkout"


def test_the_checkouts_state_is_read_without_taking_gits_index_lock(monkeypatch):
    # a status that refreshes the index takes .git/index.lock: a user committing meanwhile would fail on it
    from bench_utils.environment import capture

    calls = []
    monkeypatch.setattr(capture.subprocess, "run",
                        lambda command, **kwargs: calls.append(command) or capture.subprocess.CompletedProcess(
                            command, 0, stdout="", stderr=""))
    capture.project_git()
    assert calls and all(command[:2] == ["git", "--no-optional-locks"] for command in calls)
