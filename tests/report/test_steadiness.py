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
