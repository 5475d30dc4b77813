"""Inductor's configuration beyond the mode's: what each name sets, patched for a compilation only, refused
where this torch lacks it, and how a grid and a record name it."""

import pytest
import torch

from bench_utils.variants import inductor_config
from bench_utils.vocabulary import INDUCTOR_OPTIONS, InductorConfig


def test_each_configuration_sets_its_options_for_the_block_only():
    from torch._inductor import config
    before = (config.freezing, config.layout_optimization)
    with inductor_config.inductor_configuration("freezing") as options:
        assert options == {"freezing": True} and config.freezing is True
    with inductor_config.inductor_configuration("no-layout-optimization") as options:
        assert options == {"layout_optimization": False} and config.layout_optimization is False
    with inductor_config.inductor_configuration("default") as options:
        assert options == {}
    assert (config.freezing, config.layout_optimization) == before


def test_an_option_this_torch_lacks_is_a_clear_error_not_a_silent_no_op(monkeypatch):
    # an older torch without an option: the configuration names one this config module does not have
    monkeypatch.setitem(INDUCTOR_OPTIONS, InductorConfig.FREEZING, {"freezing_that_no_torch_has": True})
    import re
    expected = f"needs torch._inductor.config.freezing_that_no_torch_has, which torch {torch.__version__} does not have"
    with pytest.raises(ValueError, match=re.escape(expected)):
        inductor_config.options_of("freezing")
    with pytest.raises(ValueError, match="unknown inductor configuration 'constant-folding'"):
        inductor_config.options_of("constant-folding")


def test_every_name_has_its_options_and_the_installed_torch_has_them():
    from torch._inductor import config
    assert set(INDUCTOR_OPTIONS) == set(InductorConfig)
    for options in INDUCTOR_OPTIONS.values():
        assert all(hasattr(config, option) for option in options)


def test_a_grid_axis_of_configurations_keeps_eager_as_it_is_and_needs_inductor():
    from bench_utils.study.grid.grid_file import GridError, parse_grid
    grid = parse_grid({"study": "s", "grids": [{"models": ["resnet"], "batch_sizes": [1],
                                                 "compile_modes": ["eager", "default"],
                                                 "inductor_configs": ["default", "freezing"]}]})
    configs = sorted((cell.compile_mode, cell.settings.inductor) for cell in grid.cells)
    # eager compiles nothing: one cell whatever the configuration
    assert configs == [("default", "default"), ("default", "freezing"), ("eager", "default")]
    freezing = next(cell for cell in grid.cells if cell.settings.inductor == "freezing")
    assert freezing.cell_id.endswith("default__freezing__float32__cpu")
    with pytest.raises(GridError, match="inductor_configs: .*constant-folding"):
        parse_grid({"study": "s", "grids": [{"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["default"],
                                             "inductor_configs": ["constant-folding"]}]})
    with pytest.raises(GridError, match="Inductor's options need the inductor backend, not 'aot_eager'"):
        parse_grid({"study": "s", "backend": "aot_eager", "grids": [
            {"models": ["resnet"], "batch_sizes": [1], "compile_modes": ["default"], "inductor_configs": ["freezing"]}]})
