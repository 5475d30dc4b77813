"""The summary's geometric-mean speed-ups: over the same models at every batch size, and over all measured."""

import pytest

from bench_utils.report.frame import frame
from bench_utils.report.geometric_means import geomean_table
from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import ltr
from test_tables import _measured, _variant_record


def test_the_geometric_mean_keeps_a_channels_last_model_apart_from_its_contiguous_self():
    records = [_variant_record("eager"), _variant_record("default", speedup=1.5),
               _variant_record("eager", memory_format="channels_last"),
               _variant_record("default", speedup=1.8, memory_format="channels_last")]
    table = geomean_table(frame(records), Catalog("en"))
    rows = table.splitlines()[2:]
    assert len(rows) == 2
    assert any("channels_last" in row and "| 1.80× | 1 | 1.80× | 1 |" in row for row in rows)
    assert any("channels_last" not in row and "1.50×" in row for row in rows)


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_the_geometric_means_trend_over_batch_sizes_is_over_the_same_models(locale):
    # ResNet at every batch size (2x), ViT at batch 1 only (8x), MobileNet at 4 and 16 (0.5x)
    records = [_measured("resnet", batch, 2.0) for batch in (16, 1, 4)] + [_measured("vit", 1, 8.0)] + [
        _measured("mobilenet", batch, 0.5) for batch in (4, 16)]
    catalog = Catalog(locale)
    table = geomean_table(frame(records), catalog)
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]

    def shown(value, digits=2):
        return ltr(catalog.number(value, digits) + "×", catalog)

    assert [row[2] for row in rows] == [ltr(str(batch), catalog) for batch in (1, 4, 16)]
    # the same model at every batch size: ResNet's 2x, 1 model; then all the models measured there
    assert [row[4:6] for row in rows] == [[shown(2.0), ltr("1", catalog)]] * 3
    assert [row[6:8] for row in rows] == [[shown(4.0), ltr("2", catalog)], [shown(1.0), ltr("2", catalog)],
                                          [shown(1.0), ltr("2", catalog)]]
    assert [row[9] for row in rows] == [ltr("ViT", catalog), ltr("MobileNet", catalog), ltr("MobileNet", catalog)]
    assert catalog.t("col_geomean_every_batch") in table.splitlines()[0]


@pytest.mark.parametrize("locale", ["en", "ar", "es"])
def test_the_guides_mean_on_the_same_models_and_no_mode_against_an_eager_of_its_own(locale):
    from test_diagnosis import h200_records

    catalog = Catalog(locale)
    table = geomean_table(frame(h200_records()), catalog)
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    default = [row for row in rows if row[3] == catalog.mode_name("default", lambda name: ltr(name, catalog))]
    # the guide's A100 (torch 2.0.1) over the second mean's models: 8, 6 and 7 of them at batch 1, 4 and 16
    assert [row[8] for row in default] == [ltr(catalog.number(value, 2) + "×", catalog) for value in (1.39, 1.15, 1.18)]
    # ResNet's and ConvNeXT's reduce-overhead cells were timed beside an eager series of their own: out of both means
    overhead = [row for row in rows if row not in default]
    assert len(overhead) == 2 and all(row[4] == row[6] == "–" and catalog.t("flag_eager_per_mode") in row[9]
                                      for row in overhead)


def test_modes_timed_beside_one_eager_and_cells_that_time_their_own_pairs_by_design_stay_in_the_means():
    from test_tables import _measured

    def timed_with(record, modes):
        record["speedup"]["timed_with"] = modes
        return record

    together = ["default", "max-autotune-no-cudagraphs"]
    records = [timed_with(_measured(model, batch, 1.5), together) for model in ("resnet", "vit") for batch in (1, 16)]
    records += [timed_with(_measured(model, batch, 2.0, mode="max-autotune-no-cudagraphs"), together)
                for model in ("resnet", "vit") for batch in (1, 16)]
    # an AOTInductor package times its own pairs by design; ResNet's batch-16 reduce-overhead the earlier way
    records += [_measured(model, batch, 1.2, mode="aot-inductor") for model in ("resnet", "vit") for batch in (1, 16)]
    records.append(_measured("resnet", 16, 3.0, mode="reduce-overhead"))
    catalog = Catalog("en")
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in geomean_table(frame(records), catalog).splitlines()[2:]]
    by_mode = {(row[3], row[2]): row for row in rows}
    for mode in ("max-autotune-no-cudagraphs", "aot-inductor"):
        assert [by_mode[(mode, batch)][7] for batch in ("1", "16")] == ["2", "2"]  # both models, every batch size
    overhead = by_mode[("reduce-overhead", "16")]
    assert overhead[7] == "0" and overhead[9] == f"ResNet — {catalog.t('flag_eager_per_mode')}"
