import math

import pytest
import torch

from bench_utils.measurement.flops import FlopCount, achieved_tflops, count_forward_flops


def forward_flops(fn):
    return count_forward_flops(fn).flops


def test_linear_counts_two_m_n_k():
    torch.manual_seed(0)
    m, k, n = 8, 64, 32
    model = torch.nn.Linear(k, n).eval()
    x = torch.randn(m, k)
    # bias adds are element-wise: not counted
    assert forward_flops(lambda: model(x)) == 2 * m * n * k


def test_conv_then_linear_match_the_hand_count():
    torch.manual_seed(0)
    batch, c_in, c_out, size, kernel = 2, 3, 8, 16, 3
    model = torch.nn.Sequential(
        torch.nn.Conv2d(c_in, c_out, kernel, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(c_out * size * size, 10)).eval()
    x = torch.randn(batch, c_in, size, size)
    conv = 2 * batch * size * size * c_out * c_in * kernel * kernel
    linear = 2 * batch * 10 * (c_out * size * size)
    count = count_forward_flops(lambda: model(x))
    assert count.flops == conv + linear
    assert count.note is None
    assert count.by_operator == {"aten.convolution": conv, "aten.addmm": linear}


def _vit_hand_count(config, batch):
    patches = (config.image_size // config.patch_size) ** 2
    s, h, i = patches + 1, config.hidden_size, config.intermediate_size  # +1: the CLS token
    embed = 2 * batch * patches * h * config.num_channels * config.patch_size ** 2
    layer = (4 * 2 * batch * s * h * h            # q, k, v, output projections
             + 2 * 2 * batch * s * h * i          # MLP up and down
             + 2 * 2 * batch * s * s * h)         # q @ k^T and attn @ v over all heads
    head = 2 * batch * h * config.num_labels      # classifier on the CLS token
    return embed + config.num_hidden_layers * layer + head


def test_tiny_vit_counts_attention_even_on_cpu(tiny_vit):
    model, inputs = tiny_vit
    expected = _vit_hand_count(model.config, inputs["pixel_values"].shape[0])
    count = count_forward_flops(lambda: model(**inputs))
    assert count.flops == expected
    # the default SDPA path on CPU runs a kernel torch has no formula for: ours counts it
    attention = [op for op in count.by_operator if "attention" in op]
    assert attention and sum(count.by_operator[op] for op in attention) > 0


def test_tiny_vit_count_is_the_same_for_eager_and_sdpa_attention(tiny_vit):
    from transformers import ViTForImageClassification

    model, inputs = tiny_vit
    eager = ViTForImageClassification._from_config(model.config, attn_implementation="eager").eval()
    assert eager.config._attn_implementation == "eager"
    assert forward_flops(lambda: eager(**inputs)) == forward_flops(lambda: model(**inputs))


def test_counting_runs_without_grad_and_leaves_grad_mode_alone():
    seen = []
    layer = torch.nn.Linear(4, 4)

    def forward():
        seen.append(torch.is_grad_enabled())
        return layer(torch.randn(2, 4))

    assert torch.is_grad_enabled()
    assert forward_flops(forward) == 2 * 2 * 4 * 4
    assert seen == [False]
    assert torch.is_grad_enabled()


def test_a_failing_forward_gives_none_with_the_reason():
    def broken():
        raise RuntimeError("shape mismatch in block 3")

    count = count_forward_flops(broken)
    assert count == FlopCount(None, "counting failed: RuntimeError: shape mismatch in block 3")
    assert forward_flops(broken) is None


def test_no_counted_operator_gives_none_not_zero():
    x = torch.randn(16)
    count = count_forward_flops(lambda: torch.relu(x) + 1)
    assert count.flops is None
    assert "no operator" in count.note


def test_achieved_tflops():
    # 2e12 FLOPs in 500 ms = 4 TFLOP/s
    assert achieved_tflops(2e12, 500.0) == pytest.approx(4.0, rel=1e-12)
    assert achieved_tflops(1_000_000_000, 1.0) == pytest.approx(1.0, rel=1e-12)
    for flops, latency in [(None, 1.0), (1e9, None), (1e9, 0.0), (1e9, -1.0), (0, 1.0),
                           (1e9, math.nan), (math.inf, 1.0)]:
        assert achieved_tflops(flops, latency) is None, (flops, latency)


def test_effective_peak_holds_each_class_of_work_to_its_own_tf32_state():
    from bench_utils.measurement.flops import FlopCount, compute_block, effective_peak

    h100 = "NVIDIA H100 80GB HBM3"  # fp32 67, tf32 494.5 TFLOP/s dense
    count = FlopCount(3_000, None, {"aten.convolution": 1_000, "aten.mm": 2_000})
    # PyTorch's defaults: convolutions may use TF32, matmuls not
    mixed = effective_peak(count, h100, "float32", tf32_matmul=False, tf32_conv=True)
    assert mixed == pytest.approx(3_000 / (1_000 / 494.5 + 2_000 / 67.0))
    assert effective_peak(count, h100, "float32", tf32_matmul=True, tf32_conv=True) == pytest.approx(494.5)
    assert effective_peak(count, h100, "float32", tf32_matmul=False, tf32_conv=False) == pytest.approx(67.0)
    assert effective_peak(count, None, "float32", tf32_matmul=False, tf32_conv=False) is None  # a CPU
    block = compute_block(count, gpu_name=h100, dtype="float32", tf32_matmul=False, tf32_conv=True,
                          latency_ms=1.0, eager_latency_ms=2.0)
    assert block["peak_tflops"] == pytest.approx(mixed)
    assert block["percent_of_peak"] == pytest.approx(100 * 3_000 / 1e-3 / 1e12 / mixed)
    assert block["eager_tflops"] == pytest.approx(block["tflops"] / 2)
