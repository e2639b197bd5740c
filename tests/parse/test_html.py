"""Tests for stages.parse.html: hierarchy, leaves, links, line ranges and
hostile input, on handmade pages and on the sample changelog."""

from __future__ import annotations

from pathlib import Path

from strata.stages.parse.html import parse_html
from strata.stages.parse.model import Draft, ParsedFile
from tests.parse.drafts import drafts_of_kind, parent_of, section_titled

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"




# A small page whose line numbers the tests below pin down exactly.
PAGE = """\
<!DOCTYPE html>
<html>
<head>
<title>Gauge guide</title>
<style>.x { color: red } STYLETEXT</style>
<script>var t = "SCRIPTTEXT";</script>
</head>
<body>
<p>Before   any
heading.</p>
<h1 id="top">Guide</h1>
<p>Read <a href="intro.md">the intro</a> or <a href="https://example.com/x">elsewhere</a>.</p>
<ul>
  <li>flat one</li>
  <li>flat two</li>
</ul>
<section id="setup-sec">
<h2>Setup</h2>
<p>Install it.</p>
<pre><code class="language-python">import tidewater
print(tidewater.__version__)
</code></pre>
<p>After the code.</p>
<h3>Details</h3>
<ol>
  <li>Step one
    <ul>
      <li>sub a</li>
      <li>sub <a href="sub.md#b">b</a></li>
    </ul>
  </li>
  <li>Step two</li>
</ol>
</section>
<h2>Data</h2>
<table>
  <tr><th>Name</th><th>Unit</th></tr>
  <tr><td>level</td><td>m</td></tr>
  <tr><td>pressure</td><td>hPa</td></tr>
</table>
<figure>
  <img src="img/chart.png" alt="">
  <figcaption>Tide chart</figcaption>
</figure>
<p>See <img src="../../up.png" alt="Up"> inline.</p>
<noscript>NOSCRIPTTEXT</noscript>
<!-- COMMENTTEXT -->
<svg><title>SVGTITLE</title><text>SVGTEXT</text></svg>
<template><p>TEMPLATETEXT</p></template>
</body>
</html>
"""


def _page() -> ParsedFile:
    return parse_html(PAGE, "docs/guide.html")


def test_root_title_text_and_range():
    pf = _page()
    root = pf.root
    assert (root.kind, root.subkind, root.title) == ("file", "html", "Gauge guide")
    assert root.text == "Before any heading."  # whitespace collapsed, only pre-heading text
    assert (root.start_line, root.end_line) == (1, len(PAGE.splitlines()))
    assert pf.notes == []


def test_sections_nest_by_heading_level_with_exact_lines():
    pf = _page()
    guide, setup, details, data = (section_titled(pf, t) for t in ("Guide", "Setup", "Details", "Data"))
    assert [c.title for c in pf.root.children] == ["Guide"]
    assert parent_of(pf, setup) is guide and parent_of(pf, data) is guide
    assert parent_of(pf, details) is setup
    assert (guide.subkind, setup.subkind, details.subkind) == ("h1", "h2", "h3")
    assert (guide.start_line, guide.end_line) == (11, 45)  # skipped elements are not content
    assert (setup.start_line, setup.end_line) == (18, 34)  # ends at </section>
    assert (details.start_line, details.end_line) == (24, 34)
    assert (data.start_line, data.end_line) == (35, 45)
    assert setup.slug == "setup" and guide.attrs["anchor"] == "guide"
    assert guide.attrs["anchors"] == ["guide", "top"]
    assert setup.attrs["anchors"] == ["setup", "setup-sec"]  # from the enclosing <section id>
    assert details.attrs["anchors"] == ["details"]  # that id was claimed by Setup


def test_flat_list_stays_text_nested_list_item_becomes_section():
    pf = _page()
    guide = section_titled(pf, "Guide")
    assert guide.text == "Guide\nRead the intro or elsewhere.\n- flat one\n- flat two"
    assert not [c for c in guide.children if c.subkind == "li"]
    step = section_titled(pf, "Step one")
    details = section_titled(pf, "Details")
    assert step.subkind == "li" and parent_of(pf, step) is details
    assert (step.start_line, step.end_line) == (26, 31)
    assert step.text == "Step one\n- sub a\n- sub b"
    assert step.attrs["list"] == "ol" and step.attrs["position"] == 1
    assert details.text == "Details\n2. Step two"  # the flat sibling stays text, numbered


