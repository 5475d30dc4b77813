import pytest
import torch

from bench_utils.variants.memory_format import (CHANNELS_LAST, CONTIGUOUS, apply_to_inputs, apply_to_model,
                                                check_memory_format)


def test_images_go_nhwc_and_ids_and_masks_stay_as_they_are():
    inputs = {"pixel_values": torch.randn(2, 3, 8, 8), "pixel_mask": torch.ones(2, 8, 8, dtype=torch.long),
              "input_ids": torch.zeros(4, 16, dtype=torch.long)}
    converted = apply_to_inputs(inputs, CHANNELS_LAST)
    assert converted["pixel_values"].is_contiguous(memory_format=torch.channels_last)
    assert not converted["pixel_values"].is_contiguous()
    assert torch.equal(converted["pixel_values"], inputs["pixel_values"])  # the same values, another layout
    assert converted["pixel_mask"] is inputs["pixel_mask"] and converted["input_ids"] is inputs["input_ids"]
    assert apply_to_inputs(inputs, CONTIGUOUS) is inputs


def test_a_model_gets_its_convolution_weights_in_nhwc():
    model = apply_to_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                               torch.nn.Linear(4 * 6 * 6, 2)), CHANNELS_LAST)
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last) and not model[0].weight.is_contiguous()


def test_an_unknown_layout_is_refused_with_the_closest_one():
    with pytest.raises(ValueError, match="Did you mean 'channels_last'"):
        check_memory_format("channel_last")
