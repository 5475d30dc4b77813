"""When compile loses, and what to use: read off the first H200 records and remedies measured for them."""

import copy
import json
import warnings
from pathlib import Path

import pytest

from bench_utils.paths import PROJECT_ROOT
from bench_utils.report import diagnosis
from bench_utils.report.frame import DuplicateCellWarning, latest_records
from bench_utils.records.results_file import read_records
from bench_utils.report.frame import frame
from bench_utils.report.i18n import Catalog

H200 = PROJECT_ROOT / "reports" / "hf-guide-h200" / "results.jsonl"


def h200_records():
    """The page's records: each cell's latest (a cell measured again on a later lease replaces its record)."""
    with warnings.catch_warnings():  # the cells two leases measured with other settings: the page says so once
        warnings.simplefilter("ignore", DuplicateCellWarning)
        shown = {record.record_id for record in latest_records([H200])}
    return [record for record in map(json.loads, H200.read_text().splitlines()) if record["record_id"] in shown]


def remedy(records, model, batch, speedup, interval, *, mode=None, memory_format=None, inductor=None, parity="pass"):
    """A remedy's record: the slow cell's, another configuration and another speed-up."""
    slow = next(r for r in records if r["cell"]["model"] == model and r["cell"]["batch_size"] == batch
                and r["cell"]["compile_mode"] == "default")
    record = copy.deepcopy(slow)
    record["record_id"] += "-remedy"
    record["cell"]["study"] += "-diagnosis"  # as diagnose names its remedies' study
    record["cell"].update({key: value for key, value in (("compile_mode", mode), ("memory_format", memory_format),
                                                          ("inductor", inductor)) if value})
    record["speedup"].update(mean=speedup, mean_ci95=list(interval))
    record["parity"]["parity"] = parity
    return record


@pytest.fixture(scope="module")
def diagnosed():
    records = h200_records()
    return frame(records + [
        remedy(records, "vit", 1, 1.30, (1.20, 1.40), mode="reduce-overhead"),
        remedy(records, "vit", 1, 1.05, (1.01, 1.09), inductor="freezing"),
        remedy(records, "vit", 1, 1.60, (1.50, 1.70), mode="max-autotune-no-cudagraphs", parity="fail"),
        remedy(records, "mobilenet", 16, 0.90, (0.85, 0.95), memory_format="channels_last"),
        remedy(records, "mobilenet", 16, 0.98, (0.93, 1.03), inductor="no-layout-optimization"),
    ])


def test_the_slower_cells_are_the_guides_whose_interval_lies_below_or_includes_one(diagnosed):
    slow = diagnosis.slower_cells(diagnosed)
    assert sorted(zip(slow["model"], slow["batch_size"])) == [("mobilenet", 16), ("vit", 1)]
    assert set(slow["mode"]) == {"default"}  # a remedy below 1 is no slower cell of its own


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_each_slower_cell_says_what_got_slower_its_remedies_and_a_verdict(diagnosed, locale):
    catalog = Catalog(locale)
    text = diagnosis.losses_markdown(diagnosed, catalog)
    assert text.count("### ") == 2
    recovered = catalog.t("loses_recovered", configuration="X", speedup="Y").split("X")[-1].split("Y")[0]
    assert recovered in text  # ViT: reduce-overhead recovers it (the failed gate's 1.6x does not count)
    assert catalog.t("loses_open", configuration="X", speedup="Y").split("X")[0] in text  # MobileNet: 0.98x open
    if locale == "en":
        vit = text[text.index("### ViT"):text.index("### ", text.index("### ViT") + 4)]
        assert "**reduce-overhead recovers it: 1.30× (1.20–1.40).**" in vit
        assert "host-bound" in vit and "174 → 233 kernels" in vit
        assert "| default with freezing | 1.05× | 1.01–1.09 | pass |" in vit
        assert "| max-autotune-no-cudagraphs | 1.60× | 1.50–1.70 | failed |" in vit
        mobilenet = text[text.index("### MobileNet"):]
        assert "slower matrix products and convolutions" in mobilenet
        assert "default, channels_last" in mobilenet


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_a_remedy_whose_gate_could_not_fail_reads_not_informative_not_passed(diagnosed, locale):
    # MobileNet's remedies are its records' copies: logits of about 1e-25 against a tolerance of 1e-3
    catalog = Catalog(locale)
    text = diagnosis.losses_markdown(diagnosed, catalog)
    sections = text.split("### ")[1:]
    mobilenet = next(section for section in sections if "MobileNet" in section.splitlines()[0])
    vit = next(section for section in sections if "ViT" in section.splitlines()[0])
    assert catalog.t("parity_blind") in mobilenet and f"| {catalog.t('parity_pass')} |" not in mobilenet
    assert catalog.t("parity_blind") not in vit and f"| {catalog.t('parity_pass')} |" in vit


def test_a_slow_cell_without_remedies_says_how_to_diagnose_it_and_one_they_all_lose_stays_eager():
    records = h200_records()
    catalog = Catalog("en")
    text = diagnosis.losses_markdown(frame(records), catalog)
    assert text.count(catalog.t("loses_not_diagnosed")) == 2
    lost = frame(records + [remedy(records, "mobilenet", 16, 0.90, (0.85, 0.95), memory_format="channels_last")])
    slow = diagnosis.slower_cells(lost)
    row = slow[slow["model"] == "mobilenet"].iloc[0]
    assert diagnosis.verdict(row, diagnosis.remedies_of(lost, row), catalog) == "Nothing tried beats eager: stay eager."


