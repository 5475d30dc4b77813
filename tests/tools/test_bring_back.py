"""tools/bring_back.py: a GPU host's study folder into reports/, the records as measured, the host's paths gone."""

import importlib.util
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bring_back", ROOT / "tools" / "bring_back.py")
bring_back = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bring_back)

WARNING = ("/opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/compile_fx.py:322: UserWarning: "
           "TensorFloat32 tensor cores")


def test_records_travel_byte_for_byte_and_every_other_text_loses_the_hosts_paths(tmp_path):
    source, destination = tmp_path / "out" / "hfg", tmp_path / "reports" / "hf-guide-h200"
    (source / "logs").mkdir(parents=True)
    record = '{"error": "at /opt/torch/.venv/lib/python3.12/site-packages/x.py", "path": "/tmp/hfg/a"}\n'
    (source / "results.jsonl").write_text(record)
    (source / "logs" / "k.log").write_text(f"{WARNING}\nresults in /tmp/hfg/results.jsonl\n"
                                           "tmp_path = PosixPath('/tmp/pytest-of-root/pytest-0/t0')\n")
    (source / "notebooks").mkdir()
    (source / "notebooks" / "k.ipynb").write_text('{"text": "/root/.cache/x"}')
    destination.mkdir(parents=True)
    (destination / "corrections.yaml").write_text("[]\n")  # the destination's own files stay
    written = bring_back.bring_back(source, destination, study_folder="/tmp/hfg")
    assert len(written) == 3 and (destination / "corrections.yaml").exists()
    assert (destination / "results.jsonl").read_text() == record
    log = (destination / "logs" / "k.log").read_text()
    assert log == ("<site-packages>/torch/_inductor/compile_fx.py:322: UserWarning: TensorFloat32 tensor cores\n"
                   "results in <study>/results.jsonl\ntmp_path = PosixPath('<pytest-tmp>/pytest-0/t0')\n")
    assert (destination / "notebooks" / "k.ipynb").read_text() == '{"text": "~/.cache/x"}'


def test_records_are_merged_the_destinations_kept_and_the_sources_new_ones_after_them(tmp_path):
    source, destination = tmp_path / "out" / "anchors", tmp_path / "reports" / "anchors-h200"
    source.mkdir(parents=True)
    destination.mkdir(parents=True)
    earlier = '{"lease": 1, "cell": "b1"}\n{"lease": 1, "cell": "b4"}\n'
    (destination / "results.jsonl").write_text(earlier)
    # a lease's anchors measured in an empty study: they join the earlier leases' records
    (source / "results.jsonl").write_text('{"lease": 2, "cell": "b1"}\n{"lease": 2, "cell": "b4"}\n')
    bring_back.bring_back(source, destination)
    assert (destination / "results.jsonl").read_text() == earlier + '{"lease": 2, "cell": "b1"}\n{"lease": 2, "cell": "b4"}\n'
    # a host that started from the committed study holds them all, in order: the merge is its file, once each; a
    # last line a killed kernel left unfinished is no record, and the whole one a later archive brings is kept
    host = (destination / "results.jsonl").read_text() + '{"lease": 2, "cell": "b16"}\n'
    (source / "results.jsonl").write_text(host + '{"lease": 2, "cell": "b1", "x')
    bring_back.bring_back(source, destination)
    assert (destination / "results.jsonl").read_text() == host
    (source / "results.jsonl").write_text(host + '{"lease": 2, "cell": "b1", "x": 2}\n')
    bring_back.bring_back(source, destination)
    assert (destination / "results.jsonl").read_text() == (source / "results.jsonl").read_text()
    assert not list(destination.glob("*.partial"))


def test_a_new_destination_gets_the_whole_records_only(tmp_path):
    source, destination = tmp_path / "out" / "study", tmp_path / "reports" / "study"
    source.mkdir(parents=True)
    (source / "results.jsonl").write_text('{"record": 1}\n{"rec')  # a kernel killed while it wrote its second
    bring_back.bring_back(source, destination)
    assert (destination / "results.jsonl").read_text() == '{"record": 1}\n'


