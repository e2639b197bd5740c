"""Where an index lives on disk, and how a build becomes visible atomically.

An index folder holds immutable published versions and one working area::

    <index>/CURRENT                 name of the version readers open (atomic swap)
    <index>/manifest.json           copy of the current version's manifest, for people
    <index>/versions/v000003/       nodes.parquet, edges.parquet, ..., lance/, manifest.json
    <index>/build/                  the stages' working copy; also the per-document cache
    <index>/cache/                  caches that outlive builds (LLM responses, ...)

Stages write into ``build/``. Only ``publish`` makes a build visible: it
hard-links the build into a fresh version folder and then swaps ``CURRENT``
with ``os.replace``, so a reader sees the old version or the new one, never a
half-written index.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
from pathlib import Path
from collections.abc import Callable
from typing import Any

from strata.core.config.schema import BLOB_DIR, LANCE_DIR, LEXICAL_DIR, MANIFEST, QUERY_DIR, TABLE_FILES

# the folders a version holds beside its tables (TABLE_FILES): what publish freezes
PUBLISHED_DIRS = (LANCE_DIR, LEXICAL_DIR, BLOB_DIR, QUERY_DIR)

CURRENT = "CURRENT"
VERSIONS = "versions"
BUILD = "build"
CACHE = "cache"
_VERSION_RE = re.compile(r"^v(\d{6})$")


class IndexNotFound(FileNotFoundError):
    pass


class IndexDamaged(RuntimeError):
    """A file of a published index cannot be read (truncated, overwritten, ...).

    ``str(error)`` is one line: which file of which version, why, and the command
    that rebuilds the index (the next build notices the damage and rebuilds what
    the damaged file covered)."""

    def __init__(self, index_dir: str | os.PathLike, file: str, problem: str,
                 version: int | None = None):
        self.index_dir = Path(index_dir)
        self.file = file
        self.version = version
        self.problem = problem
        where = f"{file} of version {version}" if version is not None else file
        super().__init__(f"index {self.index_dir} is damaged: {where} is unreadable ({problem}); "
                         f"rebuild it with: {rebuild_command(self.index_dir)}")


def short_error(exc: BaseException, limit: int = 160) -> str:
    """The first line of an exception's message, without Rust source locations."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r",?\s*/rustc/\S+", "", text)
    return text[:limit]


def rebuild_command(index_dir: str | os.PathLike) -> str:
    """``strata index ROOT --corpus NAME --out DIR`` from whichever manifest of the
    index still reads (placeholders when none does)."""
    root = Path(index_dir)
    manifests = [root / MANIFEST] + sorted((root / VERSIONS).glob(f"v*/{MANIFEST}"), reverse=True)
    for path in manifests:
        try:
            m = json.loads(path.read_text())
            if m.get("corpus") and m.get("root"):
                return f"strata index {m['root']} --corpus {m['corpus']} --out {root}"
        except (OSError, ValueError, AttributeError):
            continue
    return f"strata index <folder> --corpus <name> --out {root}"


LANCE_MAGIC = b"LANC"  # the last four bytes of every Lance file


def damaged_lance_file(table_dir: Path) -> Path | None:
    """The first data or index file of a Lance table that does not end as a Lance
    file does (a truncated or overwritten file): four bytes read per file."""
    for f in sorted(table_dir.glob("data/*.lance")) + sorted(table_dir.glob("_indices/*/*.lance")):
        try:
            size = f.stat().st_size
            with open(f, "rb") as fh:
                if size < len(LANCE_MAGIC):
                    return f
                fh.seek(size - len(LANCE_MAGIC))
                if fh.read(len(LANCE_MAGIC)) != LANCE_MAGIC:
                    return f
        except OSError:
            return f
    return None


