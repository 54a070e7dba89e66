"""HTML: the page's main text, one block per heading section, read by lxml. Pure: no I/O.

Boilerplate is dropped before the text is taken: scripts, styles, templates, navigation (also by
`role`), the page's header and footer, asides, forms, hidden elements, permalink anchors ("¶", "#",
"§") and "Skip to content" links. When the page marks its main content (`<main>`, `role="main"`, else
`<article>`), only that is read.

The budget (parsers/budget.py) bounds the elements and their nesting, counted once lxml has parsed the
page and before anything walks it; the walk is linear in the elements kept.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from retrieval_core.parsers.base import ParsedDocument, ParsedFile, error_summary
from retrieval_core.parsers.budget import ParseMeter
from retrieval_core.parsers.detect import HTML
from retrieval_core.parsers.exceptions import DocumentParseError
from retrieval_core.parsers.sections import SectionBlocks
from retrieval_core.parsers.text import decode_text

if TYPE_CHECKING:
    from lxml.html import HtmlElement

# Boilerplate, dropped wherever it is. `header`, `footer` and `form` are handled below (_BOILERPLATE).
_DROPPED = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "aside",
    "iframe",
    "svg",
    "button",
    "select",
    "dialog",
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Elements that begin a new paragraph of text; everything else flows inline.
_BLOCKS = frozenset(
    [
        "address",
        "article",
        "blockquote",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
        "caption",
    ]
)
_CELLS = frozenset({"td", "th"})
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_BOILERPLATE = (
    "//" + " | //".join(_DROPPED),
    "//*[@hidden] | //*[@aria-hidden='true'] | //head",
    # A page's header and footer are boilerplate; an article's or section's own (its title, byline)
    # are not.
    "//header[not(ancestor::main or ancestor::article or ancestor::section)]",
    "//footer[not(ancestor::main or ancestor::article or ancestor::section)]",
    # ASP.NET and similar pages wrap the whole body in one <form>: only a form around no content goes.
    "//form[not(.//main or .//article or .//h1 or .//h2)]",
    # Navigation a page marks by role (Sphinx's sidebar and "next | previous" bar, breadcrumbs).
    "//*[@role='navigation' or @role='search' or @role='complementary']",
    # Permalink anchors beside headings and definitions: Sphinx and MkDocs `a.headerlink` ("¶"),
    # Docusaurus `a.hash-link` (a zero-width space), "#" and "§" anchors, icon-only anchors.
    "//a[contains(concat(' ', normalize-space(@class), ' '), ' headerlink ')]",
    "//a[starts-with(normalize-space(@href), '#')"
    " and normalize-space(translate(., '\u00b6#\u00a7\u200b\U0001f517', '')) = '']",
    # In-page jumps that are chrome, not content: "Skip to content", "Jump to navigation", "Back to top".
    "//a[starts-with(normalize-space(@href), '#') and ("
    + " or ".join(
        f"starts-with(translate(normalize-space(.), '{_UPPER}', '{_UPPER.lower()}'), '{words}')"
        for words in ("skip to", "jump to", "back to top")
    )
    + ")]",
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def read_html(data: bytes, charset: str | None, meter: ParseMeter) -> ParsedFile:
    """Main text by heading section; title = `<title>`, else the first `<h1>`."""
    import lxml.html

    text = decode_text(data, HTML, charset or _meta_charset(data))
    try:
        # lxml refuses a str that still carries an XML encoding declaration (XHTML); it is decoded.
        # huge_tree: without it libxml2 silently drops everything nested deeper than 256 elements.
        parser = lxml.html.HTMLParser(huge_tree=True)
        source = re.sub(r"\A\s*<\?xml[^>]*\?>", "", text) or "<html/>"
        root = lxml.html.document_fromstring(source, parser=parser)
    except (ValueError, lxml.etree.ParserError) as error:
        raise DocumentParseError(HTML, error_summary(error)) from None
    _check_elements(root, meter)
    title = " ".join(root.findtext(".//title", default="").split())
    for path in _BOILERPLATE:
        for element in root.xpath(path):
            if element.getparent() is not None:
                element.drop_tree()
    sections = SectionBlocks()
    writer = _Writer(sections, meter)
    for part in _main_parts(root):
        writer.walk(part)
    writer.paragraph()
    blocks = sections.finish()
    if not title:
        first_h1 = root.find(".//h1")
        title = " ".join(first_h1.text_content().split()) if first_h1 is not None else ""
    return ParsedFile(HTML, [ParsedDocument(blocks, title=title, metadata={"contentType": HTML})])


def _meta_charset(data: bytes) -> str | None:
    match = _META_CHARSET.search(data[:4096])
    return match.group(1).decode("ascii") if match else None


def _check_elements(root: HtmlElement, meter: ParseMeter) -> None:
    """The page's elements and their nesting within the budget (the walk below recurses per level).

    Counted by XPath, in C: a Python object per element would cost the garbage collector of a large
    process seconds for a few hundred thousand."""
    meter.within("max_elements", int(root.xpath("count(//*)")), "HTML elements")
    limit = meter.budget.max_depth
    # Whether any element lies one level deeper than allowed: each step visits each element once.
    if root.xpath("boolean(/" + "/".join(["*"] * (limit + 1)) + ")"):
        meter.within("max_depth", limit + 1, "elements nested at least")


def _main_parts(root: HtmlElement) -> list[HtmlElement]:
    """The page's main content when it marks it; else the whole body."""
    for path in ("//main | //*[@role='main']", "//article"):
        found = root.xpath(path)
        outermost = _outermost(found)
        if outermost:
            return outermost
    return [root]


