"""Every project file the documentation, the docstrings and the comments name by its path exists."""

from __future__ import annotations

import re

from bench_utils.paths import PROJECT_ROOT

# A path from the project root: a top folder of the project, then a file of a kind the project keeps.
MENTIONED = re.compile(r"(?<![\w./<-])((?:bench_utils|benchmarks|docs|environments|notebooks|params|tests|tools)"
                       r"/[\w./-]*?\.(?:py|md|yaml|jsonl|json|ipynb|txt))(?![\w/])")
# Where the project speaks of itself; tests are left out (they name missing files on purpose).
SOURCES = ["*.md", "Makefile", "pyproject.toml", "docs/**/*.md", "bench_utils/**/*.py", "bench_utils/**/*.md",
           "notebooks/*.py", "notebooks/*.md", "benchmarks/**/*.py", "benchmarks/**/*.md", "tools/*.py"]


def mentioned_paths(text: str) -> list[str]:
    """The project paths ``text`` names; a placeholder (``params/....yaml``) is no path."""
    return [path for path in MENTIONED.findall(text) if ".." not in path]


def test_the_pattern_finds_project_paths_and_passes_over_placeholders():
    text = ("pinned in tests/test_models.py, and `docs/records.md`; see params/....yaml or "
            "reports/x/results.jsonl, bench_utils/report/locales/<locale>.json and docs/records.md.")
    assert mentioned_paths(text) == ["tests/test_models.py", "docs/records.md", "docs/records.md"]


def test_every_path_the_project_names_exists():
    missing = []
    for pattern in SOURCES:
        for source in sorted(PROJECT_ROOT.glob(pattern)):
            text = source.read_text(encoding="utf-8")
            missing += [f"{source.relative_to(PROJECT_ROOT)}: {path}" for path in mentioned_paths(text)
                        if not (PROJECT_ROOT / path).exists()]
    assert not missing, missing
