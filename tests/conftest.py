import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def pytest_collection_modifyitems(config, items):
    # Tests marked `cuda` run only where a GPU is present.
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(requires_cuda)
