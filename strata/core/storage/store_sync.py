"""The build kept on an object store, so a build's steps can run on workers that
share nothing but the store (Kubernetes pods, a Dask cluster without a common
volume).

A corpus declared with ``shared: store`` keeps what its builds work on under its
``mirror`` URI, beside the published versions::

    <mirror>/build/...      the stages' working copy (tables, shard caches, Lance tables)
    <mirror>/cache/...      what outlives builds (LLM responses, offline OpenIE, ...)
    <mirror>/versions/vN/   published versions, CURRENT naming the one readers open

Each worker works in its own folder (the corpus's ``out`` on that machine) exactly
as a build on one machine does, with POSIX renames and hard-linked snapshots. A
step first *pulls* (the worker's ``build/`` and ``cache/`` become what the store
holds; the current version is fetched once) and, when it succeeds, *pushes*
(every file it wrote or removed). Only files that changed move: each pulled file
is recorded with its entity tag, size and modification time.

Steps that run side by side write different files, with three exceptions every
stage touches: the build report, the failure list and the LLM response cache. A
push replaces a file only if the store still holds the version this worker
pulled (``If-Match``); when another step got there first, the two are merged —
JSON keys and table rows this step changed applied to the store's copy, cache
rows united — and written conditionally again. Any other file written by two
steps at once is a :class:`SyncConflict`, never a silent loss.
"""

from __future__ import annotations

import fcntl
import filecmp
import json
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from strata.core.storage.layout import (BUILD, CACHE, CURRENT, VERSIONS, fetch_version,
                               write_bytes_atomic, write_json_atomic)
from strata.core.storage.object_store import (clean_uri, download, key, list_files, open_store,
                                              read_bytes, store_errors)

SYNCED = (BUILD, CACHE)  # the folders steps read and write, kept on the store
RECORD = ".store-sync.json"  # what this worker pulled: rel → [etag, size, mtime_ns]
BASES = ".store-sync"  # the pulled copies of mergeable files (the merge's common base)
THREADS = 8  # transfers at once: object stores reward parallel requests


class SyncConflict(RuntimeError):
    """Two steps changed the same file of the build, which no merge reconciles."""


@dataclass
class SyncStats:
    """What one pull or push moved, for the step's log line."""

    files: int = 0
    bytes: int = 0
    deleted: int = 0
    merged: list[str] = field(default_factory=list)

    def line(self, verb: str) -> str:
        merged = f", merged {', '.join(self.merged)}" if self.merged else ""
        return (f"{verb} {self.files} files ({self.bytes / 1e6:.1f} MB), "
                f"{self.deleted} removed{merged}")


def _skipped(rel: str) -> bool:
    """Files that are one process's business: temporary files of atomic writes and
    SQLite's write-ahead log (checkpointed into its database when a stage closes it)."""
    parts = rel.split("/")
    name = parts[-1]
    if any(part in (".", "..") for part in parts) or "" in parts[:-1]:
        return True  # a key that would land outside its folder: never written
    return (not name  # a folder marker (what pyarrow's create_dir leaves on S3)
            or name.endswith((".tmp", "-wal", "-shm")) or name.startswith(".tmp")
            or "/.tmp-" in f"/{rel}")


