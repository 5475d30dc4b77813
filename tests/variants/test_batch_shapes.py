import pytest
import torch

from bench_utils.variants.batch_shapes import DYNAMIC, SharedCompilation, check_shapes, mark_batch_dynamic


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
                                                  "recompiles_at_this_batch_size": 1}


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
