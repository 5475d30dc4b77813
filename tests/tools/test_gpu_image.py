"""tools/gpu_image.py: which of the project's dependencies travel to the GPU image, on fake distributions."""

import importlib.util
from importlib import metadata
from pathlib import Path
import sys

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_image", ROOT / "tools" / "gpu_image.py")
gpu_image = importlib.util.module_from_spec(_spec)
sys.modules["gpu_image"] = gpu_image
_spec.loader.exec_module(gpu_image)
Requirement = gpu_image.Requirement


class FakeDistribution:
    def __init__(self, name, version, requires=()):
        self.metadata = {"Name": name}
        self.version = version
        self.requires = list(requires) or None


# The project needs papermill (not in the image), torch (in it) and JupyterLab (left out).
INSTALLED = {d.metadata["Name"].lower(): d for d in [
    FakeDistribution("papermill", "2.7.0", ["nbclient>=0.2", "requests", 'aiohttp>=3.9; python_version == "3.12"',
                                             'black; extra == "black"']),
    FakeDistribution("nbclient", "0.11.0", ["jupyter_client>=6.1", "traitlets"]),
    FakeDistribution("jupyter-client", "8.10.0", ["traitlets", 'importlib-metadata; python_version < "3.10"']),
    FakeDistribution("traitlets", "5.16.1"),
    FakeDistribution("aiohttp", "3.14.3"),
    FakeDistribution("black", "26.1.0"),
    FakeDistribution("jupyterlab", "4.6.6", ["jupyter-server>=2.4"]),
    FakeDistribution("jupyter-server", "2.21.1", ["traitlets"]),
    FakeDistribution("torch", "2.14.1", ["sympy"]),
    FakeDistribution("sympy", "1.14.0"),
]}
IMAGE = {"torch", "requests", "aiohttp", "sympy"}


def find(name):
    try:
        return INSTALLED[name]
    except KeyError:
        raise metadata.PackageNotFoundError(name) from None


def requirements(*texts):
    return [Requirement(text) for text in texts]


def test_travelling_follows_what_the_image_lacks_and_leaves_jupyterlab_with_its_own():
    pins, missing = gpu_image.travelling(requirements("papermill>=2.6", "torch>=2.11", "jupyterlab>=4.2"),
                                         IMAGE, "3.12", find=find)
    assert pins == ["jupyter-client==8.10.0", "nbclient==0.11.0", "papermill==2.7.0", "traitlets==5.16.1"]
    assert missing == []


def test_travelling_reads_markers_for_the_hosts_python_and_the_extras_asked_for():
    image = IMAGE - {"aiohttp"}
    pins, _ = gpu_image.travelling(requirements("papermill"), image, "3.12", find=find)
    assert "aiohttp==3.14.3" in pins and "black==26.1.0" not in pins
    pins, _ = gpu_image.travelling(requirements("papermill[black]"), image, "3.11", find=find)
    assert "aiohttp==3.14.3" not in pins and "black==26.1.0" in pins
    pins, _ = gpu_image.travelling(requirements("papermill", "nbclient", "papermill[black]"), image, "3.11", find=find)
    assert pins.count("papermill==2.7.0") == 1 and "black==26.1.0" in pins  # asked for again, with an extra


def test_travelling_names_what_is_needed_but_not_installed():
    pins, missing = gpu_image.travelling(requirements("papermill", "babel>=2.14"), IMAGE, "3.12", find=find)
    assert missing == ["babel"] and "papermill==2.7.0" in pins


def test_image_packages_are_normalized_names_without_comments(tmp_path):
    listed = tmp_path / "image.txt"
    listed.write_text("# what the image has\nPyYAML\ntyping_extensions  # a comment\n\nnvidia-ml-py\n")
    assert gpu_image.image_packages(listed) == {"pyyaml", "typing-extensions", "nvidia-ml-py"}


def test_project_requirements_leave_out_ray_jupyterlab_and_playwright():
    names = {gpu_image.normalize(r.name) for r in gpu_image.project_requirements(extras=["test", "ray"])}
    assert {"torch", "transformers", "papermill", "ipykernel", "pytest"} <= names
    assert not names & {"jupyterlab", "playwright", "ray"}


def test_the_projects_image_list_has_torch_and_lacks_papermill():
    image = gpu_image.image_packages()
    assert {"torch", "transformers", "timm", "nvidia-ml-py"} <= image and "papermill" not in image


def _image_pins():
    lines = (ROOT / "environments" / "gpu-image-constraints.txt").read_text(encoding="utf-8").splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_the_constraints_pin_only_what_the_image_has():
    pins = _image_pins()
    assert set(pins) <= gpu_image.image_packages()
    assert pins["torch"] == "2.11.0" and pins["transformers"] == "5.17.0"  # as read on the GPU machines


def test_the_floors_admit_the_gpu_image_and_are_its_versions_for_torch_and_transformers():
    pins = _image_pins()
    requirements = {gpu_image.normalize(r.name): r for r in gpu_image.project_requirements(extras=["test"])}
    for name, requirement in requirements.items():
        if name in pins:
            assert requirement.specifier.contains(pins[name]), f"the GPU image cannot install {requirement}"
    for name in ("torch", "torchvision", "transformers"):
        floor, = (Version(s.version) for s in requirements[name].specifier if s.operator == ">=")
        assert floor.release[:2] == Version(pins[name]).release[:2], f"{name}: the floor the image tests"
