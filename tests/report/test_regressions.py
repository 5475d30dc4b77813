import numpy as np
import pytest

from bench_utils.measurement.paired import paired_speedup
from bench_utils.report import regressions
from bench_utils.report.frame import frame, latest_records

from explore_data import EXAMPLE, remeasured, write_study


def merged(tmp_path, **changes):
    return frame(latest_records([EXAMPLE, write_study(tmp_path / "later", remeasured(**changes))]))


def environments(data):
    base = next(e for e in data["environment"].unique() if "2.99.0" not in e)
    return base, next(e for e in data["environment"].unique() if "2.99.0" in e)


def test_regressions_are_named_and_small_changes_are_not(tmp_path):
    # the example: ResNet 1.07x, Segformer 1.81x, DETR 1.18x
    data = merged(tmp_path, speedups={"resnet": 1.04, "segformer": 1.2, "detr": 1.5})
    table = regressions.compare_environments(data, *environments(data)).set_index("model")
    assert table.loc["ResNet", "verdict"] == "same"          # 2 % lower: within the tolerance
    assert table.loc["Segformer", "verdict"] == "regression"  # a third lower, intervals far apart
    assert table.loc["Segformer", "why"] == "speed-up 34% lower"
    assert table.loc["DETR", "verdict"] == "improvement"
    assert table.loc["Segformer", "ratio_high"] < 1 < table.loc["DETR", "ratio_low"]


def test_a_cell_that_stops_running_or_fails_the_gate_is_a_regression(tmp_path):
    data = merged(tmp_path, speedups={}, statuses={"resnet": "error"}, parities={"detr": "fail"})
    table = regressions.compare_environments(data, *environments(data)).set_index("model")
    assert table.loc["ResNet", "verdict"] == "regression" and table.loc["ResNet", "why"] == "error now, was ok"
    assert table.loc["DETR", "why"] == "fails the accuracy gate it passed"
    assert table.loc["Segformer", "verdict"] == "same"  # unchanged


def test_the_tolerance_decides_a_real_but_small_drop(tmp_path):
    data = merged(tmp_path, speedups={"segformer": 1.65})  # 9 % lower than 1.81x, intervals apart
    base, cand = environments(data)
    assert regressions.compare_environments(data, base, cand, 0.10).set_index("model").loc["Segformer", "verdict"] == "same"
    assert regressions.compare_environments(data, base, cand, 0.05).set_index("model").loc["Segformer", "verdict"] == "regression"


def test_bad_input_is_refused_with_what_is_there(tmp_path):
    data = merged(tmp_path, speedups={})
    base, cand = environments(data)
    with pytest.raises(ValueError, match="no environment 'H100'.*they hold"):
        regressions.compare_environments(data, "H100", cand)
    with pytest.raises(ValueError, match="same environment"):
        regressions.compare_environments(data, base, base)
    with pytest.raises(ValueError, match="tolerance"):
        regressions.compare_environments(data, base, cand, 1.5)


def test_the_reasons_are_in_the_catalogs_language(tmp_path):
    from bench_utils.report.i18n import Catalog

    data = merged(tmp_path, speedups={"segformer": 1.2}, statuses={"resnet": "error"})
    table = regressions.compare_environments(data, *environments(data), catalog=Catalog("es")).set_index("model")
    assert table.loc["Segformer", "why"] == "aceleración un 34% menor"
    assert table.loc["ResNet", "why"] == "ahora error, antes ok"


def simulated_run(true_speedup, pairs, rng, noise=0.05, runs_per_block=4):
    """One comparison as ``measurement.paired`` measures it: pairs of blocks sharing a drift."""
    drift = rng.normal(0, 0.2, pairs)[:, None]  # moves both blocks of a pair alike
    eager = 10.0 * np.exp(drift + rng.normal(0, noise, (pairs, runs_per_block)))
    compiled = 10.0 / true_speedup * np.exp(drift + rng.normal(0, noise, (pairs, runs_per_block)))
    result = paired_speedup(eager, compiled, n_resamples=2)  # the median's bootstrap is not used here
    return result.mean, *result.mean_ci95


@pytest.mark.parametrize("pairs", [(25, 25), (6, 25), (4, 4)])
def test_the_ratio_interval_covers_the_true_ratio_95_percent_of_the_time(pairs):
    rng = np.random.default_rng(7)
    truth_base, truth_cand, trials = 1.8, 1.5, 1200
    covered = 0
    for _ in range(trials):
        base = simulated_run(truth_base, pairs[0], rng, noise=0.08)
        cand = simulated_run(truth_cand, pairs[1], rng, noise=0.03)
        _, low, high = regressions.ratio_interval(*base, pairs[0], *cand, pairs[1])
        covered += low <= truth_cand / truth_base <= high
    # binomial standard error at 1200 trials: 0.6 %
    assert 0.93 <= covered / trials <= 0.97


def test_with_no_true_change_a_regression_is_called_rarely_and_with_one_it_is_found():
    rng = np.random.default_rng(11)
    false_alarms = found = 0
    for _ in range(600):
        base, same, slower = (simulated_run(s, 25, rng) for s in (1.5, 1.5, 1.2))
        false_alarms += regressions.ratio_interval(*base, 25, *same, 25)[2] < 1
        found += regressions.ratio_interval(*base, 25, *slower, 25)[2] < 1
    assert false_alarms / 600 <= 0.045  # one side of a 95 % interval: 2.5 % expected
    assert found / 600 >= 0.99


def test_cells_that_cannot_be_judged_are_inconclusive_never_the_same(tmp_path):
    later = remeasured({})
    for record in later:
        model = record["cell"]["model"]
        if record["cell"]["compile_mode"] == "eager" or model == "detr":
            continue
        if model == "resnet":  # one pair: no interval exists
            record["speedup"].update(mean_ci95=None, pairs=1)
        else:  # an interval of another method cannot be read as a t-interval
            record["speedup"]["method"] = "percentile bootstrap of runs"
    data = frame(latest_records([EXAMPLE, write_study(tmp_path / "later", later)]))
    table = regressions.compare_environments(data, *environments(data)).set_index("model")
    assert table.loc["ResNet", "verdict"] == "inconclusive" and "no interval" in table.loc["ResNet", "why"]
    assert table.loc["Segformer", "verdict"] == "inconclusive" and "another method" in table.loc["Segformer", "why"]
    assert table.loc["DETR", "verdict"] == "same"


def test_a_cell_failing_on_both_sides_is_inconclusive(tmp_path):
    first = write_study(tmp_path / "first", remeasured({}, torch_version="2.98.0", statuses={"detr": "oom"}))
    second = write_study(tmp_path / "second", remeasured({}, statuses={"detr": "error"}))
    data = frame(latest_records([first, second]))
    base = next(e for e in data["environment"].unique() if "2.98.0" in e)
    cand = next(e for e in data["environment"].unique() if "2.99.0" in e)
    table = regressions.compare_environments(data, base, cand).set_index("model")
    assert (table.loc["DETR", "verdict"], table.loc["DETR", "why"]) == ("inconclusive", "error now, was OOM")
