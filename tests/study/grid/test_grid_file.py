from dataclasses import fields

import pytest

from bench_utils.records.schema import CELL_FIELDS
from bench_utils.study.grid.grid_file import GRID_COPY, Cell, GridError, keep_grid_copy, load_grid, parse_grid
from bench_utils.study.grid.kernel_groups import kernel_groups

BASE = """study: t
runs: 5
grids:
  - models: [resnet, detr]
    batch_sizes: [4, 1]
    compile_modes: [eager, default]
"""


def write(tmp_path, text):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


def test_expansion_orders_cells_and_fills_defaults(tmp_path):
    grid = load_grid(write(tmp_path, BASE))
    assert grid.study == "t" and grid.device_kinds == ["cpu"]
    assert len(grid.cells) == 2 * 2 * 2
    first = grid.cells[0]
    assert (first.model, first.compile_mode, first.batch_size, first.dtype) == ("resnet", "eager", 1, "float32")
    assert first.task == "image-classification" and grid.cells[-1].task == "object-detection"
    assert first.settings.runs == 5 and first.settings.warmup == 10 and first.settings.weights == "random" and first.device == "cpu"
    assert first.notebook == "classification.ipynb"
    assert first.cell_id == "image-classification__resnet__bs1__eager__float32__cpu"


def test_repo_grids_are_valid():
    guide = load_grid("params/hf-guide.yaml")
    # on a GPU each cell is 3 replicates (fresh kernels), staggered (``replicated``): a kernel's second replicate
    # after the next kernel's first, its third after the first of the kernel three on
    assert len(guide.cells) == (12 * 3 * 2 + 4 * 2) * 3
    order = [f"{group.first.settings.replicate} {group.first.model}" for group in kernel_groups(guide.cells)]
    assert order[:9] == ["r1 vit", "r1 beit", "r2 vit", "r1 convnext", "r2 beit", "r1 resnet", "r3 vit",
                         "r2 convnext", "r1 segformer"]
    assert len(order) == 36 and order[-1] == "r3 conditional-detr"
    for model in {c.model for c in guide.cells}:  # each kernel's replicates in turn, another kernel between
        where = [order.index(f"r{i} {model}") for i in (1, 2, 3)]
        assert where[0] + 1 < where[1] and where[1] + 1 < where[2], (model, where)
    assert {c.compile_mode for c in guide.cells} == {"eager", "default", "reduce-overhead"}
    # the guide ran PyTorch's defaults (cuDNN TF32 on, matmul TF32 off), 300 runs: 30 pairs of 10 runs, here
    # 10 pairs of 10 in each of the 3 replicates
    assert all(c.settings.runs == 100 and c.dtype == "float32" and c.settings.tf32 == "default" and c.settings.blocks == 10
               and c.settings.replicates == 3 for c in guide.cells)
    quick = load_grid("params/cpu-quick.yaml")
    assert {c.task for c in quick.cells} == {"image-classification", "image-segmentation", "object-detection"}
    assert {c.compile_mode for c in quick.cells} == {"eager", "default", "reduce-overhead"}  # a row of two modes
    # every cell in 3 replicates, so that make report's intervals include the spread between runs
    assert {c.settings.replicates for c in quick.cells} == {3} and len(quick.cells) == 7 * 3
    assert load_grid("params/smoke.yaml").cells
    fleet = load_grid("params/hf-guide-fleet.yaml")  # the guide's grid on three kinds of a cluster
    assert fleet.accelerators == ["H100", "A100", "L4"] and [
        (c.model, c.batch_size, c.compile_mode) for c in fleet.cells] == [
        (c.model, c.batch_size, c.compile_mode) for c in guide.cells]
    assert load_grid("params/hf-guide.yaml").accelerators == []


