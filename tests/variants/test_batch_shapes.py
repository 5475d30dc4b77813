import pytest
import torch

from bench_utils.settings import Settings
from bench_utils.study.cell.measured_cell import run_cell
from bench_utils.variants.batch_shapes import (DYNAMIC, SharedCompilation, compile_method,
                                               mark_batch_dynamic, one_graph_for_all_batch_sizes)
from bench_utils.vocabulary import check_shapes
from bench_utils.zoo.loading import LoadedModel
from torch_recompiles import frames_recompiled


def _loaded(model, make_inputs):
    return LoadedModel(model=model, key="tiny", label="Tiny", task="image-classification", checkpoint="local/tiny",
                       weights="random", dtype="float32", device="cpu",
                       param_count=sum(p.numel() for p in model.parameters()), make_inputs=make_inputs)


def _dynamic_cells(loaded, batch_sizes):
    """The dynamic cells of one mode, in order, the first compiling and the rest reusing its compilation."""
    results, compilation = [], None
    for batch_size in batch_sizes:
        result = run_cell(loaded, batch_size, "default",
                          Settings(runs=4, warmup=1, blocks=2, backend="aot_eager", shapes="dynamic"),
                          compilation=compilation, warm_compile=False)
        results.append(result)
        compilation = result.compilation
    return results


def test_a_compilation_made_at_batch_one_serves_batch_four_where_torch_keeps_batch_one_symbolic(tiny_vit):
    model, inputs = tiny_vit
    loaded = _loaded(model, lambda b: {"pixel_values": inputs["pixel_values"][:1].repeat(b, 1, 1, 1)})
    # 0 on torch 2.14; torch 2.11 (the GPU image's) guards on batch 1 in scaled_dot_product_attention and
    # compiles again at 4: the record must say what torch did
    recompiles = frames_recompiled(model, loaded.make_inputs, (1, 4))
    at_one, at_four = _dynamic_cells(loaded, [1, 4])
    assert at_one.compile["graphs"] >= 1  # the compilation, at batch 1
    assert at_four.compile["batch_shapes"]["compiled_at_batch_size"] == 1
    assert at_four.compile["batch_shapes"]["recompiles_at_this_batch_size"] == recompiles
    assert at_four.compile["batch_shapes"]["method"] == compile_method() and at_four.parity["parity"] == "pass"


class BatchDependent(torch.nn.Module):
    """A model with a branch on the batch size: dynamo guards on it, so a batch past it recompiles."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, features):
        out = self.linear(features)
        return out * 2 if features.shape[0] > 2 else out


def test_a_batch_size_the_compilation_does_not_serve_recompiles_and_says_so():
    torch.manual_seed(0)
    loaded = _loaded(BatchDependent().eval(), lambda b: {"features": torch.randn(b, 8)})
    at_one, at_two, at_four = _dynamic_cells(loaded, [1, 2, 4])
    assert at_two.compile["batch_shapes"]["recompiles_at_this_batch_size"] == 0
    assert at_four.compile["batch_shapes"]["recompiles_at_this_batch_size"] == 1  # the branch's guard failed
    assert at_four.parity["parity"] == "pass"  # and the new graph computes what eager does


def test_outside_a_dynamic_cell_a_batch_of_one_is_specialized_as_dynamo_does_by_default():
    from torch.fx.experimental import _config

    with one_graph_for_all_batch_sizes(dynamic=False):
        assert not _config.backed_size_oblivious
    with one_graph_for_all_batch_sizes():
        assert _config.backed_size_oblivious
    assert not _config.backed_size_oblivious


def test_the_batch_dimension_of_every_input_is_marked_dynamic_and_nothing_else():
    inputs = {"pixel_values": torch.randn(2, 3, 8, 8), "input_ids": torch.zeros(2, 5, dtype=torch.long),
              "scale": torch.tensor(1.0)}
    assert mark_batch_dynamic(inputs) is inputs
    assert inputs["pixel_values"]._dynamo_dynamic_indices == {0}
    assert inputs["input_ids"]._dynamo_dynamic_indices == {0}
    assert not hasattr(inputs["scale"], "_dynamo_dynamic_indices")  # a 0-d tensor has no batch


def test_a_shared_compilation_says_where_it_was_made_and_what_a_batch_size_recompiled():
    shared = SharedCompilation("default", model=object(), compiled_at_batch_size=2)
    assert shared.describe(2, graphs_here=1)["recompiles_at_this_batch_size"] == 0  # its own compilation
    assert shared.describe(16, graphs_here=1) == {"shapes": DYNAMIC, "compiled_at_batch_size": 2,
                                                  "recompiles_at_this_batch_size": 1, "method": compile_method()}


def test_a_later_batch_size_shows_the_compilations_graphs_and_what_its_first_call_compiled():
    shared = SharedCompilation("default", model=object(), compiled_at_batch_size=1,
                               graphs={"graphs": 3, "graph_breaks": 2, "break_reasons": {"a": 2}})
    first_calls = {"graphs": 1, "graph_breaks": 0, "break_reasons": {}, "frames": 1}
    later = shared.compile_stats(2, first_calls)
    assert (later["graphs"], later["graph_breaks"], later["break_reasons"]) == (3, 2, {"a": 2})
    assert later["batch_shapes"]["recompiles_at_this_batch_size"] == 1 and later["frames"] == 1
    own = shared.compile_stats(1, first_calls)  # the compiling cell: its own figures, no recompile
    assert own["graphs"] == 1 and own["batch_shapes"]["recompiles_at_this_batch_size"] == 0


def test_unknown_shapes_are_refused():
    with pytest.raises(ValueError, match="Valid: static, dynamic"):
        check_shapes("ragged")
