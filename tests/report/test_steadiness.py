"""The page's words for a cell's regime shift and its replicates, in each locale."""

import numpy as np
import pandas as pd

from bench_utils.report.i18n import Catalog
from bench_utils.report.steadiness import regime_flag, steadiness_flags


def test_a_regime_shift_names_each_side_that_shifted_with_its_levels_ratio():
    row = pd.Series({"regime_eager": 1.68, "regime_compiled": 1.671, "replicates": 1})
    assert regime_flag(row, Catalog("en")) == "regime shift (eager ×1.68 and compiled ×1.67)"
    spanish = Catalog("es")
    assert regime_flag(pd.Series({"regime_eager": np.nan, "regime_compiled": 1.2}), spanish) == \
        f"cambio de régimen ({spanish.t('noisy_series_compiled')} ×1.20)"
    assert regime_flag(pd.Series({"regime_eager": np.nan, "regime_compiled": np.nan}), Catalog("en")) is None
    # a row of several modes names the one that shifted
    assert regime_flag(pd.Series({"regime_eager": np.nan, "regime_compiled": 1.38}), Catalog("en"),
                       mode="reduce-overhead") == "regime shift (compiled reduce-overhead ×1.38)"


def test_replicates_are_flagged_only_where_there_are_several():
    assert steadiness_flags(pd.Series({"replicates": 3.0}), Catalog("en")) == ["3 replicates"]
    assert steadiness_flags(pd.Series({"replicates": 1}), Catalog("en")) == []
    assert steadiness_flags(pd.Series({"replicates": np.nan}), Catalog("ar")) == []  # an eager row from pairs
    assert all(Catalog(locale).t("flag_replicates", count="3") for locale in ("ar", "es"))


def test_a_compiled_cell_whose_record_kept_no_blocks_says_its_regime_was_not_checked():
    unchecked = pd.Series({"status": "ok", "regime_checked": np.bool_(False), "replicates": 1})
    assert steadiness_flags(unchecked, Catalog("en")) == ["regime not checked (its record kept no blocks)"]
    assert steadiness_flags(pd.Series({**unchecked, "regime_checked": True}), Catalog("en")) == []
    assert steadiness_flags(pd.Series({"status": "ok", "replicates": 1}), Catalog("es")) == []  # not a records' row
    assert all(Catalog(locale).t("flag_regime_unchecked") for locale in ("ar", "es"))


def test_the_records_say_whether_their_blocks_were_kept():
    import json

    from sample_records import cpu_and_gpu_records
    from bench_utils.records.schema import Record
    from bench_utils.report.replicate_rows import replicate_columns

    compiled = next(r for r in cpu_and_gpu_records("default") if r["cell"]["compile_mode"] == "default")
    assert replicate_columns(Record.of(json.loads(json.dumps(compiled))))["regime_checked"] is False  # no calls kept
    eager = next(r for r in cpu_and_gpu_records("default") if r["cell"]["compile_mode"] == "eager")
    assert replicate_columns(Record.of(json.loads(json.dumps(eager))))["regime_checked"] is None  # no pairs at all
