import json
import string

import pytest

from bench_utils.report import i18n
from bench_utils.report.i18n import Catalog, available_locales


def placeholders(message):
    return {name for _, name, _, _ in string.Formatter().parse(message) if name}


def test_at_least_english_arabic_and_one_more():
    assert {"en", "ar"} <= set(available_locales()) and ({"es", "zh"} & set(available_locales()))


@pytest.mark.parametrize("locale", available_locales())
def test_every_locale_has_every_key_with_the_same_placeholders(locale):
    english, other = Catalog("en").messages, Catalog(locale).messages
    assert set(other) == set(english)
    for key, message in english.items():
        assert placeholders(other[key]) == placeholders(message), f"{locale}:{key}"


def test_a_locale_missing_a_key_fails(tmp_path, monkeypatch):
    english = json.loads((i18n.LOCALES_DIR / "en.json").read_text(encoding="utf-8"))
    (tmp_path / "en.json").write_text(json.dumps(english), encoding="utf-8")
    del english["col_model"]
    (tmp_path / "fr.json").write_text(json.dumps(english), encoding="utf-8")
    monkeypatch.setattr(i18n, "LOCALES_DIR", tmp_path)
    i18n._load.cache_clear()
    try:
        with pytest.raises(KeyError, match="locale 'fr' has no message 'col_model'"):
            Catalog("fr").t("col_model")
        (tmp_path / "xx.json").write_text(json.dumps(english), encoding="utf-8")
        with pytest.raises(ValueError, match="Babel has no locale data for 'xx'"):
            Catalog("xx")
    finally:
        i18n._load.cache_clear()


def test_directions_and_number_formats():
    assert Catalog("ar").direction == "rtl" and Catalog("en").direction == "ltr"
    # from Babel's locale data, in the language itself
    assert (Catalog("ar").language_name, Catalog("es").language_name) == ("العربية", "Español")
    assert Catalog("en").number(1234.567) == "1,234.57"
    assert Catalog("es").number(1234.567) == "1.234,57"
    assert Catalog("en").percent(0.05) == "5%"
    assert "حجم الدفعة" in Catalog("ar").t("table_caption", device="H100", batch=4)


def test_unknown_locale():
    with pytest.raises(ValueError, match="no catalog for locale 'fr'"):
        Catalog("fr")


MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "eager"]


@pytest.mark.parametrize("locale", available_locales())
def test_every_compile_mode_has_a_name_that_keeps_the_torch_option(locale):
    catalog = Catalog(locale)
    for mode in MODES:
        assert f"mode_{mode}" in catalog.messages and mode in catalog.mode_name(mode)
    assert catalog.mode_name("some-new-mode") == "some-new-mode"  # unknown: as written
    assert catalog.mode_name("default", code=lambda name: f"`{name}`").count("`default`") == 1


def test_compile_modes_and_device_words_are_translated():
    assert [Catalog("en").mode_name(mode) for mode in MODES] == MODES
    for locale in ("ar", "es"):
        catalog = Catalog(locale)
        assert catalog.mode_name("default") != "default"
        assert catalog.mode_name("max-autotune").endswith("(max-autotune)")
    assert Catalog("es").mode_name("default") == "predeterminado (default)"
    assert Catalog("ar").mode_name("default") == "الافتراضي (default)"
    assert Catalog("es").t("device_unknown") == "desconocido"
    for key in ("device_cpu", "device_gpu", "device_unknown"):
        text = Catalog("ar").t(key, model="X") if key == "device_cpu" else Catalog("ar").t(key)
        assert not {"CPU", "GPU", "unknown"} & set(text.replace("(", " ").replace(")", " ").split())
