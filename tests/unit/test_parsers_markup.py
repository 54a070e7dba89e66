"""parse() for HTML and DOCX: main text only, sections by heading, titles, damaged files."""

from __future__ import annotations

import io
import zipfile

import pytest

from retrieval_core.documents.chunking import chunk_blocks
from retrieval_core.parsers import parse
from retrieval_core.parsers.detect import DOCX, HTML
from retrieval_core.parsers.exceptions import DocumentLimitError, DocumentParseError, EmptyDocumentError
from tests.files import Heading, Table, docx_bytes, html_bytes

PAGE = """
<header><a href="/">Acme home</a></header>
<nav><ul><li>Docs menu</li><li>Blog menu</li></ul></nav>
<script>var tracking = "script text";</script>
<style>p { color: red }</style>
<noscript>Enable JavaScript</noscript>
<template><p>template text</p></template>
<main>
  <h1>Guide</h1>
  <p>Welcome to <b>the</b> guide.</p>
  <h2>Install</h2>
  <h3>Linux</h3>
  <p>Use apt.<br>Then run it.</p>
  <table><tr><th>OS</th><th>Command</th></tr><tr><td>Linux</td><td>apt install acme</td></tr></table>
  <div hidden>hidden text</div>
  <form><label>Search the docs</label><input name="q"></form>
  <h2>Upgrade</h2>
  <p>Run the upgrade.</p>
</main>
<aside>Related posts</aside>
<footer>Copyright Acme</footer>
"""


def test_html_reads_main_text_by_heading_path() -> None:
    parsed = parse(html_bytes(PAGE, title="Acme Guide"), "text/html", "guide.html")
    assert parsed.content_type == HTML
    [document] = parsed.documents
    assert document.title == "Acme Guide"
    assert document.metadata == {"contentType": HTML}
    assert [b.metadata["section"] for b in document.blocks] == [
        "Guide",
        "Guide > Install > Linux",
        "Guide > Upgrade",
    ]
    linux = document.blocks[1].text
    assert "Use apt.\nThen run it." in linux
    assert "OS | Command\nLinux | apt install acme" in linux
    assert "Welcome to the guide." in document.blocks[0].text


@pytest.mark.parametrize(
    "absent",
    ["script text", "color: red", "Enable JavaScript", "template text", "Docs menu", "Acme home",
     "hidden text", "Search the docs", "Related posts", "Copyright Acme"],
)  # fmt: skip
def test_html_boilerplate_is_absent(absent: str) -> None:
    [document] = parse(html_bytes(PAGE, title="Acme Guide"), None, "guide.html").documents
    assert absent not in document.text


def test_html_without_main_reads_the_body_minus_boilerplate_and_article_wins_when_present() -> None:
    body = "<nav>Menu</nav><h1>Post</h1><p>Body text.</p><footer>Foot</footer>"
    [document] = parse(html_bytes(body), None, "p.htm").documents
    assert document.text == "Post\n\nBody text."
    assert document.title == "Post"  # no <title>: the first <h1>
    body = "<div>Sidebar junk</div><article><h2>Story</h2><p>Story text.</p></article>"
    [document] = parse(html_bytes(body), None, "p.HTM").documents
    assert document.text == "Story\n\nStory text."


def test_html_keeps_an_articles_own_header_and_a_form_wrapping_the_whole_page() -> None:
    body = (
        "<header>Site banner</header>"
        "<article><header><h1>Release notes</h1><p>By Ann</p></header><p>Version 2 is out.</p>"
        "<footer>Tags: release</footer></article><footer>Site footer</footer>"
    )
    [document] = parse(html_bytes(body), None, "post.html").documents
    assert document.text == "Release notes\n\nBy Ann\n\nVersion 2 is out.\n\nTags: release"
    body = "<form id='aspnetForm'><h1>Orders</h1><p>Orders ship daily.</p><form><input>Search</form></form>"
    [document] = parse(html_bytes(body), None, "orders.aspx.html").documents
    assert document.text == "Orders\n\nOrders ship daily."


def test_html_chunks_keep_their_section() -> None:
    long = " ".join(f"Step {i} of the install." for i in range(60))
    body = f"<h1>A</h1><p>{long}</p><h2>B</h2><p>{long}</p>"
    [document] = parse(html_bytes(body), None, "x.html").documents
    chunks = chunk_blocks(document.blocks, max_chars=200, overlap=20)
    assert {c.metadata["section"] for c in chunks} == {"A", "A > B"}
    texts = {b.metadata["section"]: b.text for b in document.blocks}
    assert all(c.text in texts[c.metadata["section"]] for c in chunks)


def test_html_charset_from_meta_and_from_the_declared_type() -> None:
    page = html_bytes("<p>Crème brûlée</p>", title="Café", encoding="windows-1252")
    [document] = parse(page, None, "menu.html").documents
    assert document.title == "Café" and document.text == "Crème brûlée"
    raw = "<html><body><p>Crème</p></body></html>".encode("latin-1")
    assert parse(raw, "text/html; charset=ISO-8859-1", None).documents[0].text == "Crème"