def test_code_block_language_lines_and_context():
    pf = _page()
    (code,) = drafts_of_kind(pf, "code")
    setup = section_titled(pf, "Setup")
    assert parent_of(pf, code) is setup
    assert code.language == "python" and code.subkind == "pre"
    assert code.text == "import tidewater\nprint(tidewater.__version__)"
    assert (code.start_line, code.end_line) == (20, 22)
    assert code.attrs["context_before"] == "Install it."
    assert code.attrs["context_after"] == "After the code."
    assert "import tidewater" not in setup.text
    assert setup.text == "Setup\nInstall it.\nAfter the code."


def test_lang_class_variants():
    pf = parse_html('<pre class="lang-TS">let x = 1;</pre><pre>plain</pre>', "a.html")
    langs = [c.language for c in drafts_of_kind(pf, "code")]
    assert langs == ["ts", None]


def test_table_header_rows_and_markdown_text():
    pf = _page()
    (table,) = drafts_of_kind(pf, "table")
    assert parent_of(pf, table) is section_titled(pf, "Data")
    assert table.subkind == "html"
    assert table.attrs["header"] == ["Name", "Unit"] and table.attrs["rows"] == 2
    assert table.text == ("| Name | Unit |\n| --- | --- |\n| level | m |\n| pressure | hPa |")
    assert (table.start_line, table.end_line) == (36, 40)
    assert "pressure" not in section_titled(pf, "Data").text


def test_table_without_th_uses_first_row_and_escapes_pipes():
    pf = parse_html("<table><tr><td>a|b</td><td>c</td></tr><tr><td>1</td></tr></table>", "t.html")
    (table,) = drafts_of_kind(pf, "table")
    assert table.attrs["header"] == ["a|b", "c"] and table.attrs["rows"] == 1
    assert table.text.splitlines() == ["| a\\|b | c |", "| --- | --- |", "| 1 |  |"]


def test_images_resolution_figcaption_and_inline_context():
    pf = _page()
    fig, inline = drafts_of_kind(pf, "image")
    assert fig.subkind == "figure"
    assert fig.text == fig.title == "Tide chart"  # no alt: the caption
    assert fig.attrs["caption"] == "Tide chart"
    assert fig.attrs["src"] == "img/chart.png" and fig.attrs["resolved"] == "docs/img/chart.png"
    assert (fig.start_line, fig.end_line) == (41, 44)
    assert inline.text == "Up" and inline.attrs["alt"] == "Up"
    assert inline.attrs["resolved"] is None and inline.attrs["outside_root"] is True
    assert inline.start_line == inline.end_line == 45
    # an inline image's sentence counts as the text before it
    assert inline.attrs["context_before"] == "See inline."
    data = section_titled(pf, "Data")
    assert data.text == "Data\nSee inline."  # caption and alt are not prose


def test_image_file_name_when_no_alt_and_external():
    pf = parse_html('<img src="pics/a%20b.png"><img src="https://x.org/c.png" alt="C">', "d/p.html")
    a, c = drafts_of_kind(pf, "image")
    assert a.text == "a b.png" and a.attrs["resolved"] == "d/pics/a b.png"
    assert c.attrs["external"] is True and c.attrs["resolved"] is None


def test_links_are_references_from_their_section():
    pf = _page()
    refs = [(r.source.title, r.target, r.type, r.relation, r.attrs["text"], r.attrs["line"])
            for r in pf.references]
    assert refs == [
        ("Guide", "intro.md", "jump", "links_to", "the intro", 12),
        ("Step one", "sub.md#b", "jump", "links_to", "b", 29),
    ]


def test_dropped_elements_are_absent_everywhere():
    pf = _page()
    for d in pf.root.walk():
        blob = d.title + d.text + str(d.attrs)
        for marker in ("STYLETEXT", "SCRIPTTEXT", "NOSCRIPTTEXT", "COMMENTTEXT", "SVGTITLE", "SVGTEXT",
                       "TEMPLATETEXT", "color: red"):
            assert marker not in blob, (marker, d.kind, d.title)


def test_title_falls_back_to_first_h1_then_stem():
    assert parse_html("<h2>Two</h2><h1>One</h1>", "x/a.html").root.title == "One"
    pf = parse_html("<p>just text</p>", "x/plain-page.html")
    assert pf.root.title == "plain-page" and pf.root.text == "just text"


def test_block_elements_break_lines_and_br():
    pf = parse_html("<div>a<br>b</div><div>c <b>bold</b>\n  d</div><p>e</p>", "a.html")
    assert pf.root.text == "a\nb\nc bold d\ne"