class IndexLayout:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def build(self) -> Path:
        return self.root / BUILD

    @property
    def cache(self) -> Path:
        return self.root / CACHE

    @property
    def versions_dir(self) -> Path:
        return self.root / VERSIONS

    def build_table(self, name: str) -> Path:
        return self.build / TABLE_FILES[name]

    @property
    def build_lance(self) -> Path:
        return self.build / LANCE_DIR

    @property
    def build_lexical(self) -> Path:
        return self.build / LEXICAL_DIR

    @property
    def build_blobs(self) -> Path:
        return self.build / BLOB_DIR

    def versions(self) -> list[int]:
        if not self.versions_dir.is_dir():
            return []
        found = (_VERSION_RE.match(p.name) for p in self.versions_dir.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def current_version(self) -> int | None:
        """The version CURRENT names; None when there is none or it is unreadable
        (:meth:`read_current` tells those apart)."""
        try:
            return self.read_current()
        except IndexDamaged:
            return None

    def read_current(self) -> int | None:
        """The version CURRENT names, None when there is no CURRENT; a CURRENT
        holding anything else raises :class:`IndexDamaged`."""
        try:
            raw = (self.root / CURRENT).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise IndexDamaged(self.root, CURRENT, short_error(e)) from None
        m = _VERSION_RE.match(raw.decode("utf-8", "replace").strip())
        if not m:
            shown = raw[:40].decode("utf-8", "replace").strip() or "nothing"
            raise IndexDamaged(self.root, CURRENT, f"it should name a version like v000001, "
                               f"it holds {shown!r}")
        return int(m.group(1))

    def version_dir(self, version: int) -> Path:
        return self.versions_dir / f"v{version:06d}"

    def resolve(self, version: int | None = None) -> Path:
        """Folder of a published version (the current one by default)."""
        if version is None:
            version = self.read_current()
            if version is None:
                raise IndexNotFound(
                    f"no published index in {self.root} (no {CURRENT} file). "
                    f"Build one with: strata index <folder> --corpus <name> --out {self.root}"
                )
        d = self.version_dir(version)
        if not (d / MANIFEST).is_file():
            raise IndexNotFound(f"index version {version} not found in {self.root}; "
                                f"available: {self.versions()}")
        return d

    def publish(self, manifest: dict[str, Any], keep: int = 3, grace_s: float = 0.0) -> int:
        """Freeze ``build/`` as the next version and switch readers to it."""
        version = (max(self.versions(), default=0)) + 1
        target = self.version_dir(version)
        tmp = self.versions_dir / f".tmp-v{version:06d}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for fname in TABLE_FILES.values():
            src = self.build / fname
            if src.exists():
                link_or_copy(src, tmp / fname)
        for folder in PUBLISHED_DIRS:
            if (self.build / folder).exists():
                shutil.copytree(self.build / folder, tmp / folder, copy_function=link_or_copy)
        manifest = dict(manifest, version=version)
        write_json_atomic(tmp / MANIFEST, manifest)
        os.replace(tmp, target)
        write_text_atomic(self.root / CURRENT, target.name + "\n")
        write_json_atomic(self.root / MANIFEST, manifest)
        self.prune(keep, grace_s)
        return version

    def unchanged_version(self, manifest: dict[str, Any]) -> int | None:
        """The current version when publishing ``build/`` with ``manifest`` would
        give readers nothing new, else None.

        Nothing new means: the manifest equals the current version's apart from
        what differs on every build (:data:`VOLATILE_MANIFEST_KEYS`: build time,
        stage timings, run id, ...), and every file publish would take from
        ``build/`` holds the same bytes as the current version's file of that
        name (the same set of files, each a hard link of it or byte-identical;
        stages rewrite Parquet tables whole, so an unchanged table is usually a
        new file with the same bytes). A current version that is missing or
        unreadable counts as changed, so the build is published."""
        try:
            version = self.read_current()
            if version is None:
                return None
            current = read_manifest(self.version_dir(version))
        except (IndexDamaged, OSError, ValueError):
            return None
        if not isinstance(current, dict) or _stable(current) != _stable(manifest):
            return None
        return version if same_files(self.build, self.version_dir(version)) else None

    def prune(self, keep: int, grace_s: float = 0.0) -> list[int]:
        """Drop all but the newest ``keep`` versions (never the current one).

        ``grace_s``: a version stays until the version that replaced it has been
        published that long, so a reader that opened it just before a publish
        can still load its tables (they load on first use)."""
        import time

        current = self.current_version()
        versions = self.versions()
        old = [v for v in versions[:-keep] if v != current] if keep > 0 else []
        if grace_s > 0:
            now = time.time()
            newer = dict(zip(versions, versions[1:]))

            def superseded_for(v: int) -> float:
                try:
                    return now - (self.version_dir(newer[v]) / MANIFEST).stat().st_mtime
                except (KeyError, OSError):
                    return 0.0
            old = [v for v in old if superseded_for(v) >= grace_s]
        for v in old:
            shutil.rmtree(self.version_dir(v), ignore_errors=True)
        return old


VOLATILE_MANIFEST_KEYS = frozenset({"created_at", "build_seconds", "stages", "run_id", "version",
                                    "query"})
"""Manifest keys that differ between two builds of the same content: when and
how long it built, which run, its version number, and the query-runtime
preparation (which follows from the published files and this machine)."""


def _stable(manifest: dict[str, Any]) -> str:
    """The manifest without its volatile keys, as canonical JSON."""
    kept = {k: v for k, v in manifest.items() if k not in VOLATILE_MANIFEST_KEYS}
    return json.dumps(kept, sort_keys=True, default=str)


def published_files(folder: Path) -> dict[str, Path]:
    """The files of a build (or version) folder that :meth:`IndexLayout.publish`
    freezes into a version, by path relative to ``folder``."""
    files = {}
    for fname in TABLE_FILES.values():
        if (folder / fname).is_file():
            files[fname] = folder / fname
    for sub in PUBLISHED_DIRS:
        if (folder / sub).is_dir():
            for p in (folder / sub).rglob("*"):
                if p.is_file():
                    files[p.relative_to(folder).as_posix()] = p
    return files


def same_files(build: Path, version_dir: Path) -> bool:
    """Whether ``build`` holds exactly the published files of ``version_dir``,
    byte for byte. Hard links of the version's files (what an untouched stage
    leaves) are compared without reading them."""
    mine, theirs = published_files(build), published_files(version_dir)
    if mine.keys() != theirs.keys():
        return False
    for name, path in mine.items():
        other = theirs[name]
        try:
            if os.path.samefile(path, other):
                continue
            if not filecmp.cmp(path, other, shallow=False):  # sizes first, then bytes
                return False
        except OSError:
            return False
    return True


def linked_folders(a: Path, b: Path) -> bool:
    """Whether the folders ``a`` and ``b`` hold the same files, each a hard link
    of the other's (relative path, device and inode; nothing is read): a vector
    table a build kept as it was, and the published version's copy of it."""
    def files(root: Path) -> set[tuple[str, int, int]]:
        out = set()
        for p in root.rglob("*"):
            if not p.is_dir():
                st = p.stat()
                out.add((p.relative_to(root).as_posix(), st.st_dev, st.st_ino))
        return out

    try:
        return a.is_dir() and b.is_dir() and files(a) == files(b)
    except OSError:
        return False


def link_or_copy(src, dst) -> str:
    # Build files are never modified in place (Parquet is rewritten whole, Lance
    # writes new fragment files), so a hard link is a safe, free snapshot.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return str(dst)


def replace_dir(new: Path, target: Path) -> None:
    """Put the finished folder ``new`` in ``target``'s place: the old one is moved
    aside, the new one renamed in, the old one removed. A reader that opened
    files of the old folder keeps them (they are only unlinked)."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def fetch_version(versions_dir: Path, name: str, fill: Callable[[Path], Any]) -> bool:
    """Put a published version fetched from elsewhere at ``versions_dir/name``, once:
    ``fill(folder)`` copies its files into a folder of this process's beside it, which
    is then renamed into place, so a reader never sees half a version. A version that
    is already here (its manifest present) is left as it is: versions never change.
    Returns whether it was fetched."""
    target = versions_dir / name
    if (target / MANIFEST).is_file():
        return False
    tmp = versions_dir / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        if not (target / MANIFEST).is_file():  # the remains of a fetch that died early
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / MANIFEST).is_file():
            raise
        # another process put the same version in place first
    return True


def _write_then_replace(path: Path, tmp: Path, write: Callable[[Path], None]) -> None:
    """``write`` the file at ``tmp``, then move it over ``path``; when the write
    fails (a full disk, a quota, an interrupt) the part written is removed, so a
    failed write leaves the old file and no half of a new one taking the space."""
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """``data`` at ``path`` all at once (a reader sees the old file or the new one),
    written beside it under a name of this process's, so two writers never mix.
    ``mode``: the new file's permissions, whatever the umask (default: the umask's)."""
    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as f:
            if mode is not None:  # a leftover file of the same name keeps its own
                os.fchmod(fd, mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    _write_then_replace(path, path.with_name(f".{path.name}.{os.getpid()}.tmp"), write)


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_manifest(version_dir: Path) -> dict[str, Any]:
    return json.loads((version_dir / MANIFEST).read_text())


def write_parquet_atomic(table, path: Path) -> None:
    """Write a Parquet file so that a crash leaves the old file, never half a new one."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    _write_then_replace(path, path.with_name(f".{path.name}.tmp"),
                        lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_parquet_file(path: Path, columns: list[str] | None = None):
    """One Parquet file as an Arrow table (only ``columns``, when given), its
    schema metadata kept.

    ``pq.ParquetFile``, not ``pq.read_table``: the latter goes through
    ``pyarrow.dataset``, whose first use imports pandas (a quarter of a second),
    a fixed cost of every rebuild that reads a file this way."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as f:
        return f.read(columns=columns)


def read_cache_table(path: Path, why: str = "cache"):
    """A Parquet table a build reuses (a cache, the previous build's rows): a polars
    DataFrame, or None when it is absent or unreadable.

    Published versions are hard links of ``build/``, so a published file damaged
    in place damages this copy too. An unreadable one is unlinked here (the
    published version keeps its own link) and the caller rebuilds what it
    covered, writing a new file."""
    import logging

    import polars as pl

    if not path.exists():
        return None
    try:
        return pl.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - truncated, overwritten, not Parquet
        logging.getLogger(__name__).warning(
            "%s %s is unreadable (%s): removed; what it held is rebuilt", why, path,
            short_error(e))
        path.unlink(missing_ok=True)
        return None


def read_json_or_empty(path: Path) -> dict[str, Any]:
    """A small JSON file a build keeps (its report, the encoder it used); {} when
    absent or unreadable (then rewritten whole by its writer)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def update_json(path: Path, **values: Any) -> dict[str, Any]:
    """Merge keys into a small JSON file (the build's per-stage report)."""
    data = read_json_or_empty(path)
    data.update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)
    return data
