import importlib.metadata

from packaging.requirements import Requirement

from bench_utils.environment import packages as installed_packages


def test_the_closure_follows_dependencies_at_their_installed_versions():
    closure = installed_packages.dependency_closure([Requirement("pandas>=2")])
    # two levels down: what the installed python-dateutil needs (tzdata in the lock's release, six in the GPU
    # image's older one)
    below = [requirement.name for requirement in map(Requirement, importlib.metadata.requires("python-dateutil"))
             if requirement.marker is None or requirement.marker.evaluate()]
    assert below
    for name in ("pandas", "numpy", "python-dateutil", *below):  # pandas -> python-dateutil -> below
        assert closure[name] == importlib.metadata.version(name)
    assert "pytest" not in closure  # pandas' own test extra was not asked for
    assert "torch" not in closure and list(closure) == sorted(closure)


def test_a_requirement_that_is_not_installed_or_for_another_platform_is_left_out():
    closure = installed_packages.dependency_closure([Requirement("no-such-distribution-here"),
                                                     Requirement('six; sys_platform == "win32"'), Requirement("six")])
    assert closure == {"six": importlib.metadata.version("six")}


def test_what_a_cell_measures_with_is_the_projects_dependencies_not_its_extras():
    measured = installed_packages.measured_with()
    declared = {Requirement(text).name for text in importlib.metadata.requires("bench-utils") if "extra ==" not in text}
    for name in ("torch", "transformers", "timm", "papermill", "packaging"):
        assert name in declared and measured[name] == importlib.metadata.version(name)
    assert "pytest" not in measured and "playwright" not in measured  # the test extra: never inside a cell
    assert "bench-utils" not in measured                               # the project's code is the checkout's
