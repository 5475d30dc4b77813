from dataclasses import fields, replace

import pytest

from bench_utils.records.key import COMPILE_SETTINGS, OPTIONAL_SETTINGS, SETTINGS_KEYS, VARIANT_FIELDS
from bench_utils.records.build import measurement_settings
from bench_utils.settings import ANYWHERE, AXIS, TOP, Settings
from bench_utils.study.grid.grid_file import GRID_KEYS, TOP_LEVEL, parse_grid


def test_every_setting_has_help_a_check_and_a_place():
    for item in fields(Settings):
        assert item.metadata["help"] and callable(item.metadata["check"]), item.name
        assert (item.metadata["grid"] == AXIS) == bool(item.metadata["plural"]), item.name
        assert item.metadata["check"](item.default) == item.default  # the default passes its own check


def test_settings_from_parameters_are_checked_and_unknown_names_refused():
    assert Settings.from_parameters({"tf32": True, "runs": 5}) == Settings(tf32="on", runs=5)
    with pytest.raises(ValueError, match="runs: must be >= 1, got 0"):
        Settings.from_parameters({"runs": 0})
    with pytest.raises(ValueError, match="shapes: unknown shapes 'dinamic'. Did you mean 'dynamic'"):
        Settings.from_parameters({"shapes": "dinamic"})
    with pytest.raises(TypeError, match="unknown setting rnus: the settings are runs, warmup"):
        Settings.from_parameters({"rnus": 5})


def test_a_cells_variant_is_its_identity_settings_by_name_as_a_record_keys_them():
    settings = Settings(shapes="dynamic", runs=7)
    assert settings.variant_fields() == {"memory_format": "contiguous", "shapes": "dynamic", "inductor": "default",
                                       "replicate": "r1"}
    assert list(settings.variant_fields()) == list(VARIANT_FIELDS)
    assert settings.variant_values() == ("contiguous", "dynamic", "default", "r1") and settings.variant() == ("dynamic",)
    assert Settings(replicate="r2").variant() == ("r2",)  # a later replicate: a kernel and a name of its own


def test_blocks_default_to_thirty_or_runs_where_fewer():
    assert Settings().with_blocks().blocks == 30 and Settings(runs=7).with_blocks().blocks == 7
    assert Settings(runs=7, blocks=3).with_blocks().blocks == 3


def test_the_records_config_and_hash_keys_are_the_settings_as_before():
    # the keys of every record written so far: a change here would make every earlier cell another cell
    assert sorted(SETTINGS_KEYS) == sorted(["runs", "warmup", "blocks", "weights_requested", "seed", "tf32",
                                            "backend", "fullgraph", "dynamic", "sync"])
    # replicates: hashed where given, so that a cell measured once keeps its hash
    assert COMPILE_SETTINGS == ("backend", "fullgraph", "dynamic") and OPTIONAL_SETTINGS == ("replicates", "gpu_memory_gib")
    assert list(VARIANT_FIELDS) == ["memory_format", "shapes", "inductor", "replicate"]
    config = measurement_settings(Settings(weights="auto", gpu_memory_gib=16, sync="pipelined"))
    assert config["weights_requested"] == "auto" and config["gpu_memory_gib"] == 16 and "portable_cache" not in config
    assert config["sync"] == "pipelined"


def test_a_grid_takes_each_setting_where_its_field_says():
    assert {"runs", "warmup", "blocks", "portable_cache"} <= set(GRID_KEYS) - {"memory_formats", "shapes"}
    assert {"memory_formats", "shapes"} <= set(GRID_KEYS) and "memory_format" not in GRID_KEYS
    assert {item.name for item in fields(Settings) if item.metadata["grid"] in (TOP, ANYWHERE)} <= set(TOP_LEVEL)
    not_in_grids = {item.name for item in fields(Settings) if item.metadata["grid"] is None}
    assert not not_in_grids & (set(TOP_LEVEL) | set(GRID_KEYS))
    grid = parse_grid({"study": "s", "seed": 3, "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["default"], "runs": 8,
         "memory_formats": ["contiguous", "channels_last"]}]})
    assert [(c.settings.seed, c.settings.runs, c.settings.blocks, c.settings.memory_format) for c in grid.cells] == [
        (3, 8, 8, "contiguous"), (3, 8, 8, "channels_last")]


def test_a_cell_travels_as_flat_parameters_and_back():
    cell = parse_grid({"study": "s", "tf32": "on", "grids": [
        {"models": ["resnet"], "batch_sizes": [4], "compile_modes": ["default"], "shapes": ["dynamic"]}]}).cells[0]
    flat = cell.to_parameters()
    assert flat["tf32"] == "on" and flat["shapes"] == "dynamic" and "settings" not in flat
    assert type(cell).from_parameters(flat) == cell


def test_sync_is_a_grid_key_and_a_setting_of_the_record_kernel_and_notebook():
    from bench_utils.records.key import settings_hash
    from bench_utils.study.grid.kernel_groups import kernel_groups

    grid = parse_grid({"study": "s", "devices": ["cuda"], "sync": "pipelined", "replicates": 1, "grids": [
        {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["default"]},
        {"models": ["vit"], "batch_sizes": [1], "compile_modes": ["default"], "sync": "per-call"}]})
    assert [cell.settings.sync for cell in grid.cells] == ["pipelined", "per-call"]
    resnet = grid.cells[0]
    per_call = replace(resnet, settings=replace(resnet.settings, sync="per-call"))
    assert len(kernel_groups([resnet, per_call])) == 2  # a kernel each: the notebook's settings differ
    hashes = {settings_hash(measurement_settings(cell.settings), "default") for cell in (resnet, per_call)}
    assert len(hashes) == 2  # another cell of the record
    with pytest.raises(ValueError, match="sync: unknown sync 'async'"):
        parse_grid({"study": "s", "sync": "async", "grids": [
            {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["default"]}]})
