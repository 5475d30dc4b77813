"""A study folder's grid against its records: the cells measured, per environment, eager cells from pairs too."""

import json

from bench_utils.study.runner.coverage import grid_coverage
from bench_utils.study.runner.grid_runner import Runner
from bench_utils.study.grid.grid_file import parse_grid
from fake_notebook import FakeNotebook

GRID = """study: g
runs: 3
warmup: 1
blocks: 1
grids:
  - models: [resnet]
    batch_sizes: [1, 4]
    compile_modes: [eager, default]
"""


def test_every_cell_of_the_grid_with_a_record_here_counts_whatever_its_study_name(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID)
    assert grid_coverage(tmp_path) == []  # no records yet
    grid = parse_grid({"study": "another-name", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager", "default"]}]})
    Runner(grid, tmp_path, executor=FakeNotebook()).run()
    [found] = grid_coverage(tmp_path)
    assert (found["grid"], found["cells"], found["measured"], found["from_pairs"]) == ("g", 4, 2, 0)


def test_an_eager_cell_its_compiled_cells_pairs_measured_counts_and_is_said_so(tmp_path):
    from bench_utils import compare
    from bench_utils.study.cell.cell_record import speedup_block

    (tmp_path / "grid.yaml").write_text(GRID)
    grid = parse_grid({"study": "g", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
        {"models": ["resnet"], "batch_sizes": [1, 4], "compile_modes": ["default"]}]})
    Runner(grid, tmp_path, executor=FakeNotebook()).run()
    lines = []
    for line in (tmp_path / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        record["speedup"] = speedup_block(compare(lambda: None, lambda: None, warmup=1, runs=3, blocks=1, device="cpu"))
        record["latency"]["warmup"] = record["config"]["warmup"]
        lines.append(json.dumps(record))
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n")
    [found] = grid_coverage(tmp_path)
    assert (found["cells"], found["measured"], found["from_pairs"]) == (4, 4, 2)


def test_the_grids_models_with_no_cell_measured_are_named(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID.replace("models: [resnet]", "models: [resnet, vit, mobilenet]"))
    grid = parse_grid({"study": "g", "runs": 3, "warmup": 1, "blocks": 1, "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]}]})
    Runner(grid, tmp_path, executor=FakeNotebook()).run()
    [found] = grid_coverage(tmp_path)
    assert (found["cells"], found["measured"]) == (12, 1)
    assert found["unmeasured_models"] == ["mobilenet", "vit"]  # resnet, measured at one cell of four, is not


def test_a_cell_in_replicates_counts_once_measured_where_any_replicate_is(tmp_path):
    from bench_utils.records.key import cell_identity
    from sample_records import R, ok_record

    (tmp_path / "grid.yaml").write_text(
        "study: s\nreplicates: 2\ngrids:\n  - models: [resnet]\n    batch_sizes: [1, 4]\n    compile_modes: [eager]\n")
    from bench_utils.records.results_file import append_record

    second = ok_record(study="s", batch_size=4, compile_mode="eager", replicate="r2",
                       environment={"torch_version": "2.15.0", "cpu_model": "EPYC"})
    assert cell_identity(R(second)).without_replicate().variant_fields()["replicate"] == "r1"
    append_record(tmp_path / "results.jsonl", second)
    (coverage,) = grid_coverage(tmp_path)
    assert (coverage["cells"], coverage["measured"]) == (2, 1)
