"""Walk a corpus folder: which files exist, what they are, and their content hash.

Nothing here parses. The content hash is the per-document cache key used by
every later stage, so an unchanged file is never parsed or embedded twice.
Files are never followed out of the corpus root, and a file that cannot be
read is returned with a reason instead of raising.
"""

from __future__ import annotations

import hashlib
import os
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator

import pathspec

from strata.core.config.files import NotRegular, TooLarge, hash_regular, read_regular
from strata.stages.parse import registry as _registry

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
# gitignore lines (see iter_paths), before the corpus's own exclusions
DEFAULT_EXCLUDE = (".git/", "__pycache__/", ".venv/", "node_modules/", ".DS_Store", "*.egg-info/")
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


def display_path(rel: str) -> tuple[str, str | None]:
    """A file name as the index can store it (UTF-8), and a note when it is not
    the name on disk: Linux allows any bytes in a name (``b'\\xff.md'``), which
    Python hands over as lone surrogates that Parquet refuses."""
    try:
        rel.encode("utf-8")
        return rel, None
    except UnicodeEncodeError:
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return shown, f"file name is not valid UTF-8; shown as {shown!r}"


@lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...], what: str) -> pathspec.GitIgnoreSpec:
    try:
        return pathspec.GitIgnoreSpec.from_lines(patterns)
    except ValueError as e:  # pathspec's GitIgnorePatternError names the pattern
        raise ValueError(f"invalid {what} pattern: {e}") from None


def check_patterns(include: Iterable[str] = (), exclude: Iterable[str] = ()) -> None:
    """Raise ValueError naming the first pattern that is not a valid gitignore line."""
    _spec(tuple(include), "include")
    _spec(tuple(exclude), "exclude")


def _pruned(spec: pathspec.GitIgnoreSpec, rel_dir: str, negations: bool) -> bool:
    """Whether the folder ``rel_dir`` is left out whole, as git leaves it out: the
    folder itself is excluded (``build/``, ``docs/draft/**``, ``*.egg-info/``),
    and then nothing below it can be brought back by a ``!`` pattern. One case
    differs: pathspec matches ``X/`` against ``X/**``, which git reads as X's
    contents, not X, so that ``!X/keep.md`` can bring one file back; with a
    negation in the list such a folder is walked and its files tested one by one."""
    res = spec.check_file(rel_dir + "/")
    if not res.include:
        return False
    return not (negations and spec.patterns[res.index].pattern.rstrip().endswith("/**"))


@dataclass(frozen=True)
class _Lines:
    """A listing's include and exclude lines, compiled once: which folders a walk
    enters and which files it lists (:func:`iter_paths`)."""

    wanted: pathspec.GitIgnoreSpec
    unwanted: pathspec.GitIgnoreSpec
    negations: bool
    registry: frozenset[Path]  # the project's corpus registry: rewritten by the command

    @classmethod
    def of(cls, include: Iterable[str], exclude: Iterable[str]) -> _Lines:
        from strata.core.storage.ownership import own_files

        unwanted = _spec(DEFAULT_EXCLUDE + tuple(exclude), "exclude")
        return cls(_spec(tuple(include) or ("**/*",), "include"), unwanted,
                   any(p.include is False for p in unwanted.patterns), own_files())

    def walks(self, rel_dir: str, folder: Path) -> bool:
        """Whether the folder ``rel_dir`` (at ``folder``) is walked: not excluded
        whole (:func:`_pruned`), and not Strata's own (an index, a Dagster home)."""
        from strata.core.storage.ownership import looks_owned

        return not _pruned(self.unwanted, rel_dir, self.negations) and not looks_owned(folder)

    def lists(self, rel: str, file: Path) -> bool:
        """Whether the file ``rel`` (at ``file``) is listed: included, not
        excluded, and neither Strata's record nor the project's corpus registry."""
        from strata.core.storage.ownership import MARKER

        if self.unwanted.match_file(rel) or file.name == MARKER:
            return False
        if self.registry and file.name.startswith("corpora") and file.resolve() in self.registry:
            return False
        return self.wanted.match_file(rel)


