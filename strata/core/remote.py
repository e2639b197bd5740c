"""Published versions on object storage (S3, GCS, Azure, or any pyarrow file system).

Builds need a POSIX folder (atomic renames, hard-linked snapshots), so a build
always runs on a local or shared disk. A published version can then be
mirrored to a URI, with the same layout as a local index::

    s3://bucket/indexes/docs/versions/v000007/...   every file of the version
    s3://bucket/indexes/docs/CURRENT                 written last, in one PUT

Readers open the URI: the pinned version is copied once into a local cache
(``STRATA_CACHE_DIR``, default ``~/.cache/strata``) and opened from there, so
LanceDB and Parquet read local files at local speed. A version folder on the
store is complete before ``CURRENT`` names it, and a single-object PUT is
atomic, so readers never see a half-uploaded version.

URIs follow pyarrow: ``s3://bucket/prefix?region=eu-west-1``, and for MinIO or
another S3-compatible store ``s3://bucket/prefix?endpoint_override=host:9000&scheme=http``.
Credentials come from the usual environment (``AWS_ACCESS_KEY_ID`` ...), never
from the URI.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlsplit

from strata.core.layout import _VERSION_RE, CURRENT, VERSIONS, IndexNotFound, fetch_version
from strata.core.schema import MANIFEST
from strata.core.object_store import clean_uri
from strata.core.settings import ProjectSettings, load


def is_remote(location: str | os.PathLike) -> bool:
    scheme = urlsplit(str(location)).scheme
    return len(scheme) > 1 and scheme != "file"  # "C:" is a drive, not a scheme


def _fs(uri: str):
    from pyarrow import fs

    filesystem, base = fs.FileSystem.from_uri(uri)
    return filesystem, base.rstrip("/")


def _read_text(filesystem, path: str) -> str:
    with filesystem.open_input_stream(path) as f:
        return f.read().decode("utf-8")


def _write_text(filesystem, path: str, text: str) -> None:
    with filesystem.open_output_stream(path) as f:
        f.write(text.encode("utf-8"))


def push_version(version_dir: Path, uri: str) -> str:
    """Upload one published version folder, then point the store's CURRENT at it."""
    from pyarrow import fs

    filesystem, base = _fs(uri)
    name = version_dir.name
    if not _VERSION_RE.match(name):
        raise ValueError(f"{version_dir} is not a version folder (v000001, ...)")
    target = f"{base}/{VERSIONS}/{name}"
    filesystem.create_dir(target, recursive=True)
    fs.copy_files(str(version_dir), target, source_filesystem=fs.LocalFileSystem(),
                  destination_filesystem=filesystem)
    # the manifest last inside the version, CURRENT last of all
    manifest = (version_dir / MANIFEST).read_text()
    _write_text(filesystem, f"{target}/{MANIFEST}", manifest)
    _write_text(filesystem, f"{base}/{MANIFEST}", manifest)
    _write_text(filesystem, f"{base}/{CURRENT}", name + "\n")
    return f"{clean_uri(uri)}/{VERSIONS}/{name}"


def remote_versions(uri: str) -> list[int]:
    from pyarrow import fs

    filesystem, base = _fs(uri)
    try:
        infos = filesystem.get_file_info(fs.FileSelector(f"{base}/{VERSIONS}", allow_not_found=True))
    except FileNotFoundError:
        return []
    found = (_VERSION_RE.match(i.base_name) for i in infos if i.type == fs.FileType.Directory)
    return sorted(int(m.group(1)) for m in found if m)


def remote_current(uri: str) -> int:
    filesystem, base = _fs(uri)
    try:
        name = _read_text(filesystem, f"{base}/{CURRENT}").strip()
    except (FileNotFoundError, OSError) as e:
        raise IndexNotFound(f"no published index at {uri} (no {CURRENT} object)") from e
    m = _VERSION_RE.match(name)
    if not m:
        raise IndexNotFound(f"{uri}/{CURRENT} names {name!r}, not a version")
    return int(m.group(1))


def cache_root() -> Path:
    return load(ProjectSettings).cache_dir or Path.home() / ".cache" / "strata"


def pull_version(uri: str, version: int | None = None) -> tuple[Path, int]:
    """Copy a published version from the store into the local cache (once);
    returns the local index folder and the version, ready for ``Index.open``."""
    from pyarrow import fs

    version = remote_current(uri) if version is None else version
    local = cache_root() / "remote" / hashlib.sha256(clean_uri(uri).encode()).hexdigest()[:16]
    name = f"v{version:06d}"
    if (local / VERSIONS / name / MANIFEST).is_file():
        return local, version
    filesystem, base = _fs(uri)
    source = f"{base}/{VERSIONS}/{name}"
    if filesystem.get_file_info(f"{source}/{MANIFEST}").type != fs.FileType.File:
        raise IndexNotFound(f"index version {version} not found at {uri}; "
                            f"available: {remote_versions(uri)}")
    fetch_version(local / VERSIONS, name, lambda folder: fs.copy_files(
        source, str(folder), source_filesystem=filesystem,
        destination_filesystem=fs.LocalFileSystem()))
    return local, version