def test_a_destination_whose_records_end_in_a_partial_line_is_refused_before_anything_is_copied(tmp_path):
    source, destination = tmp_path / "out" / "study", tmp_path / "reports" / "study"
    (source / "logs").mkdir(parents=True)
    (source / "results.jsonl").write_text('{"record": 2}\n')
    (source / "logs" / "k.log").write_text("a log\n")
    destination.mkdir(parents=True)
    (destination / "results.jsonl").write_text('{"record": 1}\n{"rec')
    with pytest.raises(SystemExit, match="ends in a partial line"):
        bring_back.bring_back(source, destination)
    assert [path.name for path in destination.rglob("*")] == ["results.jsonl"]


def test_a_folder_without_records_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="holds no results.jsonl"):
        bring_back.bring_back(tmp_path, tmp_path / "dest")


def lease_archive(tmp_path, studies=("hf-guide-h200",)):
    """An archive as tools/gpu_lease.sh packs it: study/<name>/ and lease/."""
    root = tmp_path / "host"
    for name in studies:
        (root / "study" / name / "logs").mkdir(parents=True)
        (root / "study" / name / "results.jsonl").write_text('{"record": "/tmp/study/x as measured"}\n')
        (root / "study" / name / "logs" / "k.log").write_text(f"results in /tmp/study/{name}/results.jsonl\n")
        (root / "study" / name / ".runner.lock").write_text("host 1234\n")
    (root / "lease").mkdir()
    (root / "lease" / "cuda-tests.txt").write_text("10 passed\n/tmp/pytest-of-root/pytest-0/t0\n")
    (root / "lease" / "checks-done").touch()
    archive = tmp_path / "guide-1-2.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root / "study", "study")
        tar.add(root / "lease", "lease")
    return archive


def test_an_archive_brings_its_study_and_its_lease_files_back_and_leaves_the_hosts_state(tmp_path):
    destination = tmp_path / "reports" / "hf-guide-h200"
    assert bring_back.main([str(lease_archive(tmp_path)), str(destination), "--lease", "lease-x"]) == 0
    assert (destination / "results.jsonl").read_text() == '{"record": "/tmp/study/x as measured"}\n'
    assert (destination / "logs" / "k.log").read_text() == "results in <study>/results.jsonl\n"
    assert (destination / "lease-x" / "cuda-tests.txt").read_text() == "10 passed\n<pytest-tmp>/pytest-0/t0\n"
    assert not (destination / ".runner.lock").exists() and not (destination / "lease-x" / "checks-done").exists()


def test_an_archive_of_two_studies_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="2 study folders"):
        bring_back.bring_back_archive(lease_archive(tmp_path, ("a", "b")), tmp_path / "dest", "lease-x")


def test_the_leases_own_packages_and_the_images_python_are_scrubbed_as_what_they_are():
    # what the first pipelined lease's logs held: papermill from the wheels gpu_lease.sh installs into /tmp/site,
    # and the image's interpreter in a failed subprocess's command line
    text = ('  File "/tmp/site/papermill/cli.py", line 235\n'
            "popenargs = (['/opt/torch/.venv/bin/python3', '-m', 'x'],)\n"
            "/usr/bin/python3.12 -c pass\n/tmp/sitewide stays\n")
    assert bring_back.scrub_host_paths(text) == ('  File "<site-packages>/papermill/cli.py", line 235\n'
                                                 "popenargs = (['<python>', '-m', 'x'],)\n"
                                                 "<python> -c pass\n/tmp/sitewide stays\n")


def test_a_caches_archive_in_parts_is_joined_and_only_its_portable_files_unpacked(tmp_path):
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in (("./hf-guide-h200/vit-bs1-x/cold.json", b"{}"),
                           ("./hf-guide-h200/vit-bs1-x/artifacts.bin", bytes(range(256)) * 64),
                           ("./hf-guide-h200/vit-bs1-x/fxgraph/entry", b"a host's own cache")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    whole = buffer.getvalue()
    out = tmp_path / "out"
    out.mkdir()
    half = len(whole) // 2
    (out / "caches-1-2.tgz.part-aa").write_bytes(whole[:half])
    (out / "caches-1-2.tgz.part-ab").write_bytes(whole[half:])
    destination = tmp_path / ".compile-caches"
    assert bring_back.main([str(out / "caches-1-2.tgz.part-ab"), str(destination)]) == 0
    kept = destination / "hf-guide-h200" / "vit-bs1-x"
    assert (kept / "artifacts.bin").read_bytes() == bytes(range(256)) * 64 and (kept / "cold.json").exists()
    assert not (kept / "fxgraph").exists()
