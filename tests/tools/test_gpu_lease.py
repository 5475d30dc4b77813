"""tools/gpu_lease.sh on a fake GPU host: one archive per command, a second command resumes from the first.

The device tool brings back only a few files per command and copies the working tree afresh before each one
(the second H200 lease lost its first command's logs and notebooks to both); the script must survive that.
"""

import os
from pathlib import Path
import shutil
import signal
import subprocess
import tarfile
import time

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A python3 that answers the script's calls as the GPU host's would, and counts the lease's checks.
FAKE_PYTHON = r"""#!/usr/bin/env bash
case "$*" in
  *"pip install"*) for a in "$@"; do [ "$prev" = --target ] && mkdir -p "$a"; prev=$a; done ;;
  *"-m pytest"*) echo x >> "$FAKE_LOG/checks"; echo "1 passed" ;;
  *"validate-timer"*) for a in "$@"; do [ "$prev" = --out ] && echo '{}' > "$a"; prev=$a; done ;;
  *"--dry-run"*) echo "to run: some cells" ;;
  *"bench_utils run"*)
    for a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done
    echo "$BENCH_UTILS_COMPILE_CACHES" > "$FAKE_LOG/caches-root"
    ls "$BENCH_UTILS_COMPILE_CACHES" > "$FAKE_LOG/caches-seen"
    mkdir -p "$BENCH_UTILS_COMPILE_CACHES/hf-guide-h200/resnet-bs1-default-abc/fxgraph"
    echo '{"calls_ms": [1]}' > "$BENCH_UTILS_COMPILE_CACHES/hf-guide-h200/resnet-bs1-default-abc/cold.json"
    echo bytes > "$BENCH_UTILS_COMPILE_CACHES/hf-guide-h200/resnet-bs1-default-abc/artifacts.bin"
    echo big > "$BENCH_UTILS_COMPILE_CACHES/hf-guide-h200/resnet-bs1-default-abc/fxgraph/entry"
    echo '{"record": 1}' >> "$out/results.jsonl"
    sleep "${FAKE_RUN_SLEEP:-0}"
    echo '{"record": 2}' >> "$out/results.jsonl" ;;
  *) echo "fake $*" ;;
esac
"""


@pytest.fixture
def host(tmp_path):
    """A fake host: its python3 and nvidia-smi, the /tmp a warm machine keeps, and a committed study."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("python3", FAKE_PYTHON), ("nvidia-smi", "#!/bin/sh\necho H200\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    committed = tmp_path / "committed"
    (committed / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "gpu_lease.sh", committed / "tools")
    study = committed / "reports" / "hf-guide-h200"
    (study / "en").mkdir(parents=True)
    (study / "en" / "index.html").write_text("<html>the committed page</html>")
    (study / "results.jsonl").write_text('{"record": 0}\n')
    (committed / "reports" / "anchors-h200").mkdir()  # an earlier lease's anchors, on the same image
    (committed / "reports" / "anchors-h200" / "results.jsonl").write_text('{"anchor": "an earlier lease"}\n')
    (tmp_path / "keep").mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_LEASE_TMP": str(tmp_path / "keep"),
           "FAKE_LOG": str(tmp_path)}
    return tmp_path, committed, env


def command(host, number: int, step: str = "guide", budget: int = 120, **extra_env) -> subprocess.Popen:
    """One device command: a fresh copy of the committed tree and an empty $OUT, as the device tool gives."""
    tmp_path, committed, env = host
    tree, out = tmp_path / f"tree{number}", tmp_path / f"out{number}"
    shutil.copytree(committed, tree)
    out.mkdir()
    return subprocess.Popen(["bash", "tools/gpu_lease.sh", str(budget), step], cwd=tree, start_new_session=True,
                            env={**env, "OUT": str(out), **extra_env}, stdout=subprocess.PIPE, text=True)


def archive_of(out: Path) -> tarfile.TarFile:
    files = [path for path in out.glob("*.tgz") if not path.name.startswith("caches-")]
    assert len(files) == 1 and files[0].name.startswith("guide-") and files[0].suffix == ".tgz", files
    return tarfile.open(files[0])


def wait_for_first_record(tmp_path: Path) -> None:
    """Until the fake run has written its first record into the kept study (then it sleeps)."""
    records = tmp_path / "keep" / "study" / "hf-guide-h200" / "results.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (records.exists() and records.read_text().count("\n") >= 2):
        time.sleep(0.1)


def test_each_command_leaves_one_archive_and_the_second_resumes_from_the_first(host):
    tmp_path = host[0]
    first = command(host, 1)
    # the device tool reads the command's output to its end: nothing it started may keep that open after it
    # (the packer's sleep, a minute long, once did)
    output, _ = first.communicate(timeout=30)
    assert first.returncode == 0 and "guide-" in output  # it lists the archive it leaves
    with archive_of(tmp_path / "out1") as tar:
        names = set(tar.getnames())
        records = tar.extractfile("study/hf-guide-h200/results.jsonl").read().decode().splitlines()
    assert {"lease/env.txt", "lease/cuda-tests.txt", "lease/nvidia-smi.txt", "lease/timer_check.json"} <= names
    assert "study/hf-guide-h200/timer_check.json" in names
    assert not any(name.startswith("study/hf-guide-h200/en") for name in names)  # the committed pages stay here
    assert records == ['{"record": 0}', '{"record": 1}', '{"record": 2}']

    second = command(host, 2)  # the tree is the committed one again: only /tmp remembers
    assert second.communicate(timeout=30)[0] and second.returncode == 0
    with archive_of(tmp_path / "out2") as tar:
        records = tar.extractfile("study/hf-guide-h200/results.jsonl").read().decode().splitlines()
        logs = [name for name in tar.getnames() if name.startswith("lease/guide-")]
    assert records == ['{"record": 0}'] + ['{"record": 1}', '{"record": 2}'] * 2
    assert len(logs) == 2  # both commands' run logs travel with the second
    assert (tmp_path / "checks").read_text().count("x") == 1  # the lease's checks ran once per machine


def test_a_run_that_overruns_its_limit_is_ended_by_the_scripts_own_timeout_and_its_records_packed(host):
    """Nothing packs beside a timed window: a run that hangs past its time limit is ended by the script's own
    timeout, well before the device tool's, and the archive packed at the end holds what it had recorded."""
    tmp_path = host[0]
    process = command(host, 1, budget=45, FAKE_RUN_SLEEP="600", GPU_LEASE_MIN_STEP_S="5")  # the run's limit ~15 s
    started = time.monotonic()
    process.communicate(timeout=120)
    assert time.monotonic() - started < 60
    with archive_of(tmp_path / "out1") as tar:
        kept = tar.extractfile("study/hf-guide-h200/results.jsonl").read().decode().splitlines()
    assert kept == ['{"record": 0}', '{"record": 1}']


