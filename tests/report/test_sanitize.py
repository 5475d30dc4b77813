"""The HTML page's second wall: its Markdown outputs keep only what Markdown makes, and it runs no script."""

from bench_utils.report.sanitize import CONTENT_SECURITY_POLICY, sanitized


def test_what_markdown_makes_is_kept():
    page = ('<h2 id="Summary">Summary<a class="anchor-link" href="#Summary">¶</a></h2><p><em>a</em> <code>b</code></p>'
            "<table><thead><tr><th>x</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>"
            "<blockquote><p>note</p></blockquote><ul><li>item</li></ul>")
    assert sanitized(page) == page


def _elements(html: str) -> list[tuple[str, list[tuple[str, str]]]]:
    from html.parser import HTMLParser

    class Elements(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found = []

        def handle_starttag(self, tag, attrs):
            self.found.append((tag, attrs))

    parser = Elements()
    parser.feed(html)
    return parser.found


def test_script_handlers_and_links_away_are_text_or_gone():
    kept = sanitized('<p>x<script>alert(1)</script><img src=x onerror="alert(1)"><a href="javascript:alert(1)">j</a>'
                     '<a href="https://elsewhere.example/">e</a><iframe src="https://x"></iframe>'
                     '<p onclick="alert(1)" style="color:red">y</p><!-- comment --></p>')
    elements = _elements(kept)
    assert {tag for tag, _ in elements} == {"p", "a"} and all(not attrs for _, attrs in elements), kept  # links: no target
    assert "&lt;script&gt;" in kept and "&lt;img" in kept  # shown as text, not run
    assert "<!--" not in kept


def test_the_page_may_run_no_script_and_fetch_nothing():
    directives = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    assert directives["default-src"] == "'none'" and "script-src" not in directives  # so: no script at all
    assert directives["img-src"] == "data:" and directives["base-uri"] == "'none'"