def iter_paths(root: Path, include: Iterable[str] = ("**/*",),
               exclude: Iterable[str] = ()) -> Iterator[tuple[str, Path]]:
    """Relative POSIX paths below ``root``, sorted, never leaving it.

    ``include`` and ``exclude`` are gitignore lines (pathspec's
    :class:`~pathspec.GitIgnoreSpec`: ``*``, ``**``, ``?``, ``[...]``, ``!``
    negation, a trailing ``/`` for folders only, a leading ``/`` or an inner
    ``/`` anchoring at the root, a pattern without a slash matching at any
    depth). A file is listed when ``include`` matches it and the exclusions
    (:data:`DEFAULT_EXCLUDE` first, then ``exclude``, so ``!node_modules/``
    brings that folder back) do not; the last matching line decides, as in a
    ``.gitignore``. Excluded folders are not walked.

    Strata's own folders (index folders, the Dagster home: see
    :mod:`strata.core.storage.ownership`) and the project's corpus registry are never
    listed, whatever the patterns say.

    Directory symlinks are not descended into (no loops, no escapes); file
    symlinks are yielded and checked by :func:`read_source`. A name that is not
    valid UTF-8 is yielded in its escaped form (:func:`display_path`) with the
    real path beside it.
    """
    lines = _Lines.of(include, exclude)
    unreadable: list[OSError] = []  # folders os.walk could not list: reported, not dropped
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False,
                                                onerror=unreadable.append):
        yield from _unreadable(root, unreadable, lines.wanted)
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        dirnames[:] = sorted(
            d for d in dirnames
            if lines.walks(display_path(f"{rel_dir}/{d}" if rel_dir else d)[0], Path(dirpath) / d))
        for name in sorted(filenames):
            rel = display_path(f"{rel_dir}/{name}" if rel_dir else name)[0]
            if lines.lists(rel, Path(dirpath) / name):
                yield rel, Path(dirpath) / name
    yield from _unreadable(root, unreadable, lines.wanted)


def _unlistable(folder: Path) -> str | None:
    """Why ``folder`` cannot be listed, or None when it can."""
    try:
        with os.scandir(folder):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__


def _unreadable(root: Path, errors: list[OSError],
                wanted: pathspec.GitIgnoreSpec) -> Iterator[tuple[str, Path]]:
    """The folders a walk could not list, as entries :func:`read_source` turns
    into skipped files with the reason (the root itself is the caller's error).
    Only the path is passed on: read_source finds the reason again itself."""
    while errors:
        e = errors.pop(0)
        full = Path(e.filename) if e.filename else None
        if full is None or full == Path(root):
            continue
        rel = display_path(os.path.relpath(full, root).replace(os.sep, "/"))[0]
        if wanted.match_file(rel) or wanted.match_file(f"{rel}/x"):
            yield rel, full


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


# Signatures of binary formats that can start without a NUL byte in sight.
_MAGIC = (
    (b"\x7fELF", "an ELF executable"), (b"MZ", "a Windows executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"), (b"\xcf\xfa\xed\xfe", "a Mach-O binary"),
    (b"\xce\xfa\xed\xfe", "a Mach-O binary"), (b"\xfe\xed\xfa", "a Mach-O binary"),
    (b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "gzip data"), (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ", "xz data"), (b"\x28\xb5\x2f\xfd", "zstd data"), (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF document"), (b"SQLite format 3", "an SQLite database"),
)
# Bytes that text does not contain: C0 controls other than \t \n \v \f \r and ESC, and DEL.
_CONTROL = bytes([*range(0, 9), *range(14, 27), *range(28, 32), 127])
_SAMPLE = 64 * 1024


