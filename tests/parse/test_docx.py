"""Tests for stages.parse.docx on documents built here with python-docx and
on the bundled sample (data/sample/docs/site-survey.docx)."""

from __future__ import annotations

import io
import json
import random
import sys
import zipfile
from pathlib import Path

import pytest
from PIL import Image

docx = pytest.importorskip("docx")

from docx.oxml import OxmlElement  # noqa: E402
from docx.oxml.ns import qn  # noqa: E402
from docx.shared import Inches  # noqa: E402

from strata.stages.parse.docx import MISSING_NOTE, parse_docx  # noqa: E402
from strata.stages.parse.finalize import finalize  # noqa: E402
from strata.stages.parse.model import ParsedFile  # noqa: E402
from tests.parse.drafts import drafts_of_kind, parent_of, section_titled  # noqa: E402

SAMPLE_DOCX = Path(__file__).resolve().parents[2] / "data" / "sample" / "docs" / "site-survey.docx"


# ---------------------------------------------------------------- helpers




def _png(width: int = 80, height: int = 60) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (30, 120, 90)).save(buf, format="PNG")
    return buf.getvalue()


def _save(d) -> bytes:
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def _outline_level(paragraph, level: int) -> None:
    ppr = paragraph._p.get_or_add_pPr()
    el = OxmlElement("w:outlineLvl")
    el.set(qn("w:val"), str(level))
    ppr.append(el)


def _document() -> bytes:
    d = docx.Document()
    d.core_properties.title = ""
    d.add_paragraph("Preface paragraph before the title.")          # 1
    d.add_heading("Gauge Handbook", level=0)                        # 2
    d.add_paragraph("Intro under the title.")                       # 3
    d.add_heading("Setup", level=1)                                 # 4
    d.add_paragraph("Unpack the gauge.")                            # 5
    d.add_paragraph("Check the seals.", style="List Bullet")        # 6
    d.add_heading("Power", level=2)                                 # 7
    d.add_paragraph("Parts needed for the power supply:")           # 8
    table = d.add_table(rows=1, cols=3)                             # 9
    for cell, text in zip(table.rows[0].cells, ["Part", "Count", "Note"]):
        cell.text = text
    for row in (("Battery", "2", "Lithium"), ("Fuse", "1", "5 A | slow")):
        for cell, text in zip(table.add_row().cells, row):
            cell.text = text
    d.add_paragraph("After the table.")                             # 10
    d.add_heading("Deep detail", level=3)                           # 11
    d.add_paragraph("The photo shows the seal.")                    # 12
    shape = d.add_picture(io.BytesIO(_png()), width=Inches(2))      # 13
    shape._inline.docPr.set("descr", "Close-up of the rubber seal")
    d.add_paragraph("Figure 3: The seal after a year at sea.")      # 14
    custom = d.add_paragraph("Outline-level heading")               # 15
    _outline_level(custom, 1)  # w:outlineLvl 1 = level 2
    d.add_paragraph("Under the outline-level heading.")             # 16
    d.add_heading("Operation", level=1)                             # 17
    d.add_paragraph("Run the logger.")                              # 18
    untitled = d.add_picture(io.BytesIO(_png(40, 40)))              # 19
    untitled._inline.docPr.set("title", "Logger front panel")
    return _save(d)


@pytest.fixture(scope="module")
def parsed() -> ParsedFile:
    return parse_docx(_document(), "docs/handbook.docx")


# ---------------------------------------------------------------- structure


def test_heading_levels_and_parents(parsed):
    pf = parsed
    assert pf.notes == []
    title = section_titled(pf, "Gauge Handbook")
    setup, power = section_titled(pf, "Setup"), section_titled(pf, "Power")
    deep, custom = section_titled(pf, "Deep detail"), section_titled(pf, "Outline-level heading")
    operation = section_titled(pf, "Operation")
    assert title.subkind == "title" and parent_of(pf, title) is pf.root
    assert (setup.subkind, power.subkind, deep.subkind) == ("h1", "h2", "h3")
    assert custom.subkind == "h2" and parent_of(pf, custom) is setup
    assert parent_of(pf, setup) is title and parent_of(pf, operation) is title
    assert parent_of(pf, power) is setup and parent_of(pf, deep) is power
    assert setup.slug == "setup" and setup.attrs["anchor"] == "setup"
    assert setup.attrs["style"] == "Heading 1"


