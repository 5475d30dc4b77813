"""What a published page may hold, whatever its records hold: the HTML its Markdown makes, and no script.

The second wall (``markdown.ltr`` escapes every value first): each Markdown output, once nbconvert has made it HTML,
keeps only the elements and attributes Markdown makes, with links to the page's own anchors only; anything else is
shown as text. The page's Content-Security-Policy says it runs no script and fetches nothing.
"""

from __future__ import annotations

# default-src 'none': no script, frame, font, connection or object from anywhere; images and styles only as the
# page carries them (its plots are data: URLs, nbconvert's styles are inline and draw their icons from data: URLs)
CONTENT_SECURITY_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; "
                           "base-uri 'none'; form-action 'none'")

# What mistune (nbconvert's Markdown) makes of the report's Markdown
TAGS = frozenset({"a", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
                  "li", "ol", "p", "pre", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"})
ATTRIBUTES = {"*": ["class", "id", "dir", "lang"], "a": ["href"], "td": ["style"], "th": ["style"]}


def sanitized(html: str) -> str:
    """``html`` with only ``TAGS`` and ``ATTRIBUTES`` kept, links to no other page or scheme (``#anchor`` only),
    comments dropped, and any other element escaped into text."""
    import bleach
    from bleach.css_sanitizer import CSSSanitizer

    return bleach.clean(html, tags=TAGS, attributes=ATTRIBUTES, protocols=[], strip_comments=True,
                        css_sanitizer=CSSSanitizer(allowed_css_properties=["text-align"]))