def test_duplicate_headings_get_unique_slugs_and_anchors():
    pf = parse_html("<h1>T</h1><h2>Same</h2><h2>Same</h2>", "a.html")
    h2s = [d for d in drafts_of_kind(pf, "section") if d.subkind == "h2"]
    assert [d.slug for d in h2s] == ["same", "same-1"]
    assert [d.attrs["anchor"] for d in h2s] == ["same", "same-1"]


def test_permalink_anchor_left_out_of_heading_title():
    pf = parse_html('<h2 id="x">Install<a class="headerlink" href="#x">¶</a></h2>', "a.html")
    (h2,) = drafts_of_kind(pf, "section")
    assert h2.title == "Install" and pf.references == []


def test_long_list_item_title_truncated():
    long = "word " * 40
    pf = parse_html(f"<ul><li>{long}<ul><li>x</li></ul></li></ul>", "a.html")
    (li,) = [d for d in drafts_of_kind(pf, "section") if d.subkind == "li"]
    assert len(li.title) <= 80 and li.title.startswith("word word")


# ---------------------------------------------------------------- hostile input


def _sane(pf: ParsedFile) -> None:
    assert pf.root.kind == "file"
    for d in pf.root.walk():
        assert d.title.strip() and d.text.strip()
        assert d.start_line is not None and 1 <= d.start_line <= d.end_line


def test_malformed_html_never_raises():
    docs = [
        "<h1>Title<p>unclosed <b>bold <i>both</h1><p>next",
        "</div></div><p>stray closers</p></span></li></table>",
        "<ul><li>a<li>b<ul><li>c</ul><li>d</ul>",
        "<table><tr><td>1<td>2<tr><td>3</table>",
        "<pre><code class='language-py'>x = 1",
        "<a href='x.md'>never closed <h2>Heading",
        "<<>><</ <!-- unterminated",
        "<img src=><img><figure><figcaption>only caption</figcaption></figure>",
        "<script>never closed",
        "\x00\ufeff<p>odd\rline\r\nendings</p>",
        "",
    ]
    for doc in docs:
        _sane(parse_html(doc, "bad.html"))


def test_deep_nesting_is_linear_and_safe():
    pf = parse_html("<div>" * 5000 + "deep text" + "</div>" * 5000, "deep.html")
    assert pf.root.text == "deep text"
    pf = parse_html("<h1>T</h1>" + "<div>" * 5000 + "<p>unclosed", "deep2.html")
    _sane(pf)
    assert any("unclosed" in n for n in pf.notes)
    pf = parse_html("<ul><li>item" * 3000, "lists.html")  # list bomb
    _sane(pf)
    depth = max(_depth(pf.root), 0)
    assert depth <= 12
    pf = parse_html("<table><tr><td>" * 2000 + "x", "tables.html")
    _sane(pf)


def _depth(root: Draft) -> int:
    best, work = 0, [(root, 0)]
    while work:
        d, n = work.pop()
        best = max(best, n)
        work.extend((c, n + 1) for c in d.children)
    return best


def test_bytes_and_bad_types_fall_back_with_note():
    pf = parse_html(b"<h1>Bytes</h1>", "b.html")  # type: ignore[arg-type]
    assert pf.root.title == "Bytes"
    pf = parse_html("<h1>x</h1>", "c.html", context_lines="many")  # type: ignore[arg-type]
    assert pf.root.kind == "file" and pf.notes and pf.notes[0].startswith("html parse failed")


# ---------------------------------------------------------------- sample page


def test_sample_changelog():
    text = (SAMPLE / "docs" / "changelog.html").read_text(encoding="utf-8")
    pf = parse_html(text, "docs/changelog.html")
    _sane(pf)
    assert pf.notes == []
    assert pf.root.title == "Tidewater changelog"
    h1 = section_titled(pf, "Changelog")
    assert [c.subkind for c in h1.children] == ["h2", "h2", "h2"]
    fixes = section_titled(pf, "Fixes")
    assert fixes.subkind == "li" and fixes.text.count("\n- ") == 3
    (code,) = drafts_of_kind(pf, "code")
    assert code.language == "python" and "rename_columns" in code.text
    (table,) = drafts_of_kind(pf, "table")
    assert table.attrs["header"] == ["Column in 0.3.x", "Column in 0.4.0", "Arrow type"]
    (image,) = drafts_of_kind(pf, "image")
    assert image.attrs["resolved"] == "docs/images/tide-chart.png" and image.attrs["caption"]
    targets = {r.target: r.source.title for r in pf.references}
    assert targets == {"getting-started.md": "Changelog", "calibration.md#barometric-drift": "Documentation"}
    for d in pf.root.walk():
        assert "tidewaterDocs" not in d.text and "font-family" not in d.text
