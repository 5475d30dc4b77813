"""A row's modes compiled one after another, then all callable at once (``variants.row_compilation``)."""

import os

import pytest
import torch

from bench_utils.settings import Settings
from bench_utils.variants import modes
from bench_utils.variants.compile_cost import cache_folder, no_recompile
from bench_utils.variants.row_compilation import RowCompilation


@pytest.fixture
def tagged_modes(monkeypatch):
    """Each mode compiled by a backend of its own that counts the calls of its code: which mode's code runs."""
    from torch._dynamo.backends.debugging import aot_eager

    calls = {}

    def backend_for(mode):
        def backend(graph, example_inputs):
            compiled = aot_eager(graph, example_inputs)

            def run(*args):
                calls[mode] = calls.get(mode, 0) + 1
                return compiled(*args)
            return run
        return backend

    monkeypatch.setattr(modes, "compile_model", lambda model, mode, **options: torch.compile(
        model, backend=backend_for(mode)))
    return calls


def test_every_mode_runs_its_own_code_once_all_are_callable_and_none_recompiles(tagged_modes):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    inputs = {"input": torch.randn(2, 4)}
    row = RowCompilation(("default", "reduce-overhead"), 2, Settings(backend="aot_eager"), torch.device("cpu"))
    with torch.no_grad(), row.around_row():
        compiled = {mode: row.compile(mode, model, inputs, warm=mode == "default") for mode in row.compilations}
        assert row.callable_mode == "reduce-overhead"  # default's compilation went with the second mode's reset
        row.make_callable(model, inputs, compiled)
        assert compiled["default"].timed_again["graphs"] == 1 and compiled["reduce-overhead"].timed_again is None
        tagged_modes.clear()
        with no_recompile():  # the timed runs' guard: a recompile would stop the cell
            for _ in range(3):
                compiled["default"].forward()
                compiled["reduce-overhead"].forward()
    assert tagged_modes == {"default": 3, "reduce-overhead": 3}  # each wrapper its own entry, not the other's
    assert compiled["default"].after_warm == compiled["reduce-overhead"].after_warm


def test_a_mode_compiles_in_its_own_cache_folder_and_the_folders_go_with_the_row(tagged_modes, tmp_path):
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with cache_folder(tmp_path / "a"):
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "a")
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "a" / "triton")
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == before
    row = RowCompilation(("default",), 1, Settings(backend="aot_eager"), torch.device("cpu"))
    with pytest.raises(RuntimeError, match="inside around_row"):
        row.compile("default", torch.nn.Linear(2, 2), {"input": torch.randn(1, 2)}, warm=False)
    with row.around_row():
        root = row._folder("default").parent
        assert root.is_dir()
    assert not root.exists()


def test_a_mode_that_fails_to_compile_leaves_nothing_half_made_for_the_next(monkeypatch):
    from bench_utils.variants import row_compilation
    from bench_utils.variants.compilation import ColdThenWarm

    resets = []
    monkeypatch.setattr(row_compilation.modes, "reset", lambda: resets.append(1))

    def fail(self, model, inputs, *, warm):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(ColdThenWarm, "compile", fail)
    row = RowCompilation(("default",), 1, Settings(backend="aot_eager"), torch.device("cpu"))
    with row.around_row():
        resets.clear()
        with pytest.raises(RuntimeError, match="capture failed"):
            row.compile("default", torch.nn.Linear(2, 2), {"input": torch.randn(1, 2)}, warm=False)
        assert resets == [1] and row.callable_mode is None
