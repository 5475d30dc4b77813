"""benchmarks/model_costs.py: what it counts, on a hand-checked call and on timm's tiny test ResNet."""

import importlib.util
import json
from pathlib import Path
import sys

import torch

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("model_costs", ROOT / "benchmarks" / "model_costs.py")
model_costs = importlib.util.module_from_spec(_spec)
sys.modules["model_costs"] = model_costs
_spec.loader.exec_module(model_costs)


def test_traffic_counts_each_operators_inputs_and_outputs_and_not_views():
    a, b = torch.ones(4, 8), torch.ones(8, 2)
    counter = model_costs.TrafficCounter()
    with counter:
        (a @ b).t().relu()  # mm: 32 + 16 floats in, 8 out; t is a view; relu: 8 in, 8 out
    assert counter.ops == 2
    assert counter.bytes == 4 * (32 + 16 + 8 + 8 + 8)


def test_a_models_row_splits_per_image_and_fixed_work(tmp_path):
    out = tmp_path / "costs.json"
    assert model_costs.main(["--models", "timm:test_resnet", "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    row = table["models"]["timm:test_resnet"]
    assert row["conv_gflops_per_image"] > 0 and row["conv_gflops_fixed"] == 0.0  # convolutions scale with images
    assert row["eager_ops"] > 10 and row["param_bytes"] == 4 * row["param_count"]
    assert table["provenance"]["script"] == "benchmarks/model_costs.py" and table["provenance"]["torch"]
