"""diagnose: the slow cells of a study folder, the grid of their remedies, and its run through the runner."""

import json
import shutil

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.study.grid.grid_file import parse_grid
from bench_utils.study.runner import diagnose as diagnosis
from sample_records import Rs

H200 = PROJECT_ROOT / "reports" / "hf-guide-h200"


def records():
    return [json.loads(line) for line in (H200 / "results.jsonl").read_text().splitlines()]


def test_the_slow_cells_of_the_h200_study_as_its_page_shows_them_and_their_remedies_grid():
    # ViT at batch 1 was measured again on the fourth lease (100-run replicates): that record is the cell's now
    slow = diagnosis.slow_cells(Rs(records()))
    assert sorted((r.cell.model, r.cell.batch_size) for r in slow) == [("mobilenet", 16), ("vit", 1)]
    assert {r.cell.model: r.config.runs for r in slow} == {"vit": 100, "mobilenet": 300}
    data, lines = diagnosis.remedy_grid(Rs(slow))
    grid = parse_grid(data)  # a valid grid: the runner takes it as any
    assert grid.study == "hf-guide-diagnosis" and grid.device_kinds == ["cuda"]
    assert {(c.model, c.batch_size, c.compile_mode, c.settings.memory_format, c.settings.inductor) for c in grid.cells} \
        == {("vit", 1, "reduce-overhead", "contiguous", "default"), ("vit", 1, "default", "contiguous", "freezing"),
            ("vit", 1, "max-autotune-no-cudagraphs", "contiguous", "default"),
            ("mobilenet", 16, "default", "contiguous", "no-layout-optimization"),
            ("mobilenet", 16, "default", "channels_last", "default"),
            ("mobilenet", 16, "max-autotune-no-cudagraphs", "contiguous", "default")}
    # the settings of the slow cell measured last (ViT's, on the fourth lease): 100 runs in 10 pairs of blocks
    cell = grid.cells[0]
    assert (cell.settings.runs, cell.settings.warmup, cell.settings.blocks) == (100, 10, 10)
    assert any(line.startswith("vit batch 1 default on cuda: speed-up 0.77x; rules: host-bound, fusion-costly")
               for line in lines)


def test_a_dry_run_plans_the_remedies_writes_nothing_and_a_study_with_no_slow_cell_has_nothing_to_do(tmp_path,
                                                                                                     capsys):
    study = tmp_path / "study"
    shutil.copytree(H200, study, ignore=shutil.ignore_patterns("en", "ar", "es", "notebooks", "logs", "lease-*"))
    before = sorted(path.name for path in study.iterdir())
    said = []
    assert diagnosis.diagnose(study, dry_run=True, device_model="H200", say=said.append) == 0
    assert sorted(path.name for path in study.iterdir()) == before  # no diagnosis.yaml: nothing ran
    planned = capsys.readouterr().out
    assert "the remedies' grid of" in planned and "diagnosis.yaml" not in planned  # names no file it did not write
    assert said[0].startswith("[diagnose] 2 compiled cell(s)")
    fast = tmp_path / "fast"
    fast.mkdir()
    (fast / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()
                                                if r["cell"]["model"] == "resnet"))
    said = []
    assert diagnosis.diagnose(fast, say=said.append) == 0 and "nothing to diagnose" in said[0]
    with pytest.raises(ValueError, match="holds no results.jsonl"):
        diagnosis.diagnose(tmp_path / "nothing")


def test_a_remedy_that_loses_is_not_diagnosed_again():
    measured = records()
    vit = next(r for r in measured if r["cell"]["model"] == "vit" and r["cell"]["batch_size"] == 1
               and r["cell"]["compile_mode"] == "default")
    lost = json.loads(json.dumps(vit))
    lost["cell"].update(study="hf-guide-h200-first-diagnosis", compile_mode="max-autotune-no-cudagraphs")
    lost["record_id"] = "remedy"
    assert [r.cell.compile_mode for r in diagnosis.slow_cells(Rs(measured + [lost]))] == ["default", "default"]


def test_a_study_compiled_with_another_backend_measures_only_the_remedies_that_backend_can():
    # the mobilenet batch-16 cell's profile fires matmul-conv-up: under aot_eager only channels_last can be measured
    mobilenet = next(r for r in records() if r["cell"]["model"] == "mobilenet" and r["cell"]["batch_size"] == 16
                     and r["cell"]["compile_mode"] == "default")
    other = json.loads(json.dumps(mobilenet))
    other["config"]["backend"] = "aot_eager"
    data, [line] = diagnosis.remedy_grid(Rs([other]))
    grid = parse_grid(data)  # the grid the backend takes: no Inductor option, no other mode
    assert {(c.compile_mode, c.settings.memory_format, c.settings.inductor) for c in grid.cells} == {
        ("default", "channels_last", "default")}
    assert line.endswith("remedies: default+channels_last; left out, needing the inductor backend (this study's is "
                         "aot_eager): default+no-layout-optimization, max-autotune-no-cudagraphs")


def test_a_records_control_characters_never_reach_the_terminal():
    vit = next(r for r in records() if r["cell"]["model"] == "vit" and r["cell"]["compile_mode"] == "default")
    hostile = json.loads(json.dumps(vit))
    hostile["cell"]["model"] = "vit\x1b[2J\x1b]0;owned\x07"
    _, [line] = diagnosis.remedy_grid(Rs([hostile]))
    assert line.startswith("vit?[2J?]0;owned? batch 1") and all(char.isprintable() for char in line)


@pytest.mark.slow
def test_a_cpu_study_where_compile_loses_is_diagnosed_end_to_end_and_its_section_rendered(tmp_path):
    # make bench (about 3 minutes on 2 cores): params/cpu-loses.yaml, its slow cell's remedies, the report
    import subprocess
    import sys

    study = tmp_path / "cpu-loses"

    def command(*args):
        return subprocess.run([sys.executable, "-m", "bench_utils", *args], capture_output=True, text=True,
                              cwd=PROJECT_ROOT, timeout=1800)

    assert command("run", "params/cpu-loses.yaml", "--out", str(study)).returncode == 0
    slow = diagnosis.slow_cells(diagnosis.read_records([study / "results.jsonl"]))
    done = command("diagnose", str(study))
    assert done.returncode == 0, done.stderr[-2000:]
    if not slow:  # compile won on this machine: nothing to diagnose, and the run says so
        assert "nothing to diagnose" in done.stderr
        return
    assert (study / "diagnosis.yaml").is_file() and "rules:" in done.stderr
    remedies = [r for r in diagnosis.read_records([study / "results.jsonl"]) if r.cell.study.endswith("-diagnosis")]
    assert remedies and all(r.status == "ok" for r in remedies)
    assert command("report", str(study), "--locales", "en").returncode == 0
    page = (study / "en" / "README.md").read_text(encoding="utf-8")
    section = page[page.index("## When compile loses"):]
    assert "### timm:convnext_atto, batch size 1, default" in section
    assert any(words in section for words in ("recovers it", "Inconclusive", "stay eager"))