def test_deeply_nested_html_is_read_and_absurd_nesting_refused() -> None:
    def nested(depth: int) -> bytes:
        return html_bytes("<div>" * depth + "Deep text." + "</div>" * depth)

    # libxml2 alone drops whatever lies deeper than 256 elements; page builders nest that deep.
    assert parse(nested(400), None, "deep.html").documents[0].text == "Deep text."
    with pytest.raises(
        DocumentLimitError, match="elements nested at least 513, over the 512 DOCUMENT_MAX_DEPTH"
    ):
        parse(nested(5000), None, "absurd.html")


def test_html_with_only_boilerplate_is_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        parse(html_bytes("<nav>Menu</nav><script>x()</script>", title="Nothing"), None, "x.html")


# A Sphinx page as it is published: permalinks after headings and signatures, navigation around the body.
SPHINX_PAGE = """
<a class="skip-link" href="#content">Skip to content</a>
<div class="related" role="navigation"><a href="genindex.html">index</a> | <a href="next.html">next</a></div>
<div class="body" role="main">
<section id="sorting"><h1>Sorting HOW TO<a class="headerlink" href="#sorting" title="Link">\u00b6</a></h1>
<p>Python lists have a built-in <a href="#basics">sort method</a>.</p>
<section id="basics"><h2>Sorting Basics<a class="headerlink" href="#basics">\u00b6</a></h2>
<dl><dt id="sorted">sorted(iterable)<a class="headerlink" href="#sorted">\u00b6</a></dt>
<dd>A new list.</dd></dl>
<h3 id="keys">Key functions<a class="hash-link" href="#keys" aria-label="Direct link">\u200b</a></h3>
<p>Use a key.<a href="#keys">#</a> <a href="#sorting">\u00a7</a> <a href="#top">Back to top</a></p>
</section></section></div>
<div class="sphinxsidebar" role="navigation"><h3>Table of Contents</h3><p>Sorting Basics</p></div>
<div role="search"><p>Quick search</p></div>
"""


def test_html_permalinks_and_navigation_chrome_are_not_text() -> None:
    [document] = parse(html_bytes(SPHINX_PAGE, title="Sorting HOW TO"), None, "sorting.html").documents
    assert [block.metadata["section"] for block in document.blocks] == [
        "Sorting HOW TO",
        "Sorting HOW TO > Sorting Basics",
        "Sorting HOW TO > Sorting Basics > Key functions",
    ]
    assert [block.text for block in document.blocks] == [
        "Sorting HOW TO\n\nPython lists have a built-in sort method.",
        "Sorting Basics\n\nsorted(iterable)\nA new list.",
        "Key functions\n\nUse a key.",
    ]


# DOCX


def test_docx_paragraphs_and_tables_in_order_with_section_paths() -> None:
    data = docx_bytes(
        [
            "Preface before any heading.",
            Heading("Guide", 1),
            "Welcome.",
            Heading("Install", 2),
            Heading("Linux", 3),
            "Use apt.",
            Table([["OS", "Command"], ["Linux", "apt install acme"]]),
            "After the table.",
            Heading("Upgrade", 2),
            "Run the upgrade.",
        ],
        title="Acme Guide",
    )
    parsed = parse(data, None, "guide.DOCX")
    assert parsed.content_type == DOCX
    [document] = parsed.documents
    assert document.title == "Acme Guide"
    assert document.metadata == {"contentType": DOCX}
    assert [b.metadata.get("section") for b in document.blocks] == [
        None,
        "Guide",
        "Guide > Install > Linux",
        "Guide > Upgrade",
    ]
    assert (
        document.blocks[2].text
        == "Linux\n\nUse apt.\n\nOS | Command\nLinux | apt install acme\n\nAfter the table."
    )


def test_docx_title_falls_back_to_the_title_style_then_the_first_heading() -> None:
    [document] = parse(docx_bytes([Heading("Styled Title", 0), "Text."]), None, "a.docx").documents
    assert document.title == "Styled Title"
    [document] = parse(docx_bytes([Heading("First Heading", 1), "Text."]), None, "a.docx").documents
    assert document.title == "First Heading"


def test_docx_named_txt_is_read_as_docx() -> None:
    parsed = parse(docx_bytes(["Hello."]), "text/plain", "letter.txt")
    assert parsed.content_type == DOCX and parsed.documents[0].text == "Hello."


def test_truncated_docx_is_a_422() -> None:
    data = docx_bytes(["Some text.", Heading("H"), "More."])
    with pytest.raises(DocumentParseError) as caught:
        parse(data[: len(data) // 2], None, "cut.docx")
    assert "damaged" in caught.value.details["reason"]


def test_docx_with_a_broken_document_part_is_a_422() -> None:
    original = zipfile.ZipFile(io.BytesIO(docx_bytes(["Text."])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as broken:
        for item in original.infolist():
            content = original.read(item)
            broken.writestr(
                item, b"<w:document><unclosed" if item.filename == "word/document.xml" else content
            )
    with pytest.raises(DocumentParseError, match="damaged"):
        parse(out.getvalue(), None, "broken.docx")


def test_empty_docx_is_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        parse(docx_bytes(["", "  "]), None, "blank.docx")
