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


def test_unknown_shapes_are_refused():
    with pytest.raises(ValueError, match="Valid: static, dynamic"):
        check_shapes("ragged")
