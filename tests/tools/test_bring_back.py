"""tools/bring_back.py: a GPU host's study folder into reports/, the records as measured, the host's paths gone."""

import importlib.util
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


def test_a_folder_without_records_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="holds no results.jsonl"):
        bring_back.bring_back(tmp_path, tmp_path / "dest")
