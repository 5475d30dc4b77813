"""tools/wheelhouse.py: what it downloads, and that it fails loudly; pip is faked, nothing is fetched."""

import importlib.util
from pathlib import Path
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "tools" / "wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheelhouse)


class FakePip:
    """pip download: writes a wheel of ``size`` bytes per pin, and finds none for the pins in ``absent``."""

    def __init__(self, absent=(), size=1000):
        self.absent, self.size, self.calls = set(absent), size, []

    def __call__(self, command, **kwargs):
        self.calls.append(command)
        dest = Path(command[command.index("--dest") + 1])
        pins = command[command.index("--dest") + 2:]
        for pin in pins:
            if pin in self.absent:
                return subprocess.CompletedProcess(command, 1)
            name, version = pin.split("==")
            (dest / f"{name}-{version}-py3-none-any.whl").write_bytes(b"0" * self.size)
        return subprocess.CompletedProcess(command, 0)


def test_download_command_asks_for_wheels_only_without_dependencies_for_the_hosts_python(tmp_path):
    command = wheelhouse.download_command(["papermill==2.7.0"], tmp_path, "3.12")
    assert command[1:4] == ["-m", "pip", "download"] and command[-1] == "papermill==2.7.0"
    assert "--no-deps" in command and "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.12"
    platforms = {command[i + 1] for i, arg in enumerate(command) if arg == "--platform"}
    assert {"any", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"} <= platforms


def test_download_names_every_pin_with_no_wheel(tmp_path):
    pip = FakePip(absent={"b==1", "d==1"})
    assert wheelhouse.download(["a==1", "b==1", "c==1", "d==1"], tmp_path, "3.12", run=pip) == ["b==1", "d==1"]
    assert wheelhouse.download(["a==1", "c==1"], tmp_path, "3.12", run=FakePip()) == []


def _main(monkeypatch, tmp_path, pip, *args):
    monkeypatch.setattr(wheelhouse.gpu_image, "travelling", lambda *a: (["a==1", "b==2"], []))
    monkeypatch.setattr(wheelhouse.subprocess, "run", pip)
    return wheelhouse.main(["--dest", str(tmp_path), *args])


def test_main_fills_the_folder_with_this_runs_wheels_only(monkeypatch, tmp_path):
    (tmp_path / "old-0.1-py3-none-any.whl").write_bytes(b"earlier run")
    assert _main(monkeypatch, tmp_path, FakePip(size=2**20)) == 0
    assert sorted(p.name for p in tmp_path.glob("*.whl")) == ["a-1-py3-none-any.whl", "b-2-py3-none-any.whl"]
    assert (tmp_path / "requirements.txt").read_text() == "a==1\nb==2\n"


def test_main_prints_the_size(monkeypatch, tmp_path, capsys):
    _main(monkeypatch, tmp_path, FakePip(size=2**20))
    assert f"2 wheels in {tmp_path}/: 2.0 MiB" in capsys.readouterr().out


def test_main_fails_loudly_when_a_wheel_is_not_found(monkeypatch, tmp_path, capsys):
    assert _main(monkeypatch, tmp_path, FakePip(absent={"b==2"}), "--python-version", "3.13") == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and "b==2" in err and "3.13" in err


def test_main_fails_when_the_wheels_cannot_travel(monkeypatch, tmp_path, capsys):
    assert _main(monkeypatch, tmp_path, FakePip(size=2**20), "--max-mib", "1.5") == 1
    assert "over the 1.5 MiB" in capsys.readouterr().err


def test_main_fails_when_a_needed_package_is_not_installed(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(wheelhouse.gpu_image, "travelling", lambda *a: (["a==1"], ["babel"]))
    assert wheelhouse.main(["--dest", str(tmp_path)]) == 2
    assert "babel" in capsys.readouterr().err


def test_what_travels_for_this_project():
    """The real closure over this environment: papermill and ipykernel travel, the image's and Ray's do not."""
    gpu_image = wheelhouse.gpu_image
    pins, missing = gpu_image.travelling(gpu_image.project_requirements(extras=["test"]), gpu_image.image_packages(),
                                         f"{sys.version_info.major}.{sys.version_info.minor}")
    names = {pin.split("==")[0] for pin in pins}
    assert {"papermill", "ipykernel", "nbconvert", "babel"} <= names and not missing
    assert not names & {"torch", "transformers", "ray", "jupyterlab", "playwright", "jupyter-server"}
