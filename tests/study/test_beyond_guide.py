"""params/beyond-guide-cpu.yaml end to end: every deployment variant through the grid runner, on
timm's tiny test ResNet, then the report in three locales (minutes: inductor compiles C++ here)."""

import subprocess
import sys

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.records.results_file import read_records
from bench_utils.study.grid.grid_file import load_grid

GRID = PROJECT_ROOT / "params" / "beyond-guide-cpu.yaml"


def test_the_gpu_grid_asks_for_every_variant_on_the_guides_models():
    cells = load_grid(PROJECT_ROOT / "params" / "beyond-guide.yaml").cells
    assert {c.device for c in cells} == {"cuda"} and len(cells) == 108 * 3  # 3 replicates each on a GPU
    assert "aot-inductor" in {c.compile_mode for c in cells}
    assert {c.settings.memory_format for c in cells} == {"contiguous", "channels_last"}
    assert {c.settings.shapes for c in cells} == {"static", "dynamic"} and all(c.settings.portable_cache for c in cells)
    assert {c.batch_size for c in cells if c.settings.shapes == "dynamic"} == {1, 2, 4, 8, 16}


@pytest.mark.slow  # about 3 min: inductor compiles C++ for every variant (make bench runs it)
def test_every_variant_runs_is_recorded_and_reported(tmp_path):
    out = tmp_path / "study"
    run = subprocess.run([sys.executable, "-m", "bench_utils", "run", str(GRID), "--out", str(out)],
                         capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = [record.to_json() for record in read_records(out / "results.jsonl")]  # as the lines hold them
    assert len(records) == len(load_grid(GRID).cells) == 8
    assert all(r["status"] == "ok" for r in records), [r.get("error") for r in records]
    by_variant = {(r["cell"]["compile_mode"], r["cell"]["batch_size"], r["cell"]["memory_format"],
                   r["cell"]["shapes"]): r for r in records}
    compiled = by_variant[("default", 2, "contiguous", "static")]
    fresh = compiled["compile"]["portable_cache"]  # the kernel's own float32 math travelled with it
    assert fresh["fx_graph_cache_hits"] >= 1 and fresh["fx_graph_cache_misses"] == 0
    assert by_variant[("aot-inductor", 2, "contiguous", "static")]["compile"]["aot"]["fresh_process"]
    nhwc = by_variant[("default", 2, "channels_last", "static")]
    assert nhwc["model"]["memory_format"] == "channels_last" and nhwc["parity"]["parity"] == "pass"
    assert "portable_cache" not in nhwc["compile"]  # asked for in the first sub-grid only
    assert ("eager", 2, "channels_last", "static") in by_variant
    one = [by_variant[("default", batch, "contiguous", "dynamic")] for batch in (2, 3, 4)]
    assert [r["compile"]["batch_shapes"]["compiled_at_batch_size"] for r in one] == [2, 2, 2]
    assert all(r["speedup"]["pairs"] == 5 and r["parity"]["parity"] == "pass" for r in one)

    report = subprocess.run([sys.executable, "-m", "bench_utils", "report", str(out), "--locales", "en,ar,es"],
                            capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=900)
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    english = (out / "en" / "README.md").read_text(encoding="utf-8")
    assert "Start-up: time to the first answer" in english and "One compilation for all batch sizes" in english
    assert "test_resnet (channels_last)" in english and "default, one compilation for all batch sizes" in english
    for locale in ("ar", "es"):
        page = (out / locale / "README.md").read_text(encoding="utf-8")
        assert "one compilation" not in page and "test_resnet (channels_last)" in page
