import json

from sample_records import ok_record

from bench_utils.paths import PROJECT_ROOT
from bench_utils.report.cell_text import format_cell, gate_cannot_fail
from bench_utils.records.schema import Record

TOLERANCE = {"key": "float32+tf32", "tol": 1e-3, "multiplier": 2.0}


def _parity(per_tensor, **fields):
    """A parity block of a float32 cell judged against float64, as the gate writes it (before ``can_fail``)."""
    return {"parity": "pass", "reference": "float64", "dtype": "float32", "tolerance": TOLERANCE,
            "tensors": len(per_tensor), "per_tensor": per_tensor, **fields}


def _tensor(rmse_eager, judged_by="allclose or rmse-vs-fp64"):
    return {"judged_by": judged_by, "rmse_eager": rmse_eager, "max_abs_err": rmse_eager * 10}


def test_a_gate_that_says_it_could_not_fail_cannot():
    assert gate_cannot_fail(ok_record(extra={"parity": _parity({"logits": _tensor(0.003)}, can_fail=False)}))
    assert not gate_cannot_fail(ok_record(extra={"parity": _parity({"logits": _tensor(1e-30)}, can_fail=True)}))


def test_an_old_records_gate_is_blind_where_eagers_rounding_bounds_its_outputs_below_the_tolerance():
    # MobileNet on the H200 (random weights): eager 1.45e-26 from float64, its logits about 1e-25
    assert gate_cannot_fail(ok_record(extra={"parity": _parity({"logits": _tensor(1.45e-26)})}))
    # ResNet's 3.4e-3 and the tiny example's 7.1e-9: outputs that may reach the tolerance
    for rmse in (3.4e-3, 7.1e-9):
        assert not gate_cannot_fail(ok_record(extra={"parity": _parity({"logits": _tensor(rmse)})}))
    # one bounded output beside one that is not: the gate could fail on the second
    both = _parity({"logits": _tensor(1.45e-26), "boxes": _tensor(1.9e-6)})
    assert not gate_cannot_fail(ok_record(extra={"parity": both}))


def test_what_an_old_record_cannot_bound_is_a_gate_that_could_fail():
    blind = {"logits": _tensor(1e-30)}
    for parity in (_parity(blind, parity="fail"),                                  # it failed: it could
                   _parity(blind, tensors=21),                                    # outputs not listed
                   _parity({"logits": _tensor(1e-30, judged_by="allclose")}),      # no float64 distance
                   _parity({"labels": {"judged_by": "equality"}}),                 # integers must be equal
                   _parity(blind, tolerance=None)):
        assert not gate_cannot_fail(ok_record(extra={"parity": parity}))
    assert not gate_cannot_fail(ok_record())  # no gate at all


def test_of_the_h200_study_only_mobilenets_gates_are_blind():
    # the reviewed page: MobileNet's gate "passed" everything; every other model's outputs reach the tolerance
    lines = (PROJECT_ROOT / "reports" / "hf-guide-h200" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    records = [Record.from_json(json.loads(line)) for line in lines]
    blind = {(r.cell.model, r.cell.batch_size) for r in records if gate_cannot_fail(r)}
    judged = {(r.cell.model, r.cell.batch_size) for r in records if r.parity is not None}
    assert blind == {key for key in judged if key[0] == "mobilenet"} and len(blind) == 2


def test_the_terminal_says_not_informative_where_the_gate_could_not_fail():
    speedup = {"mean": 2.0, "mean_ci95": [1.5, 2.5], "eager_mean_ms": 20.0, "pairs": 3}
    blind = ok_record(compile={"cold_ms": 900.0}, extra={"speedup": speedup,
                                                         "parity": _parity({"logits": _tensor(1e-30)})})
    told = ok_record(compile={"cold_ms": 900.0}, extra={"speedup": speedup,
                                                        "parity": _parity({"logits": _tensor(3e-3)})})
    assert "parity    not informative" in format_cell(blind)
    assert "parity    pass" in format_cell(told)
