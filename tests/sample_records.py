"""Small, valid records for the records and results-file tests."""

from bench_utils import make_record
from bench_utils.measurement.timing import Measurement
from bench_utils.records.key import VARIANT_FIELDS

ENV = {"torch_version": "2.15.0", "gpus": [], "timestamp_utc": "2026-11-22T00:00:00+00:00"}
CELL = dict(study="test", task="image-classification", model="resnet", batch_size=4,
            compile_mode="default", dtype="float32", device="cpu")


def ok_record(**overrides):
    """An ok record of ``CELL`` with four runs, overridable field by field (a cell's field or ``make_record``'s)."""
    m = Measurement(times_ms=[10.0, 12.0, 11.0, 13.0], first_call_ms=900.0, warmup=2)
    cell = {**CELL, **{name: overrides.pop(name) for name in list(overrides) if name in (*CELL, *VARIANT_FIELDS)}}
    fields = {"measurement": m, "environment": ENV, "config": {"weights": "random", "seed": 0}, **overrides}
    return make_record(cell, **fields)


def cpu_and_gpu_records(compiled_mode: str, **compiled) -> list[dict]:
    """An eager and a ``compiled_mode`` record (speed-up 2x) on a CPU with no model recorded and
    on a GPU with no name recorded: the environments the report names "CPU (unknown)" and "GPU".
    ``compiled`` adds fields to the compiled records (``compile=...``, say)."""
    records = []
    for device, environment in (("cpu", {"torch_version": "2.15.0"}),
                                ("cuda:0", {"torch_version": "2.15.0", "gpus": []})):
        cell = dict(study="s", task="image-classification", model="resnet", batch_size=1, dtype="float32",
                    device=device)
        records.append(make_record({**cell, "compile_mode": "eager"}, environment=environment,
                                   measurement=Measurement([10.0] * 3, 1.0)))
        records.append(make_record({**cell, "compile_mode": compiled_mode}, environment=environment,
                                   measurement=Measurement([5.0] * 3, 900.0),
                                   extra={"speedup": {"mean": 2.0, "mean_ci95": [1.5, 2.5], "eager_mean_ms": 10.0}},
                                   **compiled))
    return records


def R(record):
    """A record as readers take it (``Record.of``): the tests build its JSON, and change it, before reading it."""
    from bench_utils.records.schema import Record

    return Record.of(record)


def Rs(records):
    """Records as readers take them (``R`` each)."""
    return [R(record) for record in records]
