import numpy as np
import torch

from bench_utils.zoo.inputs import (
    GUIDE_IMAGE_SIZE,
    OWLVIT_TEXT_LENGTH,
    image_inputs,
    owlvit_text_inputs,
    sample_image,
    sample_image_info,
    to_device,
)


def test_sample_image_is_a_real_photo_at_the_guides_size():
    image = sample_image()
    assert image.size == GUIDE_IMAGE_SIZE == (640, 480) and image.mode == "RGB"
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32))
    assert pixels.std() > 20  # a photo, not a flat or synthetic image
    assert "chelsea" in sample_image_info()["image"]


def test_image_inputs_are_repeated_copies():
    class Processor:
        def __call__(self, images, return_tensors):
            assert images is sample_image()
            return {"pixel_values": torch.arange(12.0).reshape(1, 3, 2, 2),
                    "pixel_mask": torch.ones(1, 2, 2, dtype=torch.long), "meta": "ignored"}

    tensors = image_inputs(Processor(), 3)
    assert set(tensors) == {"pixel_values", "pixel_mask"}
    assert tensors["pixel_values"].shape == (3, 3, 2, 2)
    assert torch.equal(tensors["pixel_values"][2], tensors["pixel_values"][0])
    assert tensors["pixel_values"].stride(0) != 0  # real copies, not a broadcast view


def test_to_device_casts_only_floating_tensors():
    moved = to_device({"pixel_values": torch.zeros(1, 3), "input_ids": torch.zeros(1, 3, dtype=torch.long)},
                      "cpu", torch.bfloat16)
    assert moved["pixel_values"].dtype == torch.bfloat16 and moved["input_ids"].dtype == torch.long


def test_owlvit_fixed_token_ids():
    tensors, source = owlvit_text_inputs(2)
    assert source == "fixed-token-ids"
    ids, mask = tensors["input_ids"], tensors["attention_mask"]
    assert ids.shape == (4, OWLVIT_TEXT_LENGTH) and mask.shape == ids.shape
    assert ids[0, :7].tolist() == [49406, 320, 1125, 539, 320, 2368, 49407]  # a photo of a cat
    assert ids[1, 5] == 1929  # dog
    assert mask[0].tolist() == [1] * 7 + [0] * 9 and ids[0, 7:].eq(0).all()


def test_owlvit_uses_a_tokenizer_when_given():
    calls = {}

    def tokenizer(queries, **kwargs):
        calls.update(kwargs, queries=queries)
        return {"input_ids": torch.ones(len(queries), 16, dtype=torch.long),
                "attention_mask": torch.ones(len(queries), 16, dtype=torch.long)}

    tensors, source = owlvit_text_inputs(1, tokenizer)
    assert source == "tokenizer" and calls["max_length"] == 16 and calls["padding"] == "max_length"
    assert calls["queries"] == ["a photo of a cat", "a photo of a dog"]