def test_what_to_use_is_the_fastest_configuration_that_passed_its_gate_and_beats_eager_else_eager(diagnosed):
    table = diagnosis.what_to_use(diagnosed, Catalog("en"))
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|")[1:3]): line for line in table.splitlines()[2:]}
    assert "| reduce-overhead | 5.58× | 5.43–5.72 |" in rows[("ResNet", "1")]
    assert "| reduce-overhead | 1.30× | 1.20–1.40 |" in rows[("ViT", "1")]  # the faster one failed its gate
    assert "| eager | – | – | – | – |" in rows[("MobileNet", "16")]
    assert "| default | 1.71× |" in rows[("ResNet", "16")]
    # MobileNet at batch 1 passed a gate that could not have failed (its outputs below the tolerance): no pick
    assert "| eager: the faster compiled configurations' gate could not have failed" in rows[("MobileNet", "1")]


def test_a_remedy_that_loses_too_is_its_slow_cells_verdict_not_a_slower_cell_of_its_own():
    records = h200_records()
    data = frame(records + [remedy(records, "vit", 1, 0.90, (0.85, 0.95), mode="max-autotune-no-cudagraphs")])
    slow = diagnosis.slower_cells(data)
    assert sorted(zip(slow["model"], slow["mode"])) == [("mobilenet", "default"), ("vit", "default")]
    vit = slow[slow["model"] == "vit"].iloc[0]
    assert diagnosis.verdict(vit, diagnosis.remedies_of(data, vit), Catalog("en")) == "Nothing tried beats eager: stay eager."


def _use_rows(table):
    """(model, batch) -> the row's cells, in the table's order."""
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_what_to_use_lists_batch_sizes_in_numeric_order():
    rows = _use_rows(diagnosis.what_to_use(frame(h200_records()), Catalog("en")))
    for model in ("ResNet", "ConvNeXT", "BeiT"):
        batches = [int(row[2]) for row in rows if row[1] == model]
        assert batches == sorted(batches) and len(batches) == 3  # 1, 4, 16: not the text's 1, 16, 4


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_what_to_use_does_not_prefer_a_point_estimate_inside_overlapping_intervals(locale):
    records = h200_records()
    # ResNet at batch 16 reads 1.71x (1.67-1.75) under default: a reduce-overhead cell 1 % faster, interval overlapping
    tied = remedy(records, "resnet", 16, 1.73, (1.69, 1.77), mode="reduce-overhead")
    apart = remedy(records, "resnet", 16, 1.90, (1.80, 2.00), mode="reduce-overhead")
    catalog = Catalog(locale)
    label = catalog.mode_name("reduce-overhead", lambda name: diagnosis.ltr(name, catalog))
    for extra, chosen_speedup, ties in ((tied, 1.71, True), (apart, 1.90, False)):
        rows = _use_rows(diagnosis.what_to_use(frame(records + [extra]), catalog))
        [row] = [row for row in rows if row[1] == diagnosis.ltr("ResNet", catalog)
                 and row[2] == diagnosis.ltr("16", catalog)]
        assert row[4] == diagnosis.ltr(catalog.number(chosen_speedup, 2) + "×", catalog)
        said = catalog.t("use_tie", configuration=diagnosis.mode_label("default", catalog), others=label)
        assert (row[3] == said) is ties
        if not ties:
            assert row[3] == label


def test_the_simplest_of_tied_configurations_is_chosen_whatever_their_order():
    import pandas as pd

    def cell(mode, speedup, low, high, memory_format="contiguous"):
        return {"compile_mode": mode, "memory_format": memory_format, "inductor": "default", "speedup": speedup,
                "ci_low": low, "ci_high": high}

    candidates = pd.DataFrame([cell("reduce-overhead", 1.30, 1.25, 1.35), cell("max-autotune", 1.10, 1.05, 1.15),
                               cell("default", 1.29, 1.24, 1.34, "channels_last"), cell("default", 1.27, 1.22, 1.32)])
    chosen, tied = diagnosis.choose(candidates)
    assert (chosen["compile_mode"], chosen["memory_format"]) == ("default", "contiguous")
    # those tied with the fastest, simplest first; max-autotune's interval lies apart: no tie
    assert [(row["compile_mode"], row["memory_format"]) for row in tied] == [("default", "channels_last"),
                                                                              ("reduce-overhead", "contiguous")]


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_what_to_use_recommends_nothing_on_a_gate_that_could_not_fail(locale):
    # random weights made MobileNet's logits about 1e-25 on the H200: its gate passes whatever compile does
    catalog = Catalog(locale)
    rows = _use_rows(diagnosis.what_to_use(frame(h200_records()), catalog))
    by_cell = {(row[1], row[2]): row for row in rows}
    mobilenet = by_cell[(diagnosis.ltr("MobileNet", catalog), diagnosis.ltr("1", catalog))]
    gate = 7  # after the speed-up, its interval and what it rests on
    assert mobilenet[3] == catalog.t("use_unjudged") and mobilenet[gate] == "–"
    assert by_cell[(diagnosis.ltr("ResNet", catalog), diagnosis.ltr("1", catalog))][gate] == catalog.t("parity_pass")
    assert catalog.t("col_parity") in diagnosis.what_to_use(frame(h200_records()), catalog).splitlines()[0]


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_a_verdict_on_a_remedy_whose_gate_could_not_fail_says_so(diagnosed, locale):
    # MobileNet's remedies' gates are blind (logits of about 1e-25): its verdict (0.98x, open) says so, ViT's not
    catalog = Catalog(locale)
    sections = diagnosis.losses_markdown(diagnosed, catalog).split("### ")[1:]
    mobilenet = next(section for section in sections if "MobileNet" in section.splitlines()[0])
    vit = next(section for section in sections if "ViT" in section.splitlines()[0])
    assert catalog.t("loses_gate_blind") in mobilenet
    assert catalog.t("loses_gate_blind") not in vit
