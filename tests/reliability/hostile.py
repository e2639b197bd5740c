"""A corpus of hostile files, generated fresh for each test session.

Each case is one file (or link) with what must happen to it: ``indexed``
(its text is in the index, possibly with a parser note), or ``skipped`` with a
reason matching a pattern. Nothing may crash the run and nothing may vanish:
every case must appear in ``documents.parquet`` or ``skipped.parquet``.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

BIG_TEXT_BYTES = 200 * 2**20  # a 200 MiB text file (sparse: costs no disk)
HUGE_ASSET_BYTES = 2 * 2**30  # a 2 GiB "image" (sparse): hashed only when under the cap
DOCX_PART_BYTES = 64 * 2**20  # a DOCX whose XML part inflates past the 50 MiB part cap


@dataclass
class Case:
    path: str
    expect: str  # "indexed" or "skipped"
    reason: str = ""  # regex the skip reason (or parser note) must match
    needle: str = ""  # text that must be findable in the file's nodes when indexed
    disk: str | None = None  # the name on disk, when the index shows another (not UTF-8)

    @property
    def on_disk(self) -> str:
        return self.disk or self.path


def _png(width: int, height: int, body: bytes | None = None) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = body if body is not None else zlib.compress(b"\x00" + b"\x7f" * 3 * width)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def _pdfs(root: Path) -> list[Case]:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Encrypted tide tables for the north harbour.")
    encrypted = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret",
                            owner_pw="owner")
    (root / "pdf" / "encrypted.pdf").write_bytes(encrypted)
    good = pymupdf.open()
    good.new_page().insert_text((72, 72), "A truncated report about harbour silting.")
    (root / "pdf" / "truncated.pdf").write_bytes(good.tobytes()[:300])
    (root / "pdf" / "malformed.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(2000))
    return [
        Case("pdf/encrypted.pdf", "skipped", r"(?i)encrypt|password"),
        Case("pdf/truncated.pdf", "skipped", r"(?i)pdf|broken|damaged|cannot|no text"),
        Case("pdf/malformed.pdf", "skipped", r"(?i)pdf|broken|damaged|cannot|no text"),
    ]


def _docx_bomb(path: Path, part_bytes: int) -> None:
    """A small DOCX whose document.xml inflates to ``part_bytes`` (streamed out:
    never held in memory here either)."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.'
                   'openxmlformats.org/package/2006/content-types"/>')
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            f.write(b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org'
                    b'/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')
            block = b" " * 2**20
            for _ in range(part_bytes // len(block)):
                f.write(block)
            f.write(b"</w:t></w:r></w:p></w:body></w:document>")


def _special_files(root: Path) -> list[Case]:
    """Things that are not regular files, behind text names: never opened for reading."""
    cases = []
    os.mkfifo(root / "special" / "pipe.md")  # open() would block until a writer comes
    cases.append(Case("special/pipe.md", "skipped", r"(?i)not a regular file.*fifo"))
    try:  # /dev/zero's device numbers: read it and it never ends (needs CAP_MKNOD)
        os.mknod(root / "special" / "zero.md", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
        cases.append(Case("special/zero.md", "skipped", r"(?i)not a regular file.*character"))
    except (PermissionError, OSError):
        pass
    return cases


def write_hostile_corpus(root: Path) -> list[Case]:
    for d in ("text", "pdf", "img", "code", "names", "links", "special", "docs"):
        (root / d).mkdir(parents=True, exist_ok=True)
    cases: list[Case] = []

    def put(rel: str, data: bytes | str) -> Path:
        p = root / rel
        p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return p

    # a normal page, so the index is never empty and links have a target
    put("text/normal.md", "# Normal page\n\nThe harbour gauge reads the tide every minute.\n")
    cases.append(Case("text/normal.md", "indexed", needle="harbour gauge"))

    # encodings
    put("text/binary.md", os.urandom(4096) + b"\x00" * 64)
    cases.append(Case("text/binary.md", "skipped", r"(?i)binary"))
    put("text/latin1.md", "# Café notes\n\nThe señor measured the naïve façade.\n".encode("cp1252"))
    cases.append(Case("text/latin1.md", "indexed", r"(?i)decoded|cp1252|windows|latin",
                      needle="señor"))
    put("text/utf16.md", "# UTF-16 page\n\nSalinity is logged hourly.\n".encode("utf-16"))
    cases.append(Case("text/utf16.md", "indexed", needle="Salinity"))
    put("text/mixed.md", b"# Mixed\n\nvalid utf-8 caf\xc3\xa9 then a stray \xff\xfe byte pair "
                         b"and more text about tides.\n")
    cases.append(Case("text/mixed.md", "indexed", needle="tides"))
    put("text/empty.md", b"")
    cases.append(Case("text/empty.md", "skipped", r"(?i)empty"))

    # size
    with open(root / "text" / "huge.txt", "wb") as f:
        f.truncate(BIG_TEXT_BYTES)
    cases.append(Case("text/huge.txt", "skipped", r"(?i)too large"))
    # 100k lines, mostly inside code fences (one node per fence: the parser walks
    # every line, the encoder does not have to embed thousands of chunks)
    blocks = []
    for b in range(10):
        blocks += [f"## Part {b}", "", f"Prose before listing {b}.", "", "```text"]
        blocks += [f"reading {b}-{i}: {i * 0.001:.3f} m" for i in range(10_000)]
        blocks += ["```", ""]
    put("text/long.md", "# Long page\n\n" + "\n".join(blocks) + "\n## The end\n\nfinal words\n")
    cases.append(Case("text/long.md", "indexed", needle="final words"))
    rows = "\n".join(f"| station {i} | {i * 0.01:.2f} |" for i in range(10_000))
    put("text/bigtable.md", "# Stations\n\n| station | offset |\n|---|---|\n" + rows + "\n")
    cases.append(Case("text/bigtable.md", "indexed", needle="station 9999"))

    # structure
    nested = "\n".join("  " * i + f"- level {i}" for i in range(1000))
    quotes = "\n".join(">" * i + f" quote {i}" for i in range(1, 1000))
    put("text/nested.md", "# Nested\n\n" + nested + "\n\n" + quotes + "\n\n## After\n\nsurvived\n")
    cases.append(Case("text/nested.md", "indexed", needle="survived"))
    headings = "\n\n".join("#" * (1 + i % 7) + f" heading {i}\n\nbody {i}" for i in range(600))
    put("text/headings.md", headings + "\n")  # 7 #s is not a heading: text of the section above
    cases.append(Case("text/headings.md", "indexed", needle="heading 599"))
    put("text/fence.md", "# Fence\n\nbefore the fence\n\n```python\ndef never_closed():\n"
                         "    return 1\n" + "x = 1\n" * 200)
    cases.append(Case("text/fence.md", "indexed", needle="before the fence"))

    # pathological input for regular expressions (links, emphasis, paths, entities)
    evil = ("[" * 20000 + "](" * 5000 + "*_" * 20000 + "a" * 50000 + "!\n"
            + "/".join(["x"] * 20000) + ".yaml\n" + " ".join(["Harbour"] * 20000) + "\n"
            + "<" * 20000 + "\n" + "`" * 20001 + "\n")
    put("text/regex.md", "# Regex bait\n\n" + evil + "\n## Tail\n\ncalm water\n")
    cases.append(Case("text/regex.md", "indexed", needle="calm water"))

    # binaries without a NUL byte in sight, behind text names
    put("text/random.md", os.urandom(64 * 1024).replace(b"\x00", b"\x01"))
    cases.append(Case("text/random.md", "skipped", r"(?i)binary"))
    put("code/fake.py", b"\x7fELF\x02\x01\x01" + os.urandom(8192).replace(b"\x00", b"\x02"))
    cases.append(Case("code/fake.py", "skipped", r"(?i)binary.*ELF"))

    # a 2 GiB sparse "image": over the cap, so never hashed (not read at all)
    with open(root / "img" / "huge.png", "wb") as f:
        f.truncate(HUGE_ASSET_BYTES)
    cases.append(Case("img/huge.png", "skipped", r"(?i)too large"))
    # a 0.1 MB DOCX whose XML part inflates to 64 MiB: measured, never inflated
    _docx_bomb(root / "docs" / "bomb.docx", DOCX_PART_BYTES)
    cases.append(Case("docs/bomb.docx", "skipped", r"(?i)expands to \d+ MiB"))

    cases += _special_files(root)

    # code
    put("code/broken.py", "def ok():\n    return 1\n\ndef broken(:\n    pass\n\nclass X\n")
    cases.append(Case("code/broken.py", "indexed", r"(?i)syntax|plain text|parser failed",
                      needle="def broken"))
    put("code/deep.py", "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n\ndef after():\n"
                        "    return 'deep nesting survived'\n")
    cases.append(Case("code/deep.py", "indexed", needle="deep nesting survived"))

    cases += _pdfs(root)

    # images referenced from a page: corrupt, a decompression bomb, missing, outside the root
    put("img/corrupt.png", b"\x89PNG\r\n\x1a\n" + os.urandom(500))
    put("img/bomb.png", _png(60000, 60000, zlib.compress(b"\x00" * 1000)))
    put("img/gallery.md", "# Gallery\n\n![corrupt chart](corrupt.png)\n\n![bomb](bomb.png)\n\n"
                          "![missing](nowhere.png)\n\n![escape](../../../../etc/hostname)\n\n"
                          "Pictures of the harbour wall.\n")
    cases.append(Case("img/gallery.md", "indexed", needle="harbour wall"))

    # paths
    put("names/with space and ünïcödé.md", "# Unicode name\n\nfjord water level\n")
    cases.append(Case("names/with space and ünïcödé.md", "indexed", needle="fjord"))
    put("names/new\nline.md", "# Newline name\n\nestuary readings\n")
    cases.append(Case("names/new\nline.md", "indexed", needle="estuary"))
    # a name that is not UTF-8 (legal on Linux): indexed under its escaped name, noted
    (root / "names").joinpath(os.fsdecode(b"\xff-latin.md")).write_text(
        "# Bytes in a name\n\nlagoon salinity survey\n")
    cases.append(Case("names/\\xff-latin.md", "indexed", r"(?i)not valid UTF-8",
                      needle="lagoon salinity", disk=os.fsdecode(b"names/\xff-latin.md")))
    os.symlink("/etc/passwd", root / "links" / "passwd.md")
    cases.append(Case("links/passwd.md", "skipped", r"(?i)outside"))
    os.symlink(root / "links", root / "links" / "loop")  # a directory loop: never descended
    os.symlink("selfloop.md", root / "links" / "selfloop.md")  # a file symlink to itself
    cases.append(Case("links/selfloop.md", "skipped", r"(?i)cannot read|loop|symlink"))
    put("links/escape.md", "# Escape\n\nSee [secrets](../../../../etc/passwd) and "
                           "[shadow](/etc/shadow) for lagoon data.\n")
    cases.append(Case("links/escape.md", "indexed", needle="lagoon"))
    return cases

