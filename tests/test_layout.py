"""The package's shape: data flows one way, and each module stays small and says what it is for.

grid file -> runner -> notebook -> cell -> records -> report: a lower layer never
imports a higher one. Checked twice: statically (every import in the source, the
ones inside functions included) and at run time (what importing each subpackage
really loads, the package forgotten before each).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
import re
import subprocess
import sys
import warnings

import pytest

import bench_utils

PACKAGE = Path(bench_utils.__file__).parent
# the base every layer may use
TOP_MODULES = {"errors", "paths", "parameters", "vocabulary", "settings", "kernel", "environment", "records"}

# What each part may import of the package (besides itself and the base).
ALLOWED = {
    "base": set(),
    "measurement": set(),
    "variants": {"measurement"},
    "zoo": {"measurement", "variants"},
    "study": {"measurement", "variants", "zoo"},
    "cluster": {"measurement", "variants", "zoo", "study"},
    "report": {"measurement", "zoo"},
    "reproduce": {"measurement", "zoo", "study", "report"},  # re-runs a study (its own process) and compares
    "cli": {"measurement", "variants", "zoo", "study", "cluster", "report", "reproduce"},
    "__init__": {"measurement", "variants", "zoo", "study", "cluster", "report"},
}
# Within the base, the order in which its modules may import each other.
BASE_ORDER = ["errors", "paths", "parameters", "vocabulary", "settings", "kernel", "environment", "environment.packages",
              "environment.capture", "records", "records.value_types", "records.blocks", "records.measured_on", "records.upgrade", "records.check", "records.schema", "records.key", "records.build", "records.results_file",
              "records.environment_files"]
# Modules that must load neither torch nor (where listed) pandas: the runner's lease,
# the records, the model registry, the cell's plan (the dry run prices it) and the whole report read results
# without them.
NO_TORCH = ["bench_utils.errors", "bench_utils.paths", "bench_utils.parameters", "bench_utils.vocabulary", "bench_utils.settings",
            "bench_utils.kernel", "bench_utils.environment.capture", "bench_utils.records.value_types", "bench_utils.records.blocks", "bench_utils.records.measured_on",
            "bench_utils.records.schema",
            "bench_utils.records.upgrade", "bench_utils.records.check", "bench_utils.records.key",
            "bench_utils.records.build",
            "bench_utils.records.results_file", "bench_utils.study.lease", "bench_utils.study.grid.grid_file", "bench_utils.zoo.registry",
            "bench_utils.variants.cell_plan",
            "bench_utils.zoo.architectures", "bench_utils.report.frame", "bench_utils.report.tables",
            "bench_utils.report.context", "bench_utils.report.plots", "bench_utils.report.sections",
            "bench_utils.report.render", "bench_utils.environment.packages", "bench_utils.records.environment_files",
            "bench_utils.reproduce.rerun", "bench_utils.cli", "bench_utils"]
NO_PANDAS = ["bench_utils.errors", "bench_utils.environment.packages", "bench_utils.records.environment_files", "bench_utils.parameters", "bench_utils.records.value_types", "bench_utils.records.blocks", "bench_utils.records.measured_on",
            "bench_utils.records.schema",
             "bench_utils.records.upgrade", "bench_utils.records.check", "bench_utils.records.key", "bench_utils.records.build",
             "bench_utils.records.results_file", "bench_utils.study.lease", "bench_utils.kernel"]
# What the kernels import (the cells', the report's): never nbformat, whose jsonschema builds a URI grammar (2.3 s a
# report kernel, once a locale)
NO_NBFORMAT = ["bench_utils.report.sections", "bench_utils.study.cell.task"]
# A module this long is worth a look (a warning: files split by meaning, not by size); past the limit, split it.
WARN_LINES = 400
MAX_LINES = 600


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(("bench_utils",) + (parts[:-1] if parts[-1] == "__init__" else parts))
        found[name] = path
    return found


def part_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    if parts[1] in TOP_MODULES:
        return "base"
    if parts[1] == "__main__":
        return "cli"
    return parts[1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def package_imports(module: str, path: Path) -> set[str]:
    """Every bench_utils module that ``module`` imports, anywhere in its source (type-only imports aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    imported: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("bench_utils"):
                for alias in node.names:  # `from . import stats` names a module
                    candidate = f"{target}.{alias.name}"
                    imported.add(candidate if candidate in modules() else target)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.name.startswith("bench_utils"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return imported - {module}


def violations(module: str, imported: set[str]) -> list[str]:
    mine, wrong = part_of(module), []
    for target in imported:
        theirs = part_of(target)
        if theirs in (mine, "base") and not (mine == theirs == "base"):
            continue
        if mine == theirs == "base":
            ours, other = module.split(".", 1)[1], target.split(".", 1)[1]
            if BASE_ORDER.index(other) >= BASE_ORDER.index(ours):
                wrong.append(f"{module} imports {target} (later in the base)")
            continue
        if theirs not in ALLOWED[mine]:
            wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    return wrong


def test_no_module_imports_a_higher_layer():
    wrong = []
    for module, path in modules().items():
        wrong += violations(module, package_imports(module, path))
    assert not wrong, "\n".join(sorted(wrong))


def test_the_checker_catches_a_wrong_way_import():
    # The rules themselves: the imports that issue #8 found running the wrong way.
    assert violations("bench_utils.report.render", {"bench_utils.study.runner.grid_runner"})
    assert violations("bench_utils.measurement.timer_check", {"bench_utils.variants.modes"})
    assert violations("bench_utils.study.cell.task", {"bench_utils.report.frame"})
    assert violations("bench_utils.study.runner.grid_runner", {"bench_utils.cluster.driver"})
    assert violations("bench_utils.cluster.driver", {"bench_utils.report.frame"})
    assert violations("bench_utils.records.build", {"bench_utils.records.results_file"})
    assert not violations("bench_utils.study.cell.measured_cell", {"bench_utils.measurement.compare", "bench_utils.records.build"})


SUBPACKAGES = ["measurement", "variants", "zoo", "study", "cluster", "report", "reproduce"]


def test_importing_a_subpackage_loads_no_higher_layer():
    # one interpreter (one per subpackage took 35 s): the package forgotten before each, as a fresh one would have it;
    # what the package imports of others (torch) stays loaded and says nothing about the layers
    names = {sub: [m for m in modules() if m.startswith(f"bench_utils.{sub}")] for sub in SUBPACKAGES}
    script = ("import importlib, json, sys\n"
              "loaded = {}\n"
              f"for sub, names in {names!r}.items():\n"
              "    for module in [m for m in sys.modules if m == 'bench_utils' or m.startswith('bench_utils.')]:\n"
              "        del sys.modules[module]\n"
              "    for name in names: importlib.import_module(name)\n"
              "    loaded[sub] = sorted(m for m in sys.modules if m.startswith('bench_utils'))\n"
              "print(json.dumps(loaded))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    higher = {sub: [m for m in loaded[sub] if part_of(m) not in ("base", "__init__", sub)
                    and part_of(m) not in ALLOWED[sub]] for sub in SUBPACKAGES}
    assert not any(higher.values()), f"importing a subpackage loaded a higher layer: {higher}"


def heavy_modules_loaded_by(*names: str) -> dict[str, bool]:
    """Whether importing ``names``, in a fresh interpreter, loads torch, pandas and nbformat."""
    script = (f"import importlib, json, sys; [importlib.import_module(name) for name in {list(names)!r}]; "
              "print(json.dumps({m: m in sys.modules for m in ('torch', 'pandas', 'nbformat')}))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_lease_records_registry_and_report_load_no_torch_and_the_kernels_no_nbformat():
    # all at once (a fresh interpreter each took 41 s): what the modules load together holds what each loads alone,
    # so a heavy module absent from the union is absent from each; where one is there, each is tried alone to name it
    for heavy, names in (("torch", NO_TORCH), ("pandas", NO_PANDAS), ("nbformat", NO_NBFORMAT)):
        if heavy_modules_loaded_by(*names)[heavy]:
            assert [name for name in names if heavy_modules_loaded_by(name)[heavy]] == [], heavy


# bench_utils/study/ by where the code runs: the host (grid reading, the runner) and the kernel (the cell)
HOST_SIDE = ("bench_utils.study.grid", "bench_utils.study.runner", "bench_utils.study.pricing")
SHARED = ("bench_utils.study.lease", "bench_utils.study.progress_file")


def test_the_host_side_of_the_study_loads_no_torch_and_never_the_kernels_side():
    host = [m for m in modules() if m.startswith(HOST_SIDE) or m in SHARED]
    script = ("import importlib, sys\n"
              f"for name in {host!r}: importlib.import_module(name)\n"
              "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"
    wrong = [f"{module} imports {target}" for module in host for target in package_imports(module, modules()[module])
             if target.startswith("bench_utils.study.cell")]
    wrong += [f"{module} imports {target}" for module, path in modules().items()
              if module.startswith("bench_utils.study.cell") for target in package_imports(module, path)
              if target.startswith("bench_utils.study.runner")]
    assert not wrong, wrong


# pricing, one way: each module imports only the ones before it
PRICING = ["prior", "prices", "plan"]


def test_pricing_imports_run_one_way_inside_its_folder():
    found = {name: {target.rsplit(".", 1)[-1] for target in
                    package_imports(f"bench_utils.study.pricing.{name}", modules()[f"bench_utils.study.pricing.{name}"])
                    if target.startswith("bench_utils.study.pricing.")} for name in PRICING}
    assert all(set(PRICING[:index]) >= found[name] for index, name in enumerate(PRICING)), found
    assert found["plan"] >= {"prices"} and found["prices"] >= {"prior"} and not found["prior"]


def test_the_public_api_still_imports_from_the_top():
    from bench_utils import (
        Comparison,
        Measurement,
        MemoryProbe,
        append_record,
        capture_environment,
        compare,
        list_models,
        load_model,
        make_record,
        measure,
        read_records,
        read_results,
    )

    assert callable(measure) and callable(compare) and callable(load_model)
    assert {Comparison.__name__, Measurement.__name__, MemoryProbe.__name__} == {
        "Comparison", "Measurement", "MemoryProbe"}
    assert all(callable(f) for f in (append_record, capture_environment, list_models, make_record,
                                     read_records, read_results))
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        bench_utils.nonsense  # noqa: B018


def test_each_module_is_small_and_says_its_concern():
    too_long, silent = [], []
    for module, path in modules().items():
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_LINES:
            too_long.append(f"{module}: {lines} lines")
        elif lines > WARN_LINES:
            warnings.warn(f"{module}: {lines} lines (over {WARN_LINES}): does it hold one concern?", stacklevel=1)
        if module != "bench_utils.__main__" and not ast.get_docstring(ast.parse(source)):
            silent.append(module)
    assert not too_long, too_long
    assert not silent, f"modules without a docstring: {silent}"


def test_each_subpackage_says_in_one_line_what_it_is_for():
    for name in SUBPACKAGES:
        docstring = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text(encoding="utf-8")))
        assert docstring and len(docstring.splitlines()) == 1, name


def test_serial_tests_live_where_make_test_runs_them_alone():
    # make test's serial pass collects the Makefile's SERIAL_TESTS only (collecting every test costs 11 s here)
    tests = Path(__file__).parent
    mark = "pytest.mark." + "serial"  # spelt apart: this file is not one of them
    serial = re.search(r"^SERIAL_TESTS := (.+)$", (tests.parent / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    places = [tests.parent / place for place in serial.group(1).split()]
    marked = [path for path in tests.rglob("test_*.py") if mark in path.read_text(encoding="utf-8")]
    assert marked and all(any(path == place or place in path.parents for place in places) for path in marked), marked


def test_test_modules_have_names_of_their_own():
    # tests/ holds no packages: pytest imports each test file by its name, and a second file of that name
    # (tests/variants/test_x.py beside tests/study/test_x.py) is an error at collection, on a clean clone only
    tests = Path(__file__).parent
    names = [path.name for path in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted({name for name in names if names.count(name) > 1})
