"""Small, valid records for the records and results-file tests."""

from bench_utils import make_record
from bench_utils.measurement.timing import Measurement

ENV = {"torch_version": "2.15.0", "gpus": [], "timestamp_utc": "2026-11-22T00:00:00+00:00"}
CELL = dict(study="test", task="image-classification", model="resnet", batch_size=4,
            compile_mode="default", dtype="float32", device="cpu")


def ok_record(**overrides):
    """An ok record of ``CELL`` with four runs, overridable field by field."""
    m = Measurement(times_ms=[10.0, 12.0, 11.0, 13.0], first_call_ms=900.0, warmup=2)
    fields = {**CELL, "measurement": m, "environment": ENV,
              "config": {"weights": "random", "seed": 0}, **overrides}
    return make_record(**fields)
