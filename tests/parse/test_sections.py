"""The section builder every document format feeds (stages.parse.sections):
nesting, slugs and anchors, leaf context and table titles; and what changed
for the formats when they moved onto it."""

from __future__ import annotations

import io

import pytest

from strata.stages.parse.html import parse_html
from strata.stages.parse.model import Draft
from strata.stages.parse.sections import SectionBuilder, github_slug


def _section(title: str) -> Draft:
    return Draft(kind="section", title=title, text="")


def test_headings_nest_and_slugs_are_unique_among_siblings_anchors_in_the_document():
    root = Draft(kind="file", title="Doc", text="")
    b = SectionBuilder(root, context_lines=2)
    a, anchor_a = b.open(_section("Setup"), 1, "setup", "setup")
    b.open(_section("Linux"), 2, "linux", "linux")
    assert [s.draft.title for s in b.close(2)] == ["Linux"]
    _, anchor_again = b.open(_section("Linux"), 2, "linux", "linux")
    assert [s.draft.title for s in b.close(1)] == ["Linux", "Setup"]
    b.open(_section("Linux"), 1, "linux", "linux")
    assert [c.slug for c in a.draft.children] == ["linux", "linux-1"]  # siblings
    assert [c.slug for c in root.children] == ["setup", "linux"]  # other parent: no suffix
    assert (anchor_a, anchor_again, root.children[1].slug) == ("setup", "linux-1", "linux")
    assert b.open(_section("Linux"), 1, "linux", "linux")[1] == "linux-3"  # the document's fourth


def test_leaf_slugs_context_and_table_titles():
    root = Draft(kind="file", title="Doc", text="")
    b = SectionBuilder(root, context_lines=2)
    for key, line in enumerate(["one", "two", "Readings per station", "after one", "after two", "after three"]):
        b.prose(key, line)
    table = b.leaf(Draft(kind="table", title="", text="| a |"), 2.5)
    code = b.leaf(Draft(kind="code", title="code", text="x"), 0)
    untitled = b.leaf(Draft(kind="table", title="", text="| b |"), 0)
    captioned = b.leaf(Draft(kind="table", title="Caption", text="| c |"), 1.5)
    b.finish()
    assert [d.slug for d in root.children] == ["table-1", "code-1", "table-2", "table-3"]
    assert table.attrs["context_before"] == "two\nReadings per station"
    assert table.attrs["context_after"] == "after one\nafter two"
    assert table.title == "Readings per station"
    assert code.attrs["context_before"] == "" and code.attrs["context_after"] == "one\ntwo"
    assert untitled.title == "table in Doc" and captioned.title == "Caption"


def test_a_long_line_above_is_no_table_title_and_zero_context_lines_give_none():
    root = Draft(kind="file", title="Doc", text="")
    b = SectionBuilder(root, context_lines=0)
    b.prose(0, "word " * 30)
    t = b.leaf(Draft(kind="table", title="", text="|x|"), 1)
    b.finish()
    assert t.title == "table in Doc" and t.attrs["context_before"] == ""


def test_github_slug_lives_in_the_shared_module():
    assert github_slug("Hello, World!") == "hello-world" and github_slug("A & B") == "a--b"


def test_html_table_at_file_level_is_titled_after_the_document():
    """Bug fixed by the move: HTML named such a table "table in " (the file's title
    was only known at the end); the builder titles tables after the walk."""
    page = ("<html><head><title>Tide tables</title></head><body><table><tr><th>a</th></tr>"
            "<tr><td>1</td></tr></table></body></html>")
    table = next(d for d in parse_html(page, "t.html").root.walk() if d.kind == "table")
    assert table.title == "table in Tide tables"


def test_docx_children_are_in_document_order():
    """DOCX (and PDF) used to add a section's tables and images after its subsections;
    fed through the builder they sit where they are in the document, as in Markdown."""
    docx = pytest.importorskip("docx")
    from strata.stages.parse.docx import parse_docx

    d = docx.Document()
    d.add_heading("Gauges", 1)
    d.add_paragraph("Readings per station")
    t = d.add_table(rows=2, cols=1)
    t.cell(0, 0).text, t.cell(1, 0).text = "station", "A"
    d.add_heading("Calibration", 2)
    buf = io.BytesIO()
    d.save(buf)
    gauges = parse_docx(buf.getvalue(), "g.docx").root.children[0]
    assert [(c.kind, c.title) for c in gauges.children] == [
        ("table", "Readings per station"), ("section", "Calibration")]
