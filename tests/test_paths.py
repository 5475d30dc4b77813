"""Published text names no absolute path of this machine: the project, the home folder, the packages' folder."""

import sysconfig
from pathlib import Path

from bench_utils.paths import PROJECT_ROOT, scrub


def test_the_project_home_and_site_packages_are_named_by_what_they_are():
    site = sysconfig.get_paths()["purelib"]
    text = (f"{site}/torch/_inductor/compile_fx.py:322: UserWarning\n"
            f"{PROJECT_ROOT}/reports/x/results.jsonl\n{Path.home()}/.cache/y\n")
    assert scrub(text) == ("<site-packages>/torch/_inductor/compile_fx.py:322: UserWarning\n"
                           "<project>/reports/x/results.jsonl\n~/.cache/y\n")
    assert scrub("/tmp/study/a", {"/tmp/study": "<study>"}) == "<study>/a"