def test_root_title_text_and_lines(parsed):
    root = parsed.root
    assert root.kind == "file" and root.subkind == "docx"
    assert root.title == "Gauge Handbook"  # no core title: the Title paragraph
    assert root.text == "Preface paragraph before the title."
    assert (root.start_line, root.end_line) == (1, 19)
    assert root.attrs["paragraphs"] == 18  # 19 blocks, one of them a table


def test_section_text_and_line_ranges(parsed):
    setup, power = section_titled(parsed, "Setup"), section_titled(parsed, "Power")
    assert setup.text == "Setup\n\nUnpack the gauge.\n\n- Check the seals."
    assert (setup.start_line, setup.end_line) == (4, 16)
    assert (power.start_line, power.end_line) == (7, 14)
    assert "Parts needed" in power.text and "After the table." in power.text
    assert "Battery" not in power.text  # table cells are the table's, not prose
    title = section_titled(parsed, "Gauge Handbook")
    assert (title.start_line, title.end_line) == (2, 19)
    operation = section_titled(parsed, "Operation")
    assert (operation.start_line, operation.end_line) == (17, 19)


def test_table(parsed):
    (table,) = drafts_of_kind(parsed, "table")
    assert parent_of(parsed, table) is section_titled(parsed, "Power")
    assert table.subkind == "docx" and table.slug == "table-1"
    assert table.attrs["header"] == ["Part", "Count", "Note"]
    assert table.attrs["rows"] == 2
    assert (table.start_line, table.end_line) == (9, 9)
    assert table.text.splitlines() == [
        "| Part | Count | Note |",
        "| --- | --- | --- |",
        "| Battery | 2 | Lithium |",
        "| Fuse | 1 | 5 A \\| slow |",
    ]
    assert table.title == "Parts needed for the power supply:"
    assert table.attrs["context_before"] == "Parts needed for the power supply:"
    assert table.attrs["context_after"] == "After the table."


def test_images_with_alt_text_and_blobs(parsed):
    images = drafts_of_kind(parsed, "image")
    assert len(images) == 2
    seal, panel = images
    assert parent_of(parsed, seal) is section_titled(parsed, "Deep detail")
    assert seal.subkind == "docx" and seal.slug == "image-1"
    assert seal.title == seal.text == "Close-up of the rubber seal"
    assert seal.attrs["alt"] == "Close-up of the rubber seal"
    assert seal.attrs["caption"] == "Figure 3: The seal after a year at sea."
    assert (seal.attrs["width"], seal.attrs["height"]) == (80, 60)
    assert seal.attrs["ext"] == "png"
    assert (seal.start_line, seal.end_line) == (13, 13)
    assert seal.attrs["context_before"] == "The photo shows the seal."
    assert seal.attrs["context_after"].startswith("Figure 3")
    for image in images:
        assert image.attrs["blob"] in parsed.blobs and len(image.attrs["blob"]) == 32
    assert Image.open(io.BytesIO(parsed.blobs[seal.attrs["blob"]])).size == (80, 60)
    # no descr: the docPr title is the alt text
    assert parent_of(parsed, panel) is section_titled(parsed, "Operation")
    assert panel.title == "Logger front panel" and panel.attrs["image_title"] == "Logger front panel"
    assert (panel.attrs["width"], panel.attrs["height"]) == (40, 40)


def test_image_without_alt_is_named_after_its_section():
    d = docx.Document()
    d.add_heading("Photos", level=1)
    d.add_picture(io.BytesIO(_png()))
    pf = parse_docx(_save(d), "p.docx")
    (image,) = drafts_of_kind(pf, "image")
    assert image.title == "image in Photos" and image.attrs["alt"] == ""


def test_core_title_and_metadata():
    d = docx.Document()
    d.core_properties.title = "Official Title"
    d.core_properties.author = "Jane Surveyor"
    d.add_heading("First heading", level=1)
    pf = parse_docx(_save(d), "x.docx")
    assert pf.root.title == "Official Title"
    assert pf.root.attrs["metadata"]["author"] == "Jane Surveyor"
    assert pf.root.text == "Official Title"


