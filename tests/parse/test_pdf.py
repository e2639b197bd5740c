"""Tests for stages.parse.pdf on PDFs built here with PyMuPDF and on the
bundled sample (data/sample/docs/field-manual.pdf)."""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from strata.stages.parse.finalize import finalize
from strata.stages.parse.model import ParsedFile
from strata.stages.parse.pdf import parse_pdf
from tests.parse.drafts import drafts_of_kind, parent_of, section_titled

SAMPLE_PDF = Path(__file__).resolve().parents[2] / "data" / "sample" / "docs" / "field-manual.pdf"


# ---------------------------------------------------------------- helpers




def _png(width: int, height: int, colour=(40, 110, 160)) -> bytes:
    img = Image.new("RGB", (width, height), colour)
    for x in range(0, width, 4):  # a little structure so it is not a flat colour
        img.putpixel((x, height // 2), (250, 250, 250))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


class _Page:
    """Top-to-bottom writer over one PyMuPDF page."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self.page = doc.new_page(width=595, height=842)
        self.y = 72.0

    def line(self, text: str, size: float = 11, bold: bool = False, gap: float = 4) -> None:
        self.page.insert_text((72, self.y + size), text, fontname="hebo" if bold else "helv", fontsize=size)
        self.y += size * 1.4 + gap

    def para(self, *lines: str) -> None:
        for text in lines:
            self.line(text, gap=0)
        self.y += 8

    def table(self, rows: list[list[str]], widths: list[float], row_h: float = 20) -> pymupdf.Rect:
        top = self.y
        for r, row in enumerate(rows):
            x = 72.0
            for cell, w in zip(row, widths):
                self.page.draw_rect(pymupdf.Rect(x, self.y, x + w, self.y + row_h), color=(0, 0, 0), width=0.6)
                self.page.insert_text((x + 4, self.y + 14), cell, fontname="hebo" if r == 0 else "helv",
                                      fontsize=10)
                x += w
            self.y += row_h
        self.y += 12
        return pymupdf.Rect(72, top, 72 + sum(widths), self.y)

    def image(self, data: bytes | None = None, width: float = 160, height: float = 120, xref: int = 0) -> int:
        rect = pymupdf.Rect(72, self.y, 72 + width, self.y + height)
        if xref:
            got = self.page.insert_image(rect, xref=xref)
        else:
            got = self.page.insert_image(rect, stream=data)
        self.y += height + 6
        return got


def _outline_pdf() -> bytes:
    doc = pymupdf.open()
    p1 = _Page(doc)
    p1.line("Harbour Gauge Guide", size=22, bold=True)
    p1.para("An introduction that comes before the first outline entry.")
    p1.line("Installation", size=16, bold=True)
    p1.para("Install the gauge on a piling.", "Use two stainless bands.")
    p1.line("2.1 Wiring", size=13, bold=True)  # outline title is just "Wiring"
    p1.para("Run the cable up the landward face.")

    p2 = _Page(doc)
    p2.line("Cable lengths and", size=13, bold=True)  # one heading wrapped over two lines
    p2.line("connectors", size=13, bold=True)
    p2.para("Choose the cable from the table below.")
    p2.table([["Cable", "Length", "Connector"],
              ["Signal cable", "12 m", "M12 plug"],
              ["Power cable", "8 m", "Screw terminal"]], [150, 100, 150])
    p2.para("Text after the table.")
    p2.line("Figure 2: The junction box seen from the pier ladder.", size=9)
    xref = p2.image(_png(120, 90))
    p2.image(_png(16, 16, (200, 30, 30)), width=16, height=16)  # an icon: too small to keep
    p2.para("Close the junction box lid.")

    p3 = _Page(doc)
    p3.line("Maintenance", size=16, bold=True)
    p3.para("Visit the gauge every month.")
    p3.image(xref=xref)  # the same picture again: one node, two pages
    p3.para("The end of the guide.")

    doc.set_toc([
        [1, "Installation", 1],
        [2, "Wiring", 1],
        [2, "Cable lengths and connectors", 2],
        [1, "Maintenance", 3],
        [2, "Appendix: spare parts", 3],  # not on the page: starts at the page top
    ])
    doc.set_metadata({"title": "Harbour Gauge Guide", "author": "Test Author"})
    return doc.tobytes()


def _font_pdf() -> bytes:
    """No outline: 20 pt / 15 pt headings, 11 pt body, one bold body-size heading."""
    doc = pymupdf.open()
    p1 = _Page(doc)
    p1.para("Front matter before any heading.")
    p1.line("Overview", size=20, bold=True)
    p1.para("The overview of the station explains what is measured.",
            "It runs over two lines of body text.")
    p1.line("Details", size=15)
    p1.para("Detail text in the body size, long enough to dominate the size statistics.")
    p1.line("Safety notes", size=11, bold=True)
    p1.para("Wear a life jacket on the pier at all times when working.")
    p1.line("This bold sentence ends with a period.", size=11, bold=True)
    p1.para("More body text follows the bold sentence in the details section.")
    p2 = _Page(doc)
    p2.line("Appendix", size=20, bold=True)
    p2.para("Appendix body text on the second page of the document.")
    p2.line("Part lists", size=15)
    p2.para("Body text of the part lists.")
    return doc.tobytes()


# ---------------------------------------------------------------- outline


def test_outline_hierarchy_levels_and_parents():
    pf = parse_pdf(_outline_pdf(), "docs/guide.pdf")
    root = pf.root
    assert root.kind == "file" and root.subkind == "pdf"
    assert root.title == "Harbour Gauge Guide"
    assert root.attrs["pages"] == 3
    assert root.attrs["metadata"]["author"] == "Test Author"
    assert root.attrs["structure"] == "outline"
    assert [c.title for c in root.children if c.kind == "section"] == ["Installation", "Maintenance"]
    install, wiring = section_titled(pf, "Installation"), section_titled(pf, "Wiring")
    cables = section_titled(pf, "Cable lengths and connectors")
    maint, appendix = section_titled(pf, "Maintenance"), section_titled(pf, "Appendix: spare parts")
    assert (install.subkind, wiring.subkind, cables.subkind) == ("h1", "h2", "h2")
    assert parent_of(pf, wiring) is install and parent_of(pf, cables) is install
    assert parent_of(pf, appendix) is maint
    assert wiring.slug == "wiring" and cables.attrs["anchor"] == "cable-lengths-and-connectors"
    for d in root.walk():
        assert d.start_line is None and d.end_line is None


def test_outline_pages_and_text():
    pf = parse_pdf(_outline_pdf(), "docs/guide.pdf")
    install, wiring = section_titled(pf, "Installation"), section_titled(pf, "Wiring")
    cables, maint = section_titled(pf, "Cable lengths and connectors"), section_titled(pf, "Maintenance")
    assert (install.page, install.attrs["page_end"]) == (1, 2)
    assert (wiring.page, wiring.attrs["page_end"]) == (1, 1)
    assert (cables.page, cables.attrs["page_end"]) == (2, 2)
    assert (maint.page, maint.attrs["page_end"]) == (3, 3)
    # text before the first outline entry belongs to the file
    assert "introduction that comes before" in pf.root.text
    assert "Install the gauge" not in pf.root.text
    # a section holds its heading line and only its own prose
    assert install.text.startswith("Installation")
    assert "Install the gauge on a piling.\nUse two stainless bands." in install.text
    assert "Run the cable" not in install.text
    assert wiring.text.startswith("2.1 Wiring") and "Run the cable" in wiring.text
    assert cables.text.startswith("Cable lengths and connectors")
    assert "Choose the cable" in cables.text and "Close the junction box lid." in cables.text


def test_outline_entry_not_found_starts_at_page_top():
    pf = parse_pdf(_outline_pdf(), "docs/guide.pdf")
    appendix = section_titled(pf, "Appendix: spare parts")
    assert any("Appendix: spare parts" in n and "not found" in n for n in pf.notes)
    assert appendix.page == 3
    # the page-top fallback sits before the page's text, so it takes the page prose
    assert "Visit the gauge every month." in appendix.text
    assert "Visit the gauge" not in section_titled(pf, "Maintenance").text


def test_tables_are_children_with_header_and_rows():
    pf = parse_pdf(_outline_pdf(), "docs/guide.pdf")
    tables = drafts_of_kind(pf, "table")
    assert len(tables) == 1
    table = tables[0]
    assert parent_of(pf, table) is section_titled(pf, "Cable lengths and connectors")
    assert table.subkind == "pdf" and table.page == 2 and table.slug == "table-1"
    assert table.attrs["header"] == ["Cable", "Length", "Connector"]
    assert table.attrs["rows"] == 2
    assert table.text.splitlines()[0] == "| Cable | Length | Connector |"
    assert "| Signal cable | 12 m | M12 plug |" in table.text
    assert table.title == "Choose the cable from the table below."
    assert table.attrs["context_before"].endswith("Choose the cable from the table below.")
    assert table.attrs["context_after"].startswith("Text after the table.")
    # the cells are not repeated in the prose
    assert "Screw terminal" not in section_titled(pf, "Cable lengths and connectors").text


def test_images_blob_caption_dedupe_and_small_icons():
    pf = parse_pdf(_outline_pdf(), "docs/guide.pdf")
    images = drafts_of_kind(pf, "image")
    assert len(images) == 1, [i.attrs for i in images]  # the 16x16 icon is skipped
    image = images[0]
    assert parent_of(pf, image) is section_titled(pf, "Cable lengths and connectors")
    assert image.subkind == "pdf" and image.page == 2
    assert (image.attrs["width"], image.attrs["height"]) == (120, 90)
    assert image.attrs["page"] == 2 and image.attrs["pages"] == [2, 3]
    assert image.attrs["ext"] == "png"
    blob = image.attrs["blob"]
    assert len(blob) == 32 and blob in pf.blobs
    assert Image.open(io.BytesIO(pf.blobs[blob])).size == (120, 90)
    # caption line directly above the image (nothing below starts with "Figure")
    assert image.title == image.text == "Figure 2: The junction box seen from the pier ladder."
    assert len(pf.blobs) == 1


def test_image_without_caption_is_named_by_page():
    doc = pymupdf.open()
    page = _Page(doc)
    page.para("Some text above the picture.")
    page.image(_png(64, 64))
    pf = parse_pdf(doc.tobytes(), "x.pdf")
    (image,) = drafts_of_kind(pf, "image")
    assert image.title == "image on page 1"
    assert image.attrs["context_before"] == "Some text above the picture."
    assert parent_of(pf, image) is pf.root


def test_context_lines_zero():
    pf = parse_pdf(_outline_pdf(), "docs/guide.pdf", context_lines=0)
    for leaf in drafts_of_kind(pf, "table") + drafts_of_kind(pf, "image"):
        assert leaf.attrs["context_before"] == "" and leaf.attrs["context_after"] == ""


# ---------------------------------------------------------------- font sizes


def test_font_size_headings_without_outline():
    pf = parse_pdf(_font_pdf(), "docs/plain.pdf")
    assert pf.root.attrs["structure"] == "fonts"
    assert pf.root.title == "Overview"  # no metadata title: the first heading
    overview, details = section_titled(pf, "Overview"), section_titled(pf, "Details")
    safety, appendix = section_titled(pf, "Safety notes"), section_titled(pf, "Appendix")
    parts = section_titled(pf, "Part lists")
    assert (overview.subkind, details.subkind, safety.subkind) == ("h1", "h2", "h3")
    assert (appendix.subkind, parts.subkind) == ("h1", "h2")
    assert parent_of(pf, overview) is pf.root and parent_of(pf, appendix) is pf.root
    assert parent_of(pf, details) is overview and parent_of(pf, safety) is details
    assert parent_of(pf, parts) is appendix
    assert (overview.page, overview.attrs["page_end"]) == (1, 1)
    assert (appendix.page, appendix.attrs["page_end"]) == (2, 2)
    # a bold line that ends with a period is prose, not a heading
    assert not [d for d in drafts_of_kind(pf, "section") if d.title.startswith("This bold sentence")]
    assert "This bold sentence ends with a period." in safety.text
    assert "Front matter before any heading." in pf.root.text
    assert "two lines of body text" in overview.text and "Detail text" not in overview.text


def test_no_headings_at_all():
    doc = pymupdf.open()
    page = _Page(doc)
    page.para("Only body text here.", "And a second line.")
    pf = parse_pdf(doc.tobytes(), "notes/plain.pdf")
    assert pf.root.attrs["structure"] == "none"
    assert pf.root.title == "plain"
    assert pf.root.children == []
    assert pf.root.text == "Only body text here.\nAnd a second line."


def test_running_footer_is_not_prose_or_heading():
    doc = pymupdf.open()
    for n in range(1, 5):
        page = _Page(doc)
        page.line(f"Chapter {n}", size=18, bold=True)
        page.para(f"Body text of chapter {n} in the normal size.")
        page.page.insert_text((72, 800), f"Station manual - page {n} of 4", fontname="hebo", fontsize=9)
    pf = parse_pdf(doc.tobytes(), "m.pdf")
    titles = [d.title for d in drafts_of_kind(pf, "section")]
    assert titles == ["Chapter 1", "Chapter 2", "Chapter 3", "Chapter 4"]
    assert all("Station manual" not in d.text for d in pf.root.walk())


# ---------------------------------------------------------------- damaged input


def test_encrypted_pdf():
    data = pymupdf.open(stream=_outline_pdf()).tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="x", owner_pw="y")
    pf = parse_pdf(data, "secret/locked.pdf")
    assert "encrypted PDF: no text extracted" in pf.notes
    assert pf.root.kind == "file" and pf.root.children == []
    assert pf.root.title == "locked" and pf.root.text == "locked"
    assert pf.root.attrs["pages"] == 3
    assert pf.blobs == {}


def test_owner_password_only_is_readable():
    data = pymupdf.open(stream=_outline_pdf()).tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="y", permissions=0)
    pf = parse_pdf(data, "guide.pdf")
    assert not any("encrypted" in n for n in pf.notes)
    assert section_titled(pf, "Wiring").page == 1


def test_truncated_pdf_never_raises():
    data = _outline_pdf()
    pf = parse_pdf(data[: len(data) // 2], "cut.pdf")
    assert isinstance(pf, ParsedFile) and pf.root.kind == "file"
    assert pf.notes  # either "unreadable PDF: ..." or "damaged PDF was repaired ..."
    assert any(n.startswith(("unreadable PDF", "damaged PDF")) for n in pf.notes)
    sample = SAMPLE_PDF.read_bytes()
    pf = parse_pdf(sample[: len(sample) // 2], "cut.pdf")
    assert pf.notes and pf.root.kind == "file"


@pytest.mark.parametrize("data", [
    b"",
    b"not a pdf at all",
    b"%PDF-1.7\n%%EOF",
    random.Random(3).randbytes(5000),
    b"%PDF-1.4\n" + random.Random(4).randbytes(3000),
])
def test_garbage_gives_a_note_not_an_exception(data):
    pf = parse_pdf(data, "junk/file.pdf")
    assert pf.root.kind == "file" and pf.root.title == "file"
    assert pf.notes and pf.notes[0].startswith(("unreadable PDF", "damaged PDF"))


def test_non_bytes_input_never_raises():
    assert parse_pdf(None, "x.pdf").notes[0].startswith("unreadable PDF")  # type: ignore[arg-type]


def test_page_without_text_layer():
    doc = pymupdf.open()
    _Page(doc).para("A normal first page.")
    scanned = _Page(doc)
    scanned.image(_png(400, 300), width=450, height=600)
    pf = parse_pdf(doc.tobytes(), "scan.pdf")
    assert "page 2 has no text layer" in pf.notes
    assert "page 1 has no text layer" not in pf.notes
    (image,) = drafts_of_kind(pf, "image")
    assert image.page == 2 and image.attrs["blob"] in pf.blobs


# ---------------------------------------------------------------- sample corpus


@pytest.fixture(scope="module")
def sample() -> ParsedFile:
    if not SAMPLE_PDF.is_file():
        pytest.skip("run data/make_sample_files.py first")
    return parse_pdf(SAMPLE_PDF.read_bytes(), "docs/field-manual.pdf")


def test_sample_outline(sample):
    assert sample.notes == []
    root = sample.root
    assert root.title == "Tidewater Field Manual"
    assert root.attrs["pages"] == 4 and root.attrs["metadata"]["title"] == "Tidewater Field Manual"
    assert [c.title for c in root.children] == ["Deployment", "Maintenance", "Troubleshooting"]
    deployment = section_titled(sample, "Deployment")
    assert [c.title for c in deployment.children] == ["Mounting the gauge", "Surveying the datum"]
    assert (deployment.page, deployment.attrs["page_end"]) == (1, 2)
    assert section_titled(sample, "Surveying the datum").page == 2
    assert section_titled(sample, "Replacing the batteries").page == 4
    assert "This manual covers the field side" in root.text
    assert all("page 1 of 4" not in d.text for d in root.walk())  # running footer


def test_sample_table_and_image(sample):
    (table,) = drafts_of_kind(sample, "table")
    assert parent_of(sample, table) is section_titled(sample, "Maintenance intervals")
    assert table.attrs["header"] == ["Task", "Interval", "Notes"] and table.attrs["rows"] == 5
    assert "| Replace the batteries | Every 12 months | Lithium 3.6 V pack |" in table.text
    assert table.page == 3
    (image,) = drafts_of_kind(sample, "image")
    assert parent_of(sample, image) is section_titled(sample, "Mounting the gauge")
    assert image.title.startswith("Figure 1: Kelpie PT-12 housing")
    assert (image.attrs["width"], image.attrs["height"]) == (256, 192)
    assert image.attrs["blob"] in sample.blobs


def test_sample_finalizes_into_rows(sample):
    rows, refs = finalize(sample, "sample", "docs/field-manual.pdf", "")
    assert refs == []
    kinds = [r["kind"] for r in rows]
    assert kinds.count("table") == 1 and kinds.count("image") == 1
    assert {r["page"] for r in rows if r["kind"] == "section"} == {1, 2, 3, 4}
    for r in rows:
        json.loads(r["attrs"])


def test_parsing_is_deterministic():
    data = _outline_pdf()
    a, b = parse_pdf(data, "g.pdf"), parse_pdf(data, "g.pdf")
    assert [(d.kind, d.title, d.text, d.page, d.attrs) for d in a.root.walk()] == \
           [(d.kind, d.title, d.text, d.page, d.attrs) for d in b.root.walk()]


def test_does_not_leave_mupdf_error_display_switched_off():
    before = pymupdf.TOOLS.mupdf_display_errors()
    parse_pdf(os.urandom(100), "x.pdf")
    assert pymupdf.TOOLS.mupdf_display_errors() == before
