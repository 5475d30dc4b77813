"""What torch itself compiles again at a larger batch, the project aside: the oracle of the dynamic-batch tests."""

import torch


def frames_recompiled(model, make_inputs, batch_sizes=(1, 4)) -> int:
    """Frames compiled again at the last batch size by a model compiled (aot_eager) at the first with its batch
    dimension dynamic and a batch of 1 not specialized (backed_size_oblivious), as the dynamic cells compile.

    0 on torch 2.14 for a tiny ViT and ResNet-18; torch 2.11, the GPU image's, guards on a batch of 1
    (scaled_dot_product_attention; conv2d's fake kernel) and compiles again."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.fx.experimental import _config

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter)
    with torch.no_grad(), _config.patch(backed_size_oblivious=True):
        for batch_size in batch_sizes:
            counter.frame_count = 0
            batch = make_inputs(batch_size)
            for value in batch.values():
                if value.dim() >= 1:
                    torch._dynamo.mark_dynamic(value, 0)
            compiled(**batch)
    torch._dynamo.reset()
    return counter.frame_count