def test_text_of_hyperlinks_and_breaks_is_kept():
    d = docx.Document()
    p = d.add_paragraph("See ")
    link = OxmlElement("w:hyperlink")
    run = OxmlElement("w:r")
    t = OxmlElement("w:t")
    t.text = "the manual"
    run.append(t)
    link.append(run)
    p._p.append(link)
    p.add_run(" for details.").add_break()
    p.add_run("Second line.")
    pf = parse_docx(_save(d), "x.docx")
    assert pf.root.text == "See the manual for details.\nSecond line."


def test_context_lines_zero():
    pf = parse_docx(_document(), "h.docx", context_lines=0)
    for leaf in drafts_of_kind(pf, "table") + drafts_of_kind(pf, "image"):
        assert leaf.attrs["context_before"] == "" and leaf.attrs["context_after"] == ""


# ---------------------------------------------------------------- damaged input


@pytest.mark.parametrize("data", [
    b"",
    b"PK\x03\x04 definitely not a zip",
    random.Random(5).randbytes(4000),
])
def test_corrupt_input_gives_a_note(data):
    pf = parse_docx(data, "docs/broken.docx")
    assert pf.root.kind == "file" and pf.root.title == "broken" and pf.root.children == []
    assert pf.notes and pf.notes[0].startswith("unreadable DOCX")


def test_zip_without_word_document():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("hello.txt", "not a word document")
    pf = parse_docx(buf.getvalue(), "x.docx")
    assert pf.notes[0].startswith("unreadable DOCX")


def test_truncated_docx():
    data = _document()
    pf = parse_docx(data[: len(data) // 2], "cut.docx")
    assert pf.root.kind == "file" and pf.notes


def test_missing_python_docx(monkeypatch):
    monkeypatch.setitem(sys.modules, "docx", None)  # makes `import docx` raise ImportError
    pf = parse_docx(_document(), "docs/handbook.docx")
    assert pf.notes == [MISSING_NOTE]
    assert "install strata[docx]" in pf.notes[0]
    assert pf.root.kind == "file" and pf.root.title == "handbook"


def test_dangling_picture_relationship():
    d = docx.Document()
    d.add_paragraph("Text.")
    shape = d.add_picture(io.BytesIO(_png()))
    shape._inline.xpath(".//a:blip")[0].set(qn("r:embed"), "rId999")
    pf = parse_docx(_save(d), "x.docx")
    assert drafts_of_kind(pf, "image") == []
    assert any("rId999" in n and "missing" in n for n in pf.notes)


# ---------------------------------------------------------------- sample corpus


@pytest.fixture(scope="module")
def sample() -> ParsedFile:
    if not SAMPLE_DOCX.is_file():
        pytest.skip("run data/make_sample_files.py first")
    return parse_docx(SAMPLE_DOCX.read_bytes(), "docs/site-survey.docx")


def test_sample_structure(sample):
    assert sample.notes == []
    assert sample.root.title == "Site Survey Checklist"
    (title,) = sample.root.children
    assert title.subkind == "title"
    assert [c.title for c in title.children] == ["Before the visit", "On site", "After the visit"]
    assert [c.title for c in section_titled(sample, "On site").children] == [
        "Choosing the mounting point", "Recording the survey"]
    (table,) = drafts_of_kind(sample, "table")
    assert parent_of(sample, table) is section_titled(sample, "Equipment list")
    assert table.attrs["header"] == ["Item", "Quantity", "Purpose"] and table.attrs["rows"] == 4
    (image,) = drafts_of_kind(sample, "image")
    assert parent_of(sample, image) is section_titled(sample, "Choosing the mounting point")
    assert image.attrs["alt"].startswith("Tidewater processing pipeline")
    assert (image.attrs["width"], image.attrs["height"]) == (720, 300)
    assert image.attrs["blob"] in sample.blobs
    assert image.attrs["caption"].startswith("Figure 1:")


def test_sample_finalizes_into_rows(sample):
    rows, _ = finalize(sample, "sample", "docs/site-survey.docx", "")
    assert [r["kind"] for r in rows].count("section") == 8
    for r in rows:
        json.loads(r["attrs"])