@pytest.mark.parametrize("value, message", [
    ([], "accelerators: must not be empty"),
    (["H100", "H100"], "accelerators: H100 is listed twice$"),  # no reason of the devices' own
    (["H 100"], "accelerators: 'H 100' is not an accelerator type name"),
    ("H100", "accelerators: must be a list"),
])
def test_accelerator_types_are_checked(value, message):
    data = {"study": "x", "accelerators": value,
            "grids": [{"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]}]}
    with pytest.raises(GridError, match=message):
        parse_grid(data)


def test_overlapping_subgrids_give_each_cell_once_and_overrides_apply():
    grid = parse_grid({"study": "t", "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]},
        {"models": ["resnet"], "batch_sizes": [1, 2], "compile_modes": ["eager"], "runs": 7}]})
    assert [(c.batch_size, c.settings.runs) for c in grid.cells] == [(1, 300), (2, 7)]


@pytest.mark.parametrize("value, policy", [(None, "default"), ("strict", "strict"), ("on", "on"),
                                           (False, "strict"), (True, "on")])
def test_tf32_policy_defaults_to_pytorchs_and_reads_the_former_booleans(value, policy):
    data = {"study": "t", "grids": [{"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]}]}
    if value is not None:
        data["tf32"] = value
    assert {c.settings.tf32 for c in parse_grid(data).cells} == {policy}


def test_devices_pin_workers():
    grid = parse_grid({"study": "t", "devices": ["cuda:0", "cuda:1"], "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]}]})
    assert grid.device_kinds == ["cuda"] and grid.workers("cuda") == ["cuda:0", "cuda:1"]
    assert grid.cells[0].device == "cuda"
    assert parse_grid({"study": "t", "devices": ["cuda"], "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]}]}).workers("cuda") == ["cuda:0"]


@pytest.mark.parametrize("text, message", [
    (BASE.replace("runs: 5", "rnus: 5"), "grid.yaml: rnus: unknown key (did you mean 'runs'?)"),
    (BASE.replace("batch_sizes:", "batch_size:"), "grid.yaml: grids[0].batch_size: unknown key (did you mean 'batch_sizes'?)"),
    (BASE.replace("runs: 5", "runs: five"), "grid.yaml: runs: must be an integer, got 'five'"),
    (BASE.replace("runs: 5", "runs: 0"), "grid.yaml: runs: must be >= 1, got 0"),
    (BASE.replace("[resnet, detr]", "[resnet, vitt]"), "grid.yaml: grids[0].models: unknown model 'vitt'. Did you mean 'vit'?"),
    (BASE.replace("[eager, default]", "[eager, fast]"), "grid.yaml: grids[0].compile_modes: unknown compile mode 'fast'"),
    (BASE + "    dtypes: [fp8]\n", "grid.yaml: grids[0].dtypes: unknown dtype 'fp8'"),
    (BASE.replace("[4, 1]", "[]"), "grid.yaml: grids[0].batch_sizes: must not be empty"),
    (BASE.replace("[4, 1]", "[4, 0]"), "grid.yaml: grids[0].batch_sizes: must be positive integers, got 0"),
    (BASE.replace("[4, 1]", "4"), "grid.yaml: grids[0].batch_sizes: must be a list, got 4"),
    (BASE.replace("study: t", "study: 12"), "grid.yaml: study: must be str, got 12"),
    (BASE.replace("study: t\n", ""), "grid.yaml: study: is required"),
    (BASE + "devices: [tpu]\n", "grid.yaml: devices: unknown device 'tpu'"),
    (BASE + "devices: [cuda:0, cuda:0]\n", "grid.yaml: devices: cuda:0 is listed twice: one worker per device"),
    (BASE + "devices: [cpu, 3]\n", "grid.yaml: devices: unknown device 3: use cpu, cuda or cuda:N"),
    (BASE + "weights: imagenet\n", "grid.yaml: weights: unknown weights 'imagenet'"),
    (BASE + "tf32: fast\n", "grid.yaml: tf32: unknown tf32 policy 'fast'"),
    (BASE.replace("runs: 5", "runs: 5\nblocks: 9"), "grid.yaml: grids[0].blocks: must not exceed runs (5), got 9"),
    (BASE.replace("[resnet, detr]", "[org/other-model]"), "grid.yaml: grids[0].task: model 'org/other-model' is not in the registry"),
    ("study: t\ngrids: [\n", "grid.yaml: line 3: not valid YAML"),
    ("- just\n- a list\n", "grid.yaml: the grid file must be a mapping"),
    ("study: t\ngrids: []\n", "grid.yaml: grids: must not be empty"),
    (BASE.replace("runs: 5", "runs: 5\nruns: 50"), "grid.yaml: line 3: key 'runs' is given twice (first on line 2)"),
    (BASE + "    task: object-detection\n",
     "grid.yaml: grids[0].task: 'resnet' is an image-classification model: the sub-grid's task (object-detection)"),
    (BASE.replace("[resnet, detr]", "[timm:resnet181]"), "grid.yaml: grids[0].models: unknown timm model 'resnet181'. Did you mean"),
    (BASE.replace("study: t", "study: " + "s" * 300), "grid.yaml: study: must be a file-name-safe name of at most 100 "
                                                       "characters (letters, digits, '.', '_', '-'), got 'sssss"),
])
def test_each_mistake_is_one_line_naming_file_and_key(tmp_path, text, message):
    with pytest.raises(GridError) as caught:
        load_grid(write(tmp_path, text))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def laughs(levels: int) -> str:
    """A "billion laughs" value: each anchor the one before and nine aliases of it, ten strings at the bottom."""
    if levels == 0:
        return "&l0 [" + ", ".join(["xxxxxxxxxx"] * 10) + "]"
    return f"&l{levels} [{laughs(levels - 1)}, " + ", ".join([f"*l{levels - 1}"] * 9) + "]"


def test_a_value_aliases_blow_up_is_quoted_short_and_a_document_too_big_is_refused_before_it_is_built(tmp_path):
    import time

    with pytest.raises(GridError) as caught:
        load_grid(write(tmp_path, BASE.replace("study: t\n", f"study: t\ndescription: {laughs(3)}\n")))
    assert "description: must be str, got [[[...], [...], [...], [...], ...]" in str(caught.value)
    assert len(str(caught.value)) < len(str(tmp_path)) + 250
    started = time.monotonic()
    with pytest.raises(GridError, match="its aliases expand to more than 100,000 values: not a grid"):
        load_grid(write(tmp_path, BASE.replace("study: t\n", f"study: t\ndescription: {laughs(9)}\n")))  # 10^10
    assert time.monotonic() - started < 5


def test_aliases_of_a_grids_own_size_are_read():
    text = BASE + "  - &more\n    models: [vit]\n    batch_sizes: [1]\n    compile_modes: [eager]\n  - *more\n"
    import yaml
    assert len(parse_grid(yaml.safe_load(text)).cells) == 9


def test_a_grid_cell_is_a_records_cell_identity_then_its_settings():
    assert [item.name for item in fields(Cell)] == [*CELL_FIELDS, "settings"]
    cell = parse_grid({"study": "t", "grids": [{"models": ["resnet"], "batch_sizes": [2],
                                                "compile_modes": ["default"], "shapes": ["dynamic"]}]}).cells[0]
    assert Cell.from_parameters(cell.to_parameters()) == cell
    assert cell.identity().cell_block() == {**{name: getattr(cell, name) for name in CELL_FIELDS},
                                            "memory_format": "contiguous", "shapes": "dynamic", "inductor": "default",
                                            "replicate": "r1"}


def test_a_grid_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BASE.replace("study: t", "study: t\ndescription: caf\xe9").encode("latin-1"))
    with pytest.raises(GridError) as caught:
        load_grid(path)
    assert str(caught.value).startswith(f"{path}: not UTF-8 text")


def test_missing_file(tmp_path):
    with pytest.raises(GridError, match="cannot read the grid file"):
        load_grid(tmp_path / "nope.yaml")


def test_task_can_be_given_for_other_checkpoints():
    grid = parse_grid({"study": "t", "grids": [{"models": ["org/model"], "task": "object-detection",
                                                "batch_sizes": [1], "compile_modes": ["eager"]}]})
    assert grid.cells[0].task == "object-detection" and grid.cells[0].notebook == "detection.ipynb"


VARIANTS = """study: v
runs: 5
grids:
  - models: [resnet]
    batch_sizes: [1, 4]
    compile_modes: [eager, default]
    memory_formats: [contiguous, channels_last]
    shapes: [static, dynamic]
"""


def test_memory_formats_and_shapes_expand_and_eager_is_always_static(tmp_path):
    cells = load_grid(write(tmp_path, VARIANTS)).cells
    variants = {(c.compile_mode, c.settings.memory_format, c.settings.shapes) for c in cells}
    assert variants == {("eager", "contiguous", "static"), ("eager", "channels_last", "static"),
                        ("default", "contiguous", "static"), ("default", "channels_last", "static"),
                        ("default", "contiguous", "dynamic"), ("default", "channels_last", "dynamic")}
    assert len(cells) == len(variants) * 2  # eager once per memory format, not once per shapes
    ids = {c.cell_id for c in cells}
    assert len(ids) == len(cells)
    assert "image-classification__resnet__bs4__default__channels_last__dynamic__float32__cpu" in ids
    # the guide's cells keep the ids they had before variants existed
    assert "image-classification__resnet__bs1__default__float32__cpu" in ids


@pytest.mark.parametrize("change, message", [
    ("    memory_formats: [nhwc]\n", r"grids\[0\]\.memory_formats: unknown memory format 'nhwc'"),
    ("    shapes: [dinamic]\n", "Did you mean 'dynamic'"),
    ("    memory_formats: []\n", r"grids\[0\]\.memory_formats: must not be empty"),
])
def test_bad_variant_values_are_refused_naming_the_key(tmp_path, change, message):
    with pytest.raises(GridError, match=message):
        load_grid(write(tmp_path, BASE + change))


def test_dynamic_shapes_refuse_aot_inductor_and_a_static_compile_setting(tmp_path):
    aot = BASE.replace("[eager, default]", "[eager, aot-inductor]") + "    shapes: [dynamic]\n"
    with pytest.raises(GridError, match="aot-inductor packages are exported at fixed shapes"):
        load_grid(write(tmp_path, aot))
    with pytest.raises(GridError, match="sets dynamic: false"):
        load_grid(write(tmp_path, "dynamic: false\n" + BASE + "    shapes: [dynamic]\n"))


def test_a_gpu_memory_cap_applies_to_the_cuda_cells_only():
    grid = parse_grid({"study": "s", "devices": ["cpu", "cuda"], "gpu_memory_gib": 16, "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["eager"]}]})
    assert {(cell.device, cell.settings.gpu_memory_gib) for cell in grid.cells} == {("cpu", None), ("cuda", 16)}
    assert parse_grid({"study": "s", "grids": [{"models": ["resnet"], "batch_sizes": [1], "compile_modes": [
        "eager"]}]}).cells[0].settings.gpu_memory_gib is None


@pytest.mark.parametrize("extra, message", [
    ({"devices": ["cuda"], "gpu_memory_gib": 0}, "gpu_memory_gib: must be a positive number of GiB"),
    ({"devices": ["cuda"], "gpu_memory_gib": True}, "gpu_memory_gib"),
    ({"devices": ["cuda"], "gpu_memory_gib": "16GB"}, "gpu_memory_gib"),
    ({"devices": ["cpu"], "gpu_memory_gib": 16}, "gpu_memory_gib: caps a GPU's memory, but the grid has no CUDA"),
])
def test_a_bad_gpu_memory_cap_is_refused(extra, message):
    with pytest.raises(GridError, match=message):
        parse_grid({"study": "s", **extra, "grids": [{"models": ["resnet"], "batch_sizes": [1],
                                                        "compile_modes": ["eager"]}]})


def test_a_study_folder_keeps_the_grid_it_was_last_run_from(tmp_path):
    grid = tmp_path / "mine.yaml"
    grid.write_text("study: s\n# first\n")
    copy = keep_grid_copy(grid, tmp_path / "reports" / "s")
    assert copy == tmp_path / "reports" / "s" / GRID_COPY and copy.read_text() == grid.read_text()
    assert keep_grid_copy(grid, copy.parent).read_text() == grid.read_text()  # the same grid: nothing more
    assert [path.name for path in copy.parent.iterdir()] == [GRID_COPY]  # no temporary file left
    grid.write_text("study: s\n# changed\n")
    assert keep_grid_copy(grid, copy.parent).read_text() == "study: s\n# changed\n"
    assert keep_grid_copy(copy, copy.parent).read_text() == "study: s\n# changed\n"  # re-run from its own copy
    # the grid the earlier records were measured with is kept beside the new one, never written over
    import hashlib
    earlier = f"grid.{hashlib.sha256(b'study: s' + chr(10).encode() + b'# first' + chr(10).encode()).hexdigest()[:8]}.yaml"
    assert sorted(path.name for path in copy.parent.iterdir()) == sorted([GRID_COPY, earlier])
    assert (copy.parent / earlier).read_text() == "study: s\n# first\n"


def test_a_setting_given_on_the_command_line_reaches_every_cell_and_keeps_their_identity():
    grid = parse_grid({"study": "s", "devices": ["cpu"], "grids": [{"models": ["resnet"], "batch_sizes": [1, 2],
                                                                   "compile_modes": ["eager", "default"]}]})
    traced = grid.with_settings(keep_traces=True)
    assert all(cell.settings.keep_traces for cell in traced.cells) and not any(c.settings.keep_traces for c in grid.cells)
    assert [cell.identity() for cell in traced.cells] == [cell.identity() for cell in grid.cells]
    assert [cell.cell_id for cell in traced.cells] == [cell.cell_id for cell in grid.cells]
    with pytest.raises(ValueError, match="keep_traces: must be true or false"):
        grid.with_settings(keep_traces="yes")


def test_replicates_split_a_cells_runs_and_pairs_and_a_cpu_measures_once_unless_told():
    grid = {"study": "s", "runs": 300, "grids": [{"models": ["resnet"], "batch_sizes": [1],
                                                   "compile_modes": ["default"]}]}
    (cpu,) = parse_grid(grid).cells
    assert cpu.settings.replicates is None and cpu.settings.runs == 300 and cpu.settings.blocks == 30
    twice = parse_grid({**grid, "replicates": 2}).cells
    assert [(c.settings.replicate, c.settings.runs, c.settings.blocks) for c in twice] == [("r1", 150, 15),
                                                                                           ("r2", 150, 15)]
    assert twice[1].cell_id == "image-classification__resnet__bs1__default__r2__float32__cpu"
    assert len({c.identity() for c in twice}) == 2 and len(kernel_groups(twice)) == 2  # a fresh kernel each
    gpu = parse_grid({**grid, "devices": ["cuda"], "replicates": 1}).cells
    assert len(gpu) == 1 and gpu[0].settings.replicates is None  # told once: as a cell measured once
    with pytest.raises(GridError, match=r"blocks: 3 replicates \(the default on a GPU; replicates: 1 measures"):
        parse_grid({**grid, "devices": ["cuda"], "runs": 2})
    with pytest.raises(GridError, match="replicates: must be an integer from 1 to 9"):
        parse_grid({**grid, "replicates": 10})
