import torch

from bench_utils.variants import aot_inductor
from bench_utils.variants.aot_inductor import AotPackage, ExportFailure


class TinyConvNet(torch.nn.Module):
    """A small convolutional classifier called as the zoo's models are: ``model(pixel_values=...)``."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, pixel_values):
        features = torch.relu(self.conv(pixel_values)).mean(dim=(2, 3))
        return {"logits": self.head(features)}


class BranchesOnData(TinyConvNet):
    def forward(self, pixel_values):
        if pixel_values.sum() > 0:  # a data-dependent branch: export cannot trace it
            return {"logits": self.head(pixel_values.mean(dim=(2, 3)).repeat(1, 3)[:, :8])}
        return super().forward(pixel_values)


def test_a_model_is_exported_compiled_loaded_and_gives_eager_outputs_in_a_fresh_process_too(tmp_path):
    torch.manual_seed(0)
    model = TinyConvNet().eval()
    inputs = {"pixel_values": torch.randn(2, 3, 16, 16)}
    from torch._inductor import config as inductor_config

    config_before = repr(inductor_config.get_config_copy())
    package = aot_inductor.build(model, inputs, tmp_path / "tiny.pt2")
    assert isinstance(package, AotPackage), package
    # AOTInductor's metadata is not left in the process's config (later cache keys would change)
    assert repr(inductor_config.get_config_copy()) == config_before
    assert package.path.is_file() and package.size_bytes > 0
    assert package.export_s > 0 and package.compile_s > package.export_s  # the C++ compile dominates
    with torch.inference_mode():
        expected = model(**inputs)["logits"]
        got = aot_inductor.load(package)(**inputs)
    logits = got["logits"] if isinstance(got, dict) else got[0]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)
    startup = aot_inductor.startup_in_fresh_process(package, inputs)
    assert set(startup) == {"import_s", "load_s", "first_call_s"}
    assert all(seconds > 0 for seconds in startup.values())
    assert not list(tmp_path.glob("*.inputs.pt"))  # the inputs handed to the process are removed


def test_a_model_that_cannot_be_exported_is_a_result_with_the_reason(tmp_path):
    failure = aot_inductor.build(BranchesOnData().eval(), {"pixel_values": torch.randn(1, 3, 8, 8)},
                                 tmp_path / "x.pt2")
    assert isinstance(failure, ExportFailure) and failure.stage == "export"
    assert "data" in failure.reason.lower() or "guard" in failure.reason.lower(), failure.reason
    assert failure.to_dict() == {"failed_stage": "export", "reason": failure.reason}
    assert not (tmp_path / "x.pt2").exists()  # nothing compiled