def _outermost(found: list[HtmlElement]) -> list[HtmlElement]:
    """The elements of `found` inside none of the others, in document order.

    Linear in the elements: each ancestor is looked at once, its answer remembered for the elements below
    it (20,000 elements under 500 levels would otherwise be 10 million looks, in C or in Python)."""
    marked = set(found)
    covered: dict[HtmlElement, bool] = {}  # element -> whether it or an ancestor is in `found`

    def is_covered(element: HtmlElement | None) -> bool:
        path = []
        while element is not None and element not in covered and element not in marked:
            path.append(element)
            element = element.getparent()
        answer = element is not None and (element in marked or covered[element])
        for seen in path:
            covered[seen] = answer
        return answer

    return [e for e in found if not is_covered(e.getparent())]


class _Writer:
    """Walks an element tree, turning headings into sections and block elements into paragraphs."""

    def __init__(self, sections: SectionBlocks, meter: ParseMeter) -> None:
        self.sections = sections
        self.meter = meter
        self._words: list[str] = []
        self._lines: list[str] = []

    def walk(self, element: HtmlElement) -> None:
        self.meter.tick()
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in _HEADINGS:
            self.paragraph()
            self.sections.heading(_HEADINGS[tag], element.text_content())
        elif tag == "pre":
            self.paragraph()
            self.sections.text(element.text_content())
        elif tag:
            breaks = tag in _BLOCKS
            if breaks:
                self.line()
            if element.text:
                self._words.append(element.text)
            for child in element:
                self.walk(child)
            if tag in _CELLS:
                self._words.append(" | ")
            elif tag == "br" or breaks:
                self.line()
            if tag in ("p", "ul", "ol", "table", "blockquote", "pre", "dl"):
                self.paragraph()
        if element.tail:
            self._words.append(element.tail)

    def line(self) -> None:
        """End the current line of text."""
        line = " ".join("".join(self._words).split()).strip(" |")
        if line:
            self._lines.append(line)
        self._words = []

    def paragraph(self) -> None:
        """End the current paragraph and hand it to the current section."""
        self.line()
        if self._lines:
            self.sections.text("\n".join(self._lines))
        self._lines = []