def _binary_reason(data: bytes, utf8: bool) -> str | None:
    """Why ``data`` is binary although it has no NUL byte near its start, or None."""
    head = data[:16]
    for magic, what in _MAGIC:
        # a signature in plain letters ("MZ", "GIF8", "%PDF-") may start a text file too:
        # it counts only when the rest is not UTF-8 text
        if head.startswith(magic) and (not utf8 or not magic.isascii() or magic == b"\x7fELF"):
            return f"binary content ({what}) in a file with a text extension"
    sample = data[:_SAMPLE]
    controls = len(sample) - len(sample.translate(None, _CONTROL))
    # random bytes have ~10% of these; text, even legacy-encoded, next to none
    if sample and controls / len(sample) > (0.10 if utf8 else 0.01):
        return (f"binary content ({100 * controls / len(sample):.0f}% control bytes) in a file "
                "with a text extension")
    return None


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
        text = data.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        text, utf8 = None, False
    binary = _binary_reason(data, utf8)
    if binary:
        return None, binary
    if text is not None:
        return text, None
    text = _western(data)
    if text is not None:
        return text, "not UTF-8; decoded as cp1252"
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is not None and best.encoding:
        return str(best), f"not UTF-8; decoded as {best.encoding}"
    return data.decode("latin-1"), "not UTF-8; decoded as latin-1"


def read_source(root: Path, rel: str, full: Path, max_bytes: int = MAX_FILE_BYTES) -> SourceFile:
    """One file of the corpus, read once: regular files only, never more than
    ``max_bytes`` of it, hashed from the bytes read. A folder the walk could not
    list comes here too, and is skipped with its reason."""
    fmt = detect_format(rel)
    _, name_note = display_path(str(full.relative_to(root)) if full.is_relative_to(root) else rel)
    try:
        if full.is_symlink():
            target = full.resolve()
            if not target.is_relative_to(root.resolve()):
                return SourceFile(rel, fmt, 0, "", reason="symlink points outside the corpus root")
        if fmt in ("asset", "binary"):
            # inventoried by hash, never decoded: streamed through the hash in blocks
            h, size = hash_regular(full, max_bytes)
            return SourceFile(rel, fmt, size, h, note=name_note)
        data = read_regular(full, max_bytes)
        size = len(data)
    except TooLarge as e:
        return SourceFile(rel, fmt, e.size, f"size:{e.size}", reason=str(e))
    except NotRegular as e:
        if full.is_dir():  # listed because the walk could not read it: say why
            why = _unlistable(full)
            if why:
                return SourceFile(rel, "folder", 0, "", reason=f"folder not readable: {why}")
        return SourceFile(rel, fmt, 0, "", reason=str(e))
    except (OSError, RuntimeError) as e:  # vanished, permission, symlink loop
        return SourceFile(rel, fmt, 0, "", reason=f"cannot read: {e.__class__.__name__}: {e}")
    h = content_hash(data)
    if fmt in BINARY_PARSED:
        if not data:
            return SourceFile(rel, fmt, size, h, reason="empty file")
        return SourceFile(rel, fmt, size, h, data=data, note=name_note)
    if not data.strip():
        if fmt == "python":  # an empty __init__.py still defines a package
            return SourceFile(rel, fmt, size, h, text="", note=_notes("empty file", name_note))
        return SourceFile(rel, fmt, size, h, reason="empty file")
    text, note = decode(data)
    if text is None:
        return SourceFile(rel, fmt, size, h, reason=note)
    return SourceFile(rel, fmt, size, h, text=text, note=_notes(note, name_note))


def _notes(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def discover(root: str | os.PathLike, include: Iterable[str] = ("**/*",),
             exclude: Iterable[str] = (),
             select: Callable[[str], bool] | None = None,
             listing: Iterable[tuple[str, Path]] | None = None) -> list[SourceFile]:
    """Read the corpus's files; ``select`` (a test on the relative path, applied
    before anything is read) lets a shard read only its own documents.
    ``listing``: :func:`iter_paths` of the same root and patterns, when the caller
    has walked the folder already (a parse shard needs every path, not only its
    own): the folder is not walked twice."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"corpus root {root} is not a folder")
    entries = iter_paths(root, include, exclude) if listing is None else listing
    return [read_source(root, rel, full) for rel, full in entries
            if select is None or select(rel)]