class StoreWorkspace:
    """One worker's folder ``root`` kept in step with the build at ``uri``."""

    def __init__(self, uri: str, root: str | os.PathLike, threads: int = THREADS):
        self.uri = uri
        self.root = Path(root)
        self.threads = threads
        self.store, self.prefix = open_store(uri)

    # -- the record of what was pulled ------------------------------------------------
    def _load_record(self) -> dict[str, list]:
        try:
            data = json.loads((self.root / RECORD).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("uri") != clean_uri(self.uri):
            return {}  # another store's record: start again
        return data.get("files") or {}

    def _save_record(self, files: dict[str, list]) -> None:
        write_json_atomic(self.root / RECORD, {"uri": clean_uri(self.uri), "files": files})

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One pull or push at a time per folder (steps of one machine in step
        processes share the folder)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{RECORD}.lock", "a+") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _stamp(self, rel: str, etag: str) -> list:
        st = (self.root / rel).stat()
        return [etag, st.st_size, st.st_mtime_ns]

    def _unchanged(self, rel: str, stamp: list | None) -> bool:
        try:
            st = (self.root / rel).stat()
        except OSError:
            return False
        return stamp is not None and [st.st_size, st.st_mtime_ns] == stamp[1:]

    # -- listing and moving files -----------------------------------------------------
    def _remote(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for folder in SYNCED:
            out.update({f"{folder}/{rel}": meta for rel, meta in self._listed(folder).items()})
        return out

    def _listed(self, folder: str) -> dict[str, dict]:
        """The files under ``folder`` on the store (relative to it), without folder
        markers (:func:`strata.core.storage.object_store.list_files`)."""
        found = list_files(self.store, key(self.prefix, folder) + "/")
        return {rel: m for rel, m in found.items() if not _skipped(f"{folder}/{rel}")}

    def _local(self) -> Iterator[str]:
        for folder in SYNCED:
            base = self.root / folder
            for dirpath, _dirs, files in os.walk(base):
                for name in files:
                    rel = Path(dirpath, name).relative_to(self.root).as_posix()
                    if not _skipped(rel):
                        yield rel

    def _download(self, rel: str, target: Path | None = None) -> tuple[str, int]:
        """Fetch one object into ``target`` (default: its place under root), all at
        once for readers (a temporary file renamed in: hard links to the old file,
        such as a published version's, keep the old bytes)."""
        path = target or self.root / rel
        tmp = path.with_name(f".{path.name}.{os.getpid()}.pull.tmp")
        meta, size = download(self.store, key(self.prefix, rel), tmp)
        # stamped with the object's time, in whole seconds: a step that rewrites the
        # file moments later cannot leave the same size and time behind
        stamp_ns = int(meta["last_modified"].timestamp()) * 10**9
        os.utime(tmp, ns=(stamp_ns, stamp_ns))
        os.replace(tmp, path)
        return meta.get("e_tag") or "", size

    def _map(self, fn: Callable, items: list) -> list:
        if len(items) <= 1 or self.threads <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(fn, items))

    # -- pull --------------------------------------------------------------------------
    def pull(self) -> SyncStats:
        """Make this folder's ``build/`` and ``cache/`` what the store holds (files
        found only here are removed: the store is the build), and fetch the
        current version if this folder lacks it."""
        stats = SyncStats()
        with self._locked(), store_errors(self.uri, "reading the build from"):
            record = self._load_record()
            remote = self._remote()
            fetch = [rel for rel, meta in remote.items()
                     if not (record.get(rel) and record[rel][0] == meta.get("e_tag")
                             and self._unchanged(rel, record[rel]))]

            def get(rel: str) -> tuple[str, list, int]:
                etag, size = self._download(rel)
                if merge_for(rel) is not None:  # the base a later merge starts from
                    base = self.root / BASES / rel
                    base.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(self.root / rel, base)
                return rel, self._stamp(rel, etag), size

            for rel, stamp, size in self._map(get, fetch):
                record[rel] = stamp
                stats.bytes += size
            stats.files = len(fetch)
            for rel in [r for r in self._local() if r not in remote]:
                (self.root / rel).unlink(missing_ok=True)
                (self.root / BASES / rel).unlink(missing_ok=True)
                stats.deleted += 1
            record = {rel: stamp for rel, stamp in record.items() if rel in remote}
            self._save_record(record)
            for folder in SYNCED:
                (self.root / folder).mkdir(exist_ok=True)
            stats.files += self._pull_current()
        return stats

    def _pull_current(self) -> int:
        """The store's CURRENT and the version it names (fetched once: versions
        never change), so publishing here numbers and compares as on the store."""
        from strata.core.storage.layout import _VERSION_RE

        current = read_bytes(self.store, key(self.prefix, CURRENT))
        if current is None:
            return 0
        name = current.decode("utf-8").strip()
        if not _VERSION_RE.match(name):
            return 0
        fetched: list[str] = []

        def fill(folder: Path) -> None:  # only for a version not here yet: no listing else
            fetched.extend(self._listed(f"{VERSIONS}/{name}"))
            self._map(lambda r: self._download(f"{VERSIONS}/{name}/{r}", folder / r), fetched)

        fetch_version(self.root / VERSIONS, name, fill)
        write_bytes_atomic(self.root / CURRENT, (name + "\n").encode())
        return len(fetched)

    # -- push --------------------------------------------------------------------------
    def push(self) -> SyncStats:
        """Upload what changed here since the pull, and remove from the store what
        was removed here. A file another step replaced meanwhile is merged when
        its kind allows (:func:`merge_for`), else :class:`SyncConflict`."""
        import obstore

        stats = SyncStats()
        with self._locked(), store_errors(self.uri, "writing the build to"):
            record = self._load_record()
            local = set(self._local())
            changed = [rel for rel in sorted(local) if not self._unchanged(rel, record.get(rel))]

            def put(rel: str) -> tuple[str, list, bool]:
                etag, merged = self._put(rel, record.get(rel))
                return rel, self._stamp(rel, etag), merged

            for rel, stamp, merged in self._map(put, changed):
                record[rel] = stamp
                stats.bytes += stamp[1]
                if merged:
                    stats.merged.append(rel)
            stats.files = len(changed)
            gone = [rel for rel in record if rel not in local]
            for rel in gone:
                obstore.delete(self.store, key(self.prefix, rel))
                record.pop(rel)
                stats.deleted += 1
            self._save_record(record)
        return stats

    def _put(self, rel: str, stamp: list | None) -> tuple[str, bool]:
        """Write one file to the store if the store still holds what was pulled
        (or nothing, for a new file); returns (etag, whether it was merged)."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        merge = merge_for(rel)
        path = self.root / rel
        merged = False
        for _ in range(8):  # each lost race merges again with the newer copy
            mode = {"e_tag": stamp[0]} if stamp and stamp[0] else "create"
            try:
                result = obstore.put(self.store, key(self.prefix, rel), path, mode=mode)
            except (AlreadyExistsError, PreconditionError):
                theirs = self.root / BASES / f"{rel}.theirs"
                etag, _ = self._download(rel, theirs)
                if filecmp.cmp(theirs, path, shallow=False):
                    # the same bytes from another step (a content-addressed blob two
                    # shards both met): nothing to reconcile
                    theirs.unlink()
                    return etag, False
                if merge is None:
                    theirs.unlink()
                    raise SyncConflict(
                        f"{rel} was changed on the store by another step while this one "
                        f"changed it too; steps that run side by side must write "
                        f"different files") from None
                merge(self.root / BASES / rel, path, theirs)
                os.replace(theirs, path)
                stamp, merged = [etag], True
                continue
            if merge is not None:
                base = self.root / BASES / rel
                base.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, base)
            return result.get("e_tag") or "", merged
        raise SyncConflict(f"{rel}: the store kept changing it; the push gave up")


def merge_for(rel: str) -> Callable[[Path, Path, Path], None] | None:
    """How two steps' versions of a shared file are reconciled — ``merge(base,
    ours, theirs)`` rewrites ``theirs`` with our change applied — or None for a
    file only one step writes."""
    name = rel.rsplit("/", 1)[-1]
    if name.endswith(".json") and rel.startswith("build/"):
        return _merge_json
    if name == "failures.parquet":
        return _merge_rows
    if name.endswith(".sqlite"):
        return _merge_sqlite
    return None


def _merge_json(base: Path, ours: Path, theirs: Path) -> None:
    """Keys this step added, changed or removed, applied to the other's copy."""
    def read(p: Path) -> dict:
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    old, mine, result = read(base), read(ours), read(theirs)
    for k, v in mine.items():
        if old.get(k) != v:
            result[k] = v
    for k in set(old) - set(mine):
        result.pop(k, None)
    write_json_atomic(theirs, result)