def test_compile_caches_carried_in_are_used_and_the_portable_files_alone_come_back(host):
    tmp_path, committed, env = host
    carried = committed / ".compile-caches" / "hf-guide-h200" / "vit-bs1-default-def"
    carried.mkdir(parents=True)
    (carried / "cold.json").write_text("{}")
    process = command(host, 1)
    process.communicate(timeout=30)
    assert process.returncode == 0
    root = Path((tmp_path / "caches-root").read_text().strip())
    assert root == tmp_path / "keep" / "compile-caches" and "hf-guide-h200" in (tmp_path / "caches-seen").read_text()
    assert (root / "hf-guide-h200" / "vit-bs1-default-def" / "cold.json").exists()  # copied in before the run
    (caches,) = (tmp_path / "out1").glob("caches-*.tgz")
    with tarfile.open(caches) as tar:
        names = {Path(name).as_posix().lstrip("./") for name in tar.getnames() if tar.getmember(name).isfile()}
    assert names == {"hf-guide-h200/resnet-bs1-default-abc/cold.json", "hf-guide-h200/resnet-bs1-default-abc/artifacts.bin",
                     "hf-guide-h200/vit-bs1-default-def/cold.json"}  # no on-disk cache (fxgraph/) leaves


def test_a_command_stopped_with_sigterm_packs_at_once(host):
    tmp_path = host[0]
    process = command(host, 1, FAKE_RUN_SLEEP="60")  # the next packing would be a minute away
    wait_for_first_record(tmp_path)
    os.killpg(process.pid, signal.SIGTERM)
    process.communicate(timeout=10)
    assert process.returncode != 0
    with archive_of(tmp_path / "out1") as tar:
        kept = tar.extractfile("study/hf-guide-h200/results.jsonl").read().decode().splitlines()
    assert kept == ['{"record": 0}', '{"record": 1}']
    assert not list((tmp_path / "out1").glob(".packing-*"))


def test_the_experiments_step_measures_the_anchors_in_a_study_of_their_own_then_runs_the_experiments(host):
    tmp_path = host[0]
    process = command(host, 1, step="experiments")
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    (archive,) = (tmp_path / "out1").glob("experiments-*.tgz")
    with tarfile.open(archive) as tar:
        records = tar.extractfile("study/anchors-h200/results.jsonl").read().decode().splitlines()
        log = next(name for name in tar.getnames() if name.startswith("lease/experiments-"))
        log_text = tar.extractfile(log).read().decode()
    # measured afresh: the committed anchors, copied in, would be resumed (the same record keys on the same image)
    assert records == ['{"record": 1}', '{"record": 2}']
    assert "anchors exit 0" in log_text
    assert "fake tools/lease_experiments.py run" in log_text and "experiments exit 0" in log_text


def test_the_anchors_measured_by_a_warm_machines_second_command_get_the_leases_checks(host):
    """The experiments step after another on the same machine: its anchors study, begun empty, has the checks the
    first command ran (the page reads the timer check from the study folder)."""
    tmp_path = host[0]
    first = command(host, 1)  # the guide first: the lease's checks run once, here
    first.communicate(timeout=30)
    assert first.returncode == 0
    process = command(host, 2, step="experiments")
    process.communicate(timeout=30)
    assert process.returncode == 0
    (archive,) = (tmp_path / "out2").glob("experiments-*.tgz")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert "study/anchors-h200/timer_check.json" in names
    assert (tmp_path / "checks").read_text().count("x") == 1
