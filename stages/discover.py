"""Walk a corpus folder: which files exist, what they are, and their content hash.

Nothing here parses. The content hash is the per-document cache key used by
every later stage, so an unchanged file is never parsed or embedded twice.
Files are never followed out of the corpus root, and a file that cannot be
read is returned with a reason instead of raising.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator

from stages.parse import registry as _registry

# Extension → format and the formats parsed from bytes: from the parser registry.
FORMATS = _registry.FORMATS
BINARY_PARSED = _registry.BINARY_PARSED
# Files that documents point to (images and other binaries): inventoried as
# assets, not parsed as text and not reported as skipped.
ASSET_EXTENSIONS = {
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".svg", ".ico", ".tif", ".tiff",
}
BINARY_EXTENSIONS = {
    ".pyc", ".pyo", ".so", ".dll", ".dylib", ".exe", ".o", ".a", ".class", ".jar",
    ".zip", ".gz", ".bz2", ".xz", ".zst", ".tar", ".7z", ".whl", ".egg",
    ".mp3", ".mp4", ".wav", ".ogg", ".flac", ".avi", ".mov", ".woff", ".woff2", ".ttf", ".otf",
    ".parquet", ".lance", ".db", ".sqlite", ".npy", ".npz", ".pkl", ".pickle", ".bin",
}
DEFAULT_EXCLUDE = (
    ".git/**", "**/.git/**", "**/__pycache__/**", "**/.venv/**", ".venv/**",
    "**/node_modules/**", "node_modules/**", "**/.DS_Store", "**/*.egg-info/**",
)
MAX_FILE_BYTES = 20 * 1024 * 1024


@dataclass
class SourceFile:
    path: str  # POSIX, relative to the corpus root
    format: str  # markdown | python | html | json | yaml | toml | pdf | docx | <language> | text | asset | binary
    size: int
    content_hash: str
    text: str | None = None  # decoded content, when readable
    reason: str | None = None  # why it could not be read (then text is None)
    note: str | None = None  # e.g. a non-UTF-8 encoding that was detected
    data: bytes | None = None  # raw bytes, for formats parsed from bytes (PDF, DOCX)


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern:
    """Gitignore-style glob: ``**/`` spans folders, ``*`` and ``?`` stay in one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _matches(path: str, patterns: Iterable[str]) -> bool:
    return any(_glob_regex(p).match(path) for p in patterns)


def iter_paths(root: Path, include: Iterable[str] = ("**/*",),
               exclude: Iterable[str] = ()) -> Iterator[tuple[str, Path]]:
    """Relative POSIX paths below ``root``, sorted, never leaving it.

    Directory symlinks are not descended into (no loops, no escapes); file
    symlinks are yielded and checked by :func:`read_source`.
    """
    include = tuple(include) or ("**/*",)
    exclude = tuple(exclude) + DEFAULT_EXCLUDE
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        dirnames[:] = sorted(
            d for d in dirnames
            if not _matches((f"{rel_dir}/{d}" if rel_dir else d) + "/x", exclude)
        )
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if _matches(rel, exclude):
                continue
            if _matches(rel, include):
                yield rel, Path(dirpath) / name


def detect_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext in FORMATS:
        return FORMATS[ext]
    if ext in ASSET_EXTENSIONS:
        return "asset"
    if ext in BINARY_EXTENSIONS:
        return "binary"
    return "text"


# Non-ASCII characters of Western European text in cp1252. Characters that
# mostly come from other code pages' common letters are left out (Ð ð Þ þ Ý ý:
# Turkish ğ ş ı, Baltic š ž, Cyrillic р э ю; ¹ ³ ¥ ¯ œ Ÿ: Polish ą ł Ą ż ś ź;
# Š š Ž ž: Czech/Slovak ones read as cp1252), so that text falls through
# to charset_normalizer.
_WESTERN = ("ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜßàáâãäåæçèéêëìíîïñòóôõöøùúûü"
            "\u00a0\u00ad¡¢£§©«®°±´·»½¿€„…‹›‘’“”•–—™")
_WESTERN_BYTES = bytes(range(0x80)) + _WESTERN.encode("cp1252")
_HIGH_LETTERS = bytes(range(0xC0, 0x100))
_ASCII_LETTERS = string.ascii_letters.encode()


def _western(data: bytes) -> str | None:
    """``data`` decoded as cp1252 when it reads as Western European text.

    charset_normalizer ranks look-alike code pages (cp1257, cp1250, cp1258,
    cp850) above cp1252 for ordinary French, Portuguese, Italian or Swedish
    prose and returns mojibake, so the commonest legacy encoding is checked
    first: only Western characters, and accented letters a minority.
    """
    if data.translate(None, _WESTERN_BYTES):
        return None
    accented = len(data) - len(data.translate(None, _HIGH_LETTERS))
    plain = len(data) - len(data.translate(None, _ASCII_LETTERS))
    return data.decode("cp1252") if accented <= plain else None


def decode(data: bytes) -> tuple[str | None, str | None]:
    """Decode bytes as text: (text, note) or (None, reason)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\x00" in data[:8192]:
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            try:
                return data.decode("utf-16"), "decoded as UTF-16"
            except UnicodeDecodeError:
                pass
        return None, "binary content (NUL bytes) in a file with a text extension"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    text = _western(data)
    if text is not None:
        return text, "not UTF-8; decoded as cp1252"
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is not None and best.encoding:
            return str(best), f"not UTF-8; decoded as {best.encoding}"
    except ImportError:
        pass
    return data.decode("latin-1"), "not UTF-8; decoded as latin-1"


def read_source(root: Path, rel: str, full: Path, max_bytes: int = MAX_FILE_BYTES) -> SourceFile:
    fmt = detect_format(rel)
    try:
        if full.is_symlink():
            target = full.resolve()
            if not target.is_relative_to(root.resolve()):
                return SourceFile(rel, fmt, 0, "", reason="symlink points outside the corpus root")
        size = full.stat().st_size
        if fmt in ("asset", "binary"):
            with open(full, "rb") as f:
                return SourceFile(rel, fmt, size, content_hash(f.read()))
        if size > max_bytes:
            return SourceFile(rel, fmt, size, f"size:{size}",
                              reason=f"too large: {size / 2**20:.1f} MiB > {max_bytes / 2**20:.0f} MiB cap")
        data = full.read_bytes()
    except (OSError, RuntimeError) as e:  # vanished, permission, symlink loop
        return SourceFile(rel, fmt, 0, "", reason=f"cannot read: {e.__class__.__name__}: {e}")
    h = content_hash(data)
    if fmt in BINARY_PARSED:
        if not data:
            return SourceFile(rel, fmt, size, h, reason="empty file")
        return SourceFile(rel, fmt, size, h, data=data)
    if not data.strip():
        if fmt == "python":  # an empty __init__.py still defines a package
            return SourceFile(rel, fmt, size, h, text="", note="empty file")
        return SourceFile(rel, fmt, size, h, reason="empty file")
    text, note = decode(data)
    if text is None:
        return SourceFile(rel, fmt, size, h, reason=note)
    return SourceFile(rel, fmt, size, h, text=text, note=note)


def discover(root: str | os.PathLike, include: Iterable[str] = ("**/*",),
             exclude: Iterable[str] = (),
             select: Callable[[str], bool] | None = None) -> list[SourceFile]:
    """Read the corpus's files; ``select`` (a test on the relative path, applied
    before anything is read) lets a shard read only its own documents."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"corpus root {root} is not a folder")
    return [read_source(root, rel, full) for rel, full in iter_paths(root, include, exclude)
            if select is None or select(rel)]
