import atexit
import os
import shutil
import tempfile

# Tests never reach a model hub: forced offline before transformers is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Tests take device locks of their own: a study running on this machine neither waits for
# them nor makes them wait (subprocesses inherit this).
os.environ["BENCH_UTILS_LOCK_DIR"] = tempfile.mkdtemp(prefix="bench_utils-test-locks-")
atexit.register(shutil.rmtree, os.environ["BENCH_UTILS_LOCK_DIR"], ignore_errors=True)
# Cluster nodes of the tests keep their folders there, not in the project (a killed task leaves one).
os.environ["BENCH_UTILS_SCRATCH_DIR"] = tempfile.mkdtemp(prefix="bench_utils-test-nodes-")
atexit.register(shutil.rmtree, os.environ["BENCH_UTILS_SCRATCH_DIR"], ignore_errors=True)
# Ray clusters of the tests listen on the loopback interface only (Ray reads this on import).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import gc  # noqa: E402
import socket  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def pytest_collection_modifyitems(config, items):
    # Tests marked `cuda` run only where a GPU is present.
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(requires_cuda)


def pytest_collection_finish(session):
    # What the imports and the collection made lives to the end: frozen (gc.freeze), it is no longer scanned by each
    # of the cells' gc.collect calls (release, gc_paused). Measured over make test's parallel phase: 62 s of
    # collections in all workers where there were 188 s.
    gc.freeze()


@pytest.fixture
def no_network(monkeypatch):
    """Fail any attempt to open a network connection (the offline path must not try)."""
    def refuse(self, address, *args, **kwargs):
        raise AssertionError(f"network access attempted: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection",
                        lambda address, *a, **k: refuse(None, address))


@pytest.fixture
def tiny_vit():
    """A tiny ViT classifier (random weights) and a matching batch."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=64, image_size=32, patch_size=8, num_labels=10)
    return ViTForImageClassification(config).eval(), {"pixel_values": torch.randn(2, 3, 32, 32)}


@pytest.fixture
def modes_as_backends(monkeypatch):
    """Each compile mode its own cheap backend (aot_eager's work, a callable of its own): dynamo then keeps one
    entry per mode, as it does for inductor's modes, without inductor's C++ compiles on this CPU."""
    from torch._dynamo.backends.debugging import aot_eager
    from bench_utils.variants import modes

    backends = {}

    def backend_for(mode):
        return backends.setdefault(mode, lambda graph, example_inputs: aot_eager(graph, example_inputs))

    monkeypatch.setattr(modes, "compile_model", lambda model, mode, **options: torch.compile(
        model, backend=backend_for(mode), fullgraph=options.get("fullgraph", False), dynamic=options.get("dynamic")))
    return backends


@pytest.fixture
def loaded(tiny_vit):
    """The tiny ViT as the zoo's loader gives a model: what a cell measures (``study.cell``)."""
    from bench_utils.zoo.loading import LoadedModel

    model, inputs = tiny_vit
    return LoadedModel(model=model, key="tiny-vit", label="TinyViT", task="image-classification",
                       checkpoint="local/tiny-vit", weights="random", dtype="float32", device="cpu",
                       param_count=sum(p.numel() for p in model.parameters()),
                       make_inputs=lambda b: {"pixel_values": inputs["pixel_values"][:1].repeat(b, 1, 1, 1)})