def _merge_rows(base: Path, ours: Path, theirs: Path) -> None:
    """Rows this step added or removed, applied to the other's copy of a table."""
    import polars as pl

    from strata.core.storage.layout import write_parquet_atomic

    def read(p: Path):
        return pl.read_parquet(p) if p.exists() else None

    old, mine, result = read(base), read(ours), read(theirs)
    if mine is None:
        return
    if result is None:
        result = mine.clear()
    if old is not None and old.height:
        result = result.join(old.join(mine, on=old.columns, how="anti", nulls_equal=True),
                             on=result.columns, how="anti", nulls_equal=True)
        added = mine.join(old, on=mine.columns, how="anti", nulls_equal=True)
    else:
        added = mine
    write_parquet_atomic(pl.concat([result, added.select(result.columns)]).to_arrow(), theirs)


def _merge_sqlite(base: Path, ours: Path, theirs: Path) -> None:
    """A response cache only grows: every row of ours copied into theirs."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(theirs, isolation_level=None)) as con:
        con.execute("ATTACH DATABASE ? AS ours", (str(ours),))
        tables = [r[0] for r in con.execute(
            "SELECT name FROM ours.sqlite_master WHERE type = 'table'")]
        con.execute("BEGIN")
        for table in tables:
            con.execute(f'CREATE TABLE IF NOT EXISTS main."{table}" AS '
                        f'SELECT * FROM ours."{table}" WHERE 0')
            con.execute(f'INSERT OR IGNORE INTO main."{table}" SELECT * FROM ours."{table}"')
        con.execute("COMMIT")
        con.execute("DETACH DATABASE ours")
        con.execute("PRAGMA journal_mode=DELETE")  # one file to upload, no log beside it
