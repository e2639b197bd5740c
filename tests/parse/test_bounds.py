"""Compressed containers are measured before they are inflated: a DOCX
or PDF that would expand past its cap is skipped with a reason, whatever its
headers claim, and a normal one is untouched."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest

from strata.stages.parse import bounds
from strata.stages.parse.bounds import pdf_problem, zip_problem
from tests.reliability.hostile import _docx_bomb

MiB = 2**20


def _pdf(stream_bytes: int) -> bytes:
    """A one-page PDF whose content stream inflates to about ``stream_bytes``."""
    z = zlib.compressobj(9)
    body = z.compress(b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET\n") + z.compress(b" " * stream_bytes)
    body += z.flush()
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def test_a_pdf_whose_streams_inflate_past_the_cap_is_skipped(monkeypatch):
    from strata.stages.parse.pdf import parse_pdf

    small, bomb = _pdf(100_000), _pdf(8 * MiB)
    assert pdf_problem(small, max_total=4 * MiB) is None
    assert "expand to over 4 MiB" in pdf_problem(bomb, max_total=4 * MiB)
    monkeypatch.setattr(bounds, "PDF_MAX_EXPANDED", 4 * MiB)
    parsed = parse_pdf(bomb, "bomb.pdf")
    assert parsed.unreadable and "decompression bomb" in parsed.unreadable
    ok = parse_pdf(small, "small.pdf")
    assert not ok.unreadable and "Hello" in ok.root.text + "".join(
        c.text for c in ok.root.children)


def test_the_real_sample_pdf_is_well_under_the_cap():
    from tests.conftest import SAMPLE

    for pdf in SAMPLE.rglob("*.pdf"):
        assert pdf_problem(pdf.read_bytes()) is None


def test_a_docx_whose_part_or_total_inflates_past_the_cap_is_skipped(tmp_path, monkeypatch):
    from strata.stages.parse.docx import parse_docx

    path = tmp_path / "bomb.docx"
    _docx_bomb(path, 3 * MiB)
    data = path.read_bytes()
    assert len(data) < MiB // 10  # tiny on disk
    assert "part word/document.xml expands to 3 MiB" in zip_problem(data, max_part=2 * MiB)
    assert "expands to 3 MiB" in zip_problem(data, max_total=2 * MiB)
    assert zip_problem(data) is None  # under the real caps
    monkeypatch.setattr(bounds, "DOCX_MAX_PART", 2 * MiB)
    parsed = parse_docx(data, "bomb.docx")
    assert parsed.unreadable and "expands to" in parsed.unreadable


def _lie_about_sizes(data: bytes, claimed: int) -> bytes:
    """The zip with every member's uncompressed size rewritten to ``claimed``
    (local headers and central directory): a bomb that says it is small."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            struct.pack_into("<I", out, info.header_offset + 22, claimed)  # local header
    pos = 0
    while (pos := out.find(b"PK\x01\x02", pos)) >= 0:  # central directory entries
        struct.pack_into("<I", out, pos + 24, claimed)
        pos += 4
    return bytes(out)


def test_a_docx_that_lies_about_its_sizes_reads_no_more_than_it_claims(tmp_path):
    """zipfile never returns more than a member's declared size: the lie ends in a
    CRC error (the file is skipped with a reason), not in inflating it all."""
    from strata.stages.parse.docx import parse_docx

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", "<w:document>" + " " * (4 * MiB) + "</w:document>")
    liar = _lie_about_sizes(buf.getvalue(), 1000)
    assert zip_problem(liar) is None  # it claims to be small ...
    with zipfile.ZipFile(io.BytesIO(liar)) as z, pytest.raises(zipfile.BadZipFile):
        z.read("word/document.xml")  # ... and reading stops at the claim
    parsed = parse_docx(liar, "liar.docx")
    assert parsed.unreadable and "unreadable DOCX" in parsed.unreadable
