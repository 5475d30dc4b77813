import re

from bench_utils.report.i18n import Catalog
from bench_utils.report.markdown import LRI, PDI, environment_label, mode_label


def test_environment_labels_translate_the_device_words_and_keep_names_left_to_right():
    en, es, ar = Catalog("en"), Catalog("es"), Catalog("ar")
    # English: frame's own names, unchanged
    for environment in ("CPU (AMD EPYC)", "CPU (unknown)", "GPU", "NVIDIA H100 80GB HBM3",
                        "CPU (EPYC) · torch 2.15.0", "GPU · torch 2.14.1"):
        assert environment_label(environment, en) == environment
    assert environment_label("CPU (unknown)", es) == "CPU (desconocido)"
    assert environment_label("CPU (AMD EPYC) · torch 2.15.0", es) == "CPU (AMD EPYC) · torch 2.15.0"
    assert environment_label("CPU (AMD EPYC)", ar) == f"وحدة المعالجة المركزية ({LRI}AMD EPYC{PDI})"
    assert environment_label("CPU (unknown)", ar) == "وحدة المعالجة المركزية (غير معروف)"
    assert environment_label("GPU · torch 2.15.0", ar) == f"وحدة معالجة الرسومات · {LRI}torch 2.15.0{PDI}"
    assert environment_label("NVIDIA H100", ar) == f"{LRI}NVIDIA H100{PDI}"  # a GPU's name as recorded
    # figures take no isolates
    assert environment_label("CPU (AMD EPYC) · torch 2.15.0", ar, isolate=False) == \
        "وحدة المعالجة المركزية (AMD EPYC) · torch 2.15.0"


def test_mode_labels_keep_the_torch_option_name():
    assert mode_label("reduce-overhead", Catalog("en")) == "reduce-overhead"
    assert mode_label("reduce-overhead", Catalog("es")) == "menos sobrecarga (reduce-overhead)"
    assert mode_label("reduce-overhead", Catalog("ar")) == f"تقليل الحمل الزائد ({LRI}reduce-\u2060overhead{PDI})"
    assert mode_label("some-new-mode", Catalog("ar")) == f"{LRI}some-\u2060new-\u2060mode{PDI}"  # as written


def test_a_region_no_figure_could_see_says_so_and_one_not_measured_is_a_dash():
    from bench_utils.report.region_memory import CPU_ALLOCATOR, NOT_MEASURABLE
    from bench_utils.report.markdown import region_mib

    assert region_mib(1.5 * 2**20, CPU_ALLOCATOR, Catalog("en")) == "1.5"
    assert region_mib(None, NOT_MEASURABLE, Catalog("es")) == "no medible aquí"
    assert region_mib(None, None, Catalog("en")) == "–"


HOSTILE_TEXT = ['<img src=x onerror=alert(1)>', "<script>alert(1)</script>", "[a](javascript:alert(1))",
                "![t](http://tracker.example/p.png)", "_em_ *strong* ~~gone~~ `code` $x^2$", "# heading", "a\nb\r\n<b>c</b>",
                "&lt;entity&gt; &amp;", "\\`\\*", "http://link.example/x", "detr_r50 timm:resnet18", "1,234.56×"]


def _html_and_text(markdown: str) -> tuple[list[str], str]:
    """The elements a permissive Markdown renderer (raw HTML passed through, as many documentation sites do) makes of
    ``markdown``, and the text it shows."""
    from html.parser import HTMLParser

    import mistune

    class Elements(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found, self.text = [], []

        def handle_starttag(self, tag, attrs):
            self.found.append(tag)

        def handle_data(self, data):
            self.text.append(data)

    parser = Elements()
    parser.feed(mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])(markdown))
    return parser.found, "".join(parser.text).strip()  # the parser reads entities as their characters


def test_a_value_is_shown_as_exactly_its_text_and_makes_no_element():
    from bench_utils.report.markdown import ltr, plain

    for text in HOSTILE_TEXT:
        elements, shown = _html_and_text(f"before {plain(text)} after")
        assert elements == ["p"], (text, elements)
        one_line = re.sub(r"[\r\n]", " ", text)  # a line break: a space
        assert shown == f"before {one_line} after", (text, shown)
    for text in ("detr_r50", "timm:resnet18", "1,234.56×", "-28.78", "reduce-overhead"):
        assert plain(text) == text  # names and numbers read as written in the Markdown too
    arabic = ltr("<b>x</b>", Catalog("ar"))
    assert arabic == f"{LRI}&lt;b&gt;x&lt;/b&gt;{PDI}"


def test_a_table_cell_holding_markup_stays_one_cell_of_text():
    from bench_utils.report.markdown import markdown_table, plain

    elements, shown = _html_and_text(markdown_table(["a", "b"], [[plain("x | y\n| z"), plain("<i>w</i>")]]))
    assert elements.count("td") == 2 and "i" not in elements
    assert "x | y | z" in shown and "<i>w</i>" in shown


def test_code_shows_its_text_whatever_backticks_it_holds():
    from bench_utils.report.markdown import code

    for text in ("study/results.jsonl", "a`b", "``x``", "<script>"):
        elements, shown = _html_and_text(code(text, Catalog("en")))
        assert elements == ["p", "code"] and shown == text, (text, elements, shown)
    assert code("f", Catalog("ar")) == f"{LRI}`f`{PDI}"


def test_markdown_html_escapes_raw_html_and_drops_script_links():
    from bench_utils.report.markdown import markdown_html

    html = markdown_html('<img src=x onerror=alert(1)> [a](javascript:alert(1))')
    assert "<img" not in html and "javascript:" not in html and "&lt;img" in html


def test_a_records_invisible_and_control_characters_are_shown_or_dropped_and_the_pages_own_isolates_stay():
    from bench_utils.report.markdown import code, environment_label, isolated, ltr, plain

    # U+202E turned "DMA" into "AMD" on screen; a record's U+2069 closed the Arabic page's own isolate early
    assert plain("\u202eDMA") == "&lt;U+202E&gt;DMA" and plain("a\u200bc") == "a&lt;U+200B&gt;c"
    assert ltr("a\u2069b", Catalog("en")) == "a&lt;U+2069&gt;b"  # a record's value: its own isolates shown
    assert plain(f"x {LRI}y{PDI}") == f"x {LRI}y{PDI}"  # a text of isolated values (an alt text): the page's kept
    assert plain("x\x00y\tz\r\nw") == "xy z  w"  # NUL dropped, line breaks a space
    arabic = Catalog("ar")
    shown = ltr("H200\u2069 \u202e", arabic)
    assert shown.count(LRI) == 1 and shown.count(PDI) == 1 and shown.startswith(LRI) and shown.endswith(PDI)
    assert isolated("alt\x00text\u202e", Catalog("en")) == "alttext<U+202E>"  # an alt text: no NUL, visible
    assert code("f\u2066x", Catalog("en")) == "`f<U+2066>x`"
    assert "\u202e" not in environment_label("CPU (\u202eDMA)", Catalog("en"), isolate=False)


def test_no_autolink_is_made_of_a_records_text_under_githubs_markdown():
    from bench_utils.report.markdown import plain

    # cmark-gfm (GitHub's) links www.host and scheme://host in running text; an escaped dot or colon is text
    assert plain("see www.evil.example or WWW.x.example") == "see www\\.evil.example or WWW\\.x.example"
    assert plain("https://evil.example/x") == "https\\://evil.example/x"
    assert plain("awww.example") == "awww.example"  # inside a word: no www to link
