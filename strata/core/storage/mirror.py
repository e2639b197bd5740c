"""Published versions on object storage (S3, GCS, Azure: any store obstore reaches).

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

URIs are those of :mod:`strata.core.storage.object_store` (one client, obstore, for every
store Strata reaches): ``s3://bucket/prefix?region=eu-west-1``, and for MinIO or another
S3-compatible store ``s3://bucket/prefix?endpoint_override=host:9000&scheme=http``.
Credentials come from the usual environment (``AWS_ACCESS_KEY_ID`` ...), never
from the URI.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlsplit

from strata.core.storage.layout import _VERSION_RE, CURRENT, VERSIONS, IndexNotFound, fetch_version
from strata.core.storage.object_store import (clean_uri, download, key, list_files, open_store,
                                              read_bytes, store_errors)
from strata.core.config.schema import MANIFEST
from strata.core.config.settings import ProjectSettings, load


def is_remote(location: str | os.PathLike) -> bool:
    scheme = urlsplit(str(location)).scheme
    return len(scheme) > 1 and scheme != "file"  # "C:" is a drive, not a scheme


def read_text(uri: str, rel: str) -> str | None:
    """The object ``rel`` under ``uri`` as text, or None when there is none."""
    store, prefix = open_store(uri)
    with store_errors(uri, "reading"):
        got = read_bytes(store, key(prefix, rel))
    return got.decode("utf-8") if got is not None else None


def push_version(version_dir: Path, uri: str) -> str:
    """Upload one published version folder, then point the store's CURRENT at it."""
    import obstore

    name = version_dir.name
    if not _VERSION_RE.match(name):
        raise ValueError(f"{version_dir} is not a version folder (v000001, ...)")
    store, prefix = open_store(uri)
    target = key(prefix, f"{VERSIONS}/{name}")
    files = sorted(p for p in version_dir.rglob("*") if p.is_file() and p.name != MANIFEST)
    with store_errors(uri, "uploading to"):
        for path in files:
            obstore.put(store, f"{target}/{path.relative_to(version_dir).as_posix()}", path)
        # the manifest last inside the version, CURRENT last of all
        manifest = (version_dir / MANIFEST).read_bytes()
        obstore.put(store, f"{target}/{MANIFEST}", manifest)
        obstore.put(store, key(prefix, MANIFEST), manifest)
        obstore.put(store, key(prefix, CURRENT), (name + "\n").encode())
    return f"{clean_uri(uri)}/{VERSIONS}/{name}"


def remote_versions(uri: str) -> list[int]:
    import obstore

    from obstore.exceptions import NotFoundError

    store, prefix = open_store(uri)
    with store_errors(uri, "listing"):
        try:
            listed = obstore.list_with_delimiter(store, key(prefix, VERSIONS) + "/")
        except (NotFoundError, FileNotFoundError):  # a local folder with no versions yet
            return []
    found = (_VERSION_RE.match(folder.rstrip("/").rsplit("/", 1)[-1])
             for folder in listed["common_prefixes"])
    return sorted(int(m.group(1)) for m in found if m)


def remote_current(uri: str) -> int:
    name = read_text(uri, CURRENT)
    if name is None:
        raise IndexNotFound(f"no published index at {clean_uri(uri)} (no {CURRENT} object)")
    m = _VERSION_RE.match(name.strip())
    if not m:
        raise IndexNotFound(f"{clean_uri(uri)}/{CURRENT} names {name.strip()!r}, not a version")
    return int(m.group(1))


def mirror_serves(version_dir: Path, uri: str) -> bool:
    """Whether the mirror at ``uri`` already serves this version in full: its
    CURRENT names the version (written after the version's files) and the
    version's manifest there is this one (a local index rebuilt from nothing
    numbers its versions from 1 again). False when either cannot be read."""
    from strata.core.storage.object_store import StoreError

    try:
        if (read_text(uri, CURRENT) or "").strip() != version_dir.name:
            return False
        remote = read_text(uri, f"{VERSIONS}/{version_dir.name}/{MANIFEST}")
    except (StoreError, ValueError):
        return False
    return remote is not None and remote == (version_dir / MANIFEST).read_text()


def cache_root() -> Path:
    return load(ProjectSettings).cache_dir or Path.home() / ".cache" / "strata"


def pull_version(uri: str, version: int | None = None) -> tuple[Path, int]:
    """Copy a published version from the store into the local cache (once);
    returns the local index folder and the version, ready for ``Index.open``."""
    version = remote_current(uri) if version is None else version
    local = cache_root() / "remote" / hashlib.sha256(clean_uri(uri).encode()).hexdigest()[:16]
    name = f"v{version:06d}"
    if (local / VERSIONS / name / MANIFEST).is_file():
        return local, version
    store, prefix = open_store(uri)
    source = key(prefix, f"{VERSIONS}/{name}") + "/"
    with store_errors(uri, "reading"):
        files = list(list_files(store, source))
    if MANIFEST not in files:
        raise IndexNotFound(f"index version {version} not found at {clean_uri(uri)}; "
                            f"available: {remote_versions(uri)}")

    def fill(folder: Path) -> None:
        with store_errors(uri, "reading"):
            for rel in files:
                download(store, source + rel, folder / rel)

    fetch_version(local / VERSIONS, name, fill)
    return local, version
