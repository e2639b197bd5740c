"""How far a compressed container may expand before a parser is allowed to open it.

The size cap bounds what is read from disk, not what a parser inflates: a
small DOCX whose XML part inflates to gigabytes takes that much memory, and a
small PDF holding a huge content stream keeps PyMuPDF busy for a long time. So
before parsing, the container is measured without being expanded:

- DOCX (a zip): the sizes the central directory declares. Python's zipfile
  never returns more than a member's declared size (a member that lies fails
  its CRC check instead), so the declared sizes bound what python-docx reads.
- PDF: every FlateDecode stream is inflated in bounded pieces (at most
  :data:`INFLATE_STEP` bytes at a time) and counted, up to the cap; nothing is
  kept. zlib inflates ~1 GB/s, so the check costs well under a second at the cap.

A container over its cap is skipped with a reason saying by how much.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib

MiB = 2**20
DOCX_MAX_EXPANDED = 200 * MiB  # all members together
DOCX_MAX_PART = 50 * MiB  # one XML part (parsed into an lxml tree: several times its size)
DOCX_MAX_MEMBERS = 10_000
PDF_MAX_EXPANDED = 256 * MiB  # all Flate streams together
INFLATE_STEP = 4 * MiB

_STREAM = re.compile(rb"stream(?:\r\n|\n|\r)")
_FLATE = re.compile(rb"/(?:FlateDecode|Fl)\b")


def _mib(n: float) -> str:
    return f"{n / MiB:.0f} MiB"


def zip_problem(data: bytes, what: str = "DOCX", max_total: int | None = None,
                max_part: int | None = None, max_members: int | None = None) -> str | None:
    """Why the zip container ``data`` must not be opened, or None (caps default
    to this module's constants, read at call time)."""
    max_total = DOCX_MAX_EXPANDED if max_total is None else max_total
    max_part = DOCX_MAX_PART if max_part is None else max_part
    max_members = DOCX_MAX_MEMBERS if max_members is None else max_members
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError):
        return None  # not a readable zip: the parser says so in its own words
    if len(infos) > max_members:
        return f"{what} has {len(infos)} parts (over the {max_members} cap)"
    total = sum(max(0, i.file_size) for i in infos)
    if total > max_total:
        return (f"{what} expands to {_mib(total)} (over the {_mib(max_total)} cap; "
                f"{_mib(len(data))} compressed): a decompression bomb or an unusually "
                "large document")
    for i in infos:
        if i.filename.lower().endswith((".xml", ".rels")) and i.file_size > max_part:
            return (f"{what} part {i.filename} expands to {_mib(i.file_size)} "
                    f"(over the {_mib(max_part)} cap)")
    return None


def _inflated_size(data: bytes, start: int, budget: int) -> int:
    """Bytes the zlib stream at ``data[start:]`` inflates to, counting at most
    ``budget`` + 1 (then stops). Corrupt data counts what inflated before it."""
    d = zlib.decompressobj()
    total = 0
    pos = start
    try:
        while pos < len(data) and not d.eof:
            chunk = data[pos:pos + 65536]
            pos += len(chunk)
            out = d.decompress(chunk, INFLATE_STEP)
            total += len(out)
            while d.unconsumed_tail and total <= budget:
                out = d.decompress(d.unconsumed_tail, INFLATE_STEP)
                total += len(out)
            if total > budget:
                return total
            if d.unused_data:
                break
    except zlib.error:
        pass
    return total


def pdf_problem(data: bytes, max_total: int | None = None) -> str | None:
    """Why the PDF ``data`` must not be parsed (its Flate streams inflate past
    ``max_total`` together), or None."""
    max_total = PDF_MAX_EXPANDED if max_total is None else max_total
    total = 0
    for m in _STREAM.finditer(data):
        head = data[max(0, m.start() - 2048):m.start()]
        head = head[max(0, head.rfind(b"obj")):]  # this object's dictionary
        if not _FLATE.search(head):
            continue
        total += _inflated_size(data, m.end(), max_total - total)
        if total > max_total:
            return (f"PDF streams expand to over {_mib(max_total)} ({_mib(len(data))} on "
                    "disk): a decompression bomb or an unusually large document")
    return None
