from types import SimpleNamespace

import pytest
import torch

from bench_utils.measurement import work_profile
from bench_utils.measurement.work_profile import kernel_kind, operator_kind, profile_calls
from bench_utils.vocabulary import WorkKind


class ElementwiseChain(torch.nn.Module):
    """A matrix product, then a chain of element-wise operators and a norm: what Inductor fuses."""

    def __init__(self, graph_break: bool = False):
        super().__init__()
        self.linear, self.norm, self.graph_break = torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), graph_break

    def forward(self, x):
        y = self.linear(x)
        for _ in range(6):
            y = torch.relu(y * 1.5 + 0.1).sin()
        if self.graph_break:
            torch._dynamo.graph_break()
        return self.norm(y).sum(-1)


@pytest.fixture(scope="module")
def profiles():
    torch.manual_seed(0)
    model, x = ElementwiseChain().eval(), torch.randn(256, 64)
    compiled = torch.compile(model, backend="inductor")
    with torch.no_grad():
        compiled(x)
        return {"eager": profile_calls(lambda: model(x), cuda=False),
                "compiled": profile_calls(lambda: compiled(x), cuda=False)}


def test_compiling_the_chain_makes_fewer_operator_calls_and_moves_element_wise_time_into_fused_kernels(profiles):
    eager, compiled = profiles["eager"], profiles["compiled"]
    assert eager["work_unit"] == compiled["work_unit"] == "operator calls" and eager["calls"] == 3
    assert eager["work_calls"] >= 20 and compiled["work_calls"] <= 3  # linear, 6 x (mul, add, relu, sin), norm, sum
    assert eager["kinds_ms"]["elementwise"] > 0 and eager["kinds_ms"]["fused"] == 0
    assert compiled["kinds_ms"]["fused"] > 0 and compiled["kinds_ms"]["elementwise"] == 0
    assert compiled["kinds_ms"]["matmul_conv"] > 0  # the matrix product Inductor calls out to
    assert eager["compiled_regions"] == 0 and compiled["compiled_regions"] == 1


def test_the_kinds_add_up_to_the_time_in_operators_and_that_to_at_most_the_wall_time(profiles):
    for side in profiles.values():
        assert sum(side["kinds_ms"].values()) == pytest.approx(side["busy_ms"], rel=0.05)
        assert 0 < side["busy_fraction"] <= 1 and side["busy_ms"] <= side["wall_ms"]


def test_a_graph_break_shows_as_two_compiled_graphs_per_call(tmp_path):
    model, x = ElementwiseChain(graph_break=True).eval(), torch.randn(8, 64)
    compiled = torch.compile(model, backend="inductor")
    with torch.no_grad():
        compiled(x)
        side = profile_calls(lambda: compiled(x), cuda=False, trace_path=tmp_path / "trace.json")
    assert side["compiled_regions"] == 2
    assert '"name": "bench_utils::profiled_call"' in (tmp_path / "trace.json").read_text()  # one call, kept whole


@pytest.mark.parametrize("name, kind", [
    ("aten::addmm", WorkKind.MATMUL_CONV), ("aten::mkldnn_convolution", WorkKind.MATMUL_CONV),
    ("aten::mm", WorkKind.MATMUL_CONV), ("aten::mul", WorkKind.ELEMENTWISE), ("aten::max_pool2d", WorkKind.ELEMENTWISE),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", WorkKind.ATTENTION), ("aten::softmax", WorkKind.ATTENTION),
    ("aten::native_layer_norm", WorkKind.NORMALIZATION), ("aten::native_batch_norm", WorkKind.NORMALIZATION),
    ("aten::copy_", WorkKind.COPY_LAYOUT), ("aten::cat", WorkKind.COPY_LAYOUT), ("aten::t", WorkKind.COPY_LAYOUT),
    ("## Call CompiledFxGraph fabc ##", WorkKind.FUSED)])
def test_operators_are_sorted_by_kind(name, kind):
    assert operator_kind(name) == kind


@pytest.mark.parametrize("name, kind", [
    ("triton_poi_fused_add_relu_0", WorkKind.FUSED), ("triton_tem_fused_addmm_0", WorkKind.MATMUL_CONV),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", WorkKind.MATMUL_CONV),
    ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float>", WorkKind.NORMALIZATION),
    ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>", WorkKind.ATTENTION),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", WorkKind.ELEMENTWISE),
    ("void at::native::elementwise_kernel<128, 2, direct_copy_kernel_cuda>", WorkKind.COPY_LAYOUT),
    ("Memcpy HtoD (Pageable -> Device)", WorkKind.COPY_LAYOUT), ("some_unknown_kernel", WorkKind.OTHER)])
def test_gpu_kernels_are_sorted_by_their_names(name, kind):
    assert kernel_kind(name) == kind


def event(name, start, end, device="CPU", **fields):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end),
                           device_type=SimpleNamespace(name=device), cpu_parent=None, **fields)


def test_the_device_side_counts_kernels_and_busy_time_inside_the_calls_only():
    events = [event(work_profile.ANNOTATION, 0, 100), event(work_profile.ANNOTATION, 200, 300),
              event("Torch-Compiled Region: 0/0", 10, 90), event("Torch-Compiled Region: 0/0", 210, 290),
              event("triton_poi_fused_add_0", 20, 40, "CUDA"), event("sm90_xmma_gemm", 30, 60, "CUDA"),  # overlap
              event("Memcpy DtoD", 220, 230, "CUDA"), event("triton_red_fused_sum_1", 240, 280, "CUDA"),
              event(work_profile.ANNOTATION, 0, 100, "CUDA", is_user_annotation=True),  # the GPU-side range
              event("late_kernel", 400, 450, "CUDA")]  # after the last call: not this profile's
    side = work_profile.reduce_device(events)
    assert side["work_unit"] == "kernels" and side["work_calls"] == 1.5  # 3 kernels (the copy is no kernel) / 2
    assert side["busy_ms"] == pytest.approx((40 + 10 + 40) / 2 / 1e3)  # 20-60 once, then 10 and 40
    assert side["busy_fraction"] == pytest.approx(90 / 200)
    assert side["kinds_ms"]["fused"] == pytest.approx(60 / 2 / 1e3)
    assert side["kinds_ms"]["matmul_conv"] == pytest.approx(30 / 2 / 1e3)
    assert side["compiled_regions"] == 1


def test_a_profile_without_the_calls_range_is_refused():
    with pytest.raises(ValueError, match="no bench_utils::profiled_call range"):
        work_profile.reduce_cpu([event("aten::mm", 0, 1, self_cpu_time_total=1)])
