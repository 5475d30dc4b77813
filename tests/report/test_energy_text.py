import math

from bench_utils.report.energy_text import joules_text, throttled_flag
from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import ltr


def test_a_joules_figure_says_its_windows_pace_and_its_throttles_and_nothing_where_neither():
    catalog = Catalog("en")
    assert joules_text(3.037, 14.75, 7.08, (), catalog) == "3.037 (window 14.75 ms a call, timed 7.08 ms)"
    assert joules_text(39.271, 63.7, 63.34, ("SwPowerCap",), catalog) == "39.271 (throttled: SwPowerCap)"
    assert joules_text(1.095, 4.90, 5.25, (), catalog) == "1.095"  # within 1.25x: one pace
    assert joules_text(None, 14.75, 7.08, ("SwPowerCap",), catalog) == "–"  # no figure, nothing to qualify
    assert joules_text(1.0, math.nan, 7.08, math.nan, catalog) == "1.000"  # an eager row made from pairs: NaN


def test_the_throttle_flag_names_the_reasons_in_the_pages_language():
    for locale in ("en", "ar", "es"):
        catalog = Catalog(locale)
        assert throttled_flag(("SwPowerCap",), catalog) == catalog.t("flag_throttled",
                                                                      reasons=ltr("SwPowerCap", catalog))
        assert throttled_flag((), catalog) == "" and throttled_flag(None, catalog) == ""
