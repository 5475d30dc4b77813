import getpass
import json
import socket

import torch

from bench_utils import capture_environment
from bench_utils.env import format_environment, gpu_name

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
    assert gpu_name(env, "cuda:0") == "NVIDIA H100" and gpu_name(env, "cuda") == "NVIDIA H100"
    assert gpu_name(env, "cpu") is None and gpu_name(env, "cuda:3") is None
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

    from bench_utils.env import _nvml_gpus

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml())
    gpus, facts = _nvml_gpus()
    assert facts == {"nvml": True, "driver_version": "580.65.06", "cuda_driver_version": "13.0"}
    assert [g["name"] for g in gpus] == ["NVIDIA H100 80GB HBM3 #0", "NVIDIA H100 80GB HBM3 #1"]
    assert gpus[0]["memory_total_bytes"] == 80 * 2**30 and gpus[0]["power_limit_w"] == 700.0
    assert gpus[1]["uuid"].startswith("GPU-")  # which physical GPU, as the energy and memory blocks name it
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(fail_init=True))
    assert _nvml_gpus() == ([], {"nvml": False})


def test_a_cluster_node_says_where_it_placed_the_process(monkeypatch):
    from bench_utils.env import ACCELERATOR_TYPE_ENV, CLUSTER_NODE_ENV

    monkeypatch.delenv(ACCELERATOR_TYPE_ENV, raising=False)
    monkeypatch.delenv(CLUSTER_NODE_ENV, raising=False)
    local = capture_environment()
    assert local["accelerator_type"] is None and local["cluster_node_id"] is None
    monkeypatch.setenv(ACCELERATOR_TYPE_ENV, "H100")
    monkeypatch.setenv(CLUSTER_NODE_ENV, "a1b2")
    placed = capture_environment()  # read afresh: one Ray worker runs tasks of several kinds
    assert (placed["accelerator_type"], placed["cluster_node_id"]) == ("H100", "a1b2")
