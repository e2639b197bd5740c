"""Vectors kept on disk and read without holding them all: the embedding shards'
cache files and the previous build's Lance tables (:class:`StoredVectors`), and the
scratch file the embeddings step writes every row's vector into before it writes the
tables kind by kind (:class:`StagedVectors`). Its own module so that the embedding
stage (:mod:`strata.stages.embed`) stays about encoding and writing tables."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa

from strata.core.storage.lance_scan import READ_BATCH, connect, scan, vector_matrix


class StoredVectors(Mapping):
    """Vectors kept on disk (the embedding shards' cache files, the previous build's
    Lance tables), readable by text hash without holding them all in memory.

    Only the hashes (and each one's vector length) are read up front; the vectors
    themselves are read a batch at a time by :meth:`fill`, which copies the ones
    asked for into a caller's matrix. Why: the vector tables are written one kind
    and one block of rows at a time, so a build holds one block of vectors, not
    every vector of the corpus twice over (once as read, once as written).

    A mapping (hash → vector) for callers that look up a few vectors; each such
    lookup reads the vectors again, so bulk readers use :meth:`fill`."""

    def __init__(self, dims: dict[str, int],
                 batches: Callable[[], Iterator[tuple[list[str], np.ndarray]]]):
        self.dims = dims  # text_hash → the length of its vector
        self._batches = batches  # (hashes, (rows, dim) matrix) in order; a later row wins

    @classmethod
    def of(cls, vectors: Mapping[str, np.ndarray]) -> StoredVectors:
        """In-memory vectors (hash → vector) seen through the same interface."""
        if isinstance(vectors, StoredVectors):
            return vectors
        return cls({h: int(v.shape[0]) for h, v in vectors.items()},
                   lambda: ((([h], np.asarray(v, np.float32).reshape(1, -1))
                             for h, v in vectors.items())))

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.dims:
            raise KeyError(key)
        out = np.zeros((1, self.dims[key]), np.float32)
        self.fill({key: [0]}, out)
        return out[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.dims)

    def __len__(self) -> int:
        return len(self.dims)

    def __contains__(self, key: object) -> bool:
        return key in self.dims

    @property
    def dim(self) -> int | None:
        """The length of the first vector (all of one build share it), None when empty."""
        return next(iter(self.dims.values()), None)

    def fill(self, wanted: Mapping[str, list[int]], out: np.ndarray) -> None:
        """``out[rows] = vector`` for every ``hash: rows`` of ``wanted`` held here with
        ``out``'s width, reading the stored vectors one batch at a time."""
        if not wanted:
            return
        for hashes, matrix in self._batches():
            if matrix.shape[1] != out.shape[1]:
                continue
            for r, h in enumerate(hashes):
                rows = wanted.get(h)
                if rows is not None:
                    out[rows] = matrix[r]


def lance_batches(lance_dir: Path, names: list[str]
                   ) -> Callable[[], Iterator[tuple[list[str], np.ndarray]]]:
    """A reader of (hashes, vectors) batches over the named Lance tables of ``lance_dir``."""
    def batches() -> Iterator[tuple[list[str], np.ndarray]]:
        db = connect(lance_dir)
        for name in names:
            for batch in scan(db.open_table(name), ["text_hash", "vector"]):
                yield batch.column("text_hash").to_pylist(), vector_matrix(batch.column("vector"))
    return batches


def _parquet_batches(files: list[Path]) -> Callable[[], Iterator[tuple[list[str], np.ndarray]]]:
    """A reader of (hashes, vectors) batches over the embedding shards' cache files."""
    def batches() -> Iterator[tuple[list[str], np.ndarray]]:
        for f in files:
            for batch in _cache_batches(f):
                yield batch.column("text_hash").to_pylist(), vector_matrix(batch.column("vector"))
    return batches


def _cache_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """(text_hash, vector) batches of one vector cache file, read on this thread:
    Arrow's reader threads would each keep a heap of their own."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).iter_batches(READ_BATCH, columns=["text_hash", "vector"],
                                             use_threads=False)


def read_vector_cache(cache_dir: Path | None) -> StoredVectors:
    """The embedding shards' output files as :class:`StoredVectors` (text_hash →
    vector): every file is read through once, a batch at a time, keeping only its
    hashes. An unreadable file is removed (:func:`strata.core.storage.layout.read_cache_table`'s
    rule): its texts are encoded again."""
    dims: dict[str, int] = {}
    files: list[Path] = []
    if cache_dir is not None and cache_dir.is_dir():
        for f in sorted(cache_dir.glob("*.parquet")):
            found = _cache_file_hashes(f)
            if found is not None:
                dims.update(found)
                files.append(f)
    return StoredVectors(dims, _parquet_batches(files))


def _cache_file_hashes(path: Path) -> dict[str, int] | None:
    """text_hash → vector length of one vector cache file, or None (and the file
    removed) when it cannot be read to the end."""
    import logging

    from strata.core.storage.layout import short_error

    out: dict[str, int] = {}
    try:
        for batch in _cache_batches(path):
            vectors = batch.column("vector")
            dim = len(vectors[0]) if len(vectors) else 0
            out.update(dict.fromkeys(batch.column("text_hash").to_pylist(), dim))
    except Exception as e:  # noqa: BLE001 - truncated, overwritten, not Parquet
        logging.getLogger(__name__).warning(
            "vector cache %s is unreadable (%s): removed; what it held is rebuilt", path,
            short_error(e))
        path.unlink(missing_ok=True)
        return None
    return out


class StagedVectors:
    """Every row's vector in a scratch file beside the tables, rows grouped by kind
    (each kind's rows in table order), written by one pass over each source and read
    back one block of one kind at a time.

    Why a file: the tables are written kind by kind, while the stored vectors come
    in their own order; gathering each block straight from the sources would read
    every stored vector once per block, a cost that grows with the square of the
    corpus. Written with ``pwrite`` and read with ``pread`` (no mapping), so the
    vectors sit in the page cache, not in this process's memory."""

    def __init__(self, path: Path, tables: dict[str, np.ndarray], dim: int):
        """``tables``: each kind's table rows, in the order the tables are written
        (:func:`strata.stages.vector_contents.rows_by_kind`)."""
        self.path, self.dim = path, dim
        order = np.concatenate(list(tables.values())) if tables else np.zeros(0, np.int64)
        self.position = np.empty(len(order), dtype=np.int64)  # table row → row in the file
        self.position[order] = np.arange(len(order), dtype=np.int64)
        self.shape = (len(order), dim)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.ftruncate(self.fd, len(order) * dim * 4)  # zeros: a vector nobody holds

    def __setitem__(self, rows: list[int], vector: np.ndarray) -> None:
        data = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
        for r in rows:
            os.pwrite(self.fd, data, int(r) * self.dim * 4)

    def read(self, at: np.ndarray, out: np.ndarray) -> None:
        """``out`` = the vectors of table rows ``at`` (one kind's, consecutive)."""
        start = int(self.position[at[0]])
        raw = os.pread(self.fd, len(at) * self.dim * 4, start * self.dim * 4)
        out[:] = np.frombuffer(raw, dtype=np.float32).reshape(len(at), self.dim)

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


def stage_vectors(staged: StagedVectors, hashes: list[str], sources: list[StoredVectors],
                  own: dict[int, int], encoded: np.ndarray, skip: list[bool] | None = None) -> None:
    """Write every row's vector into ``staged``: encoded here (``own``: table row →
    row of ``encoded``), else from the first source that holds its hash if of the
    tables' width (else it stays zero, as a vector of another model would). Each
    source is read through once. Rows ``skip`` marks are left out (their table is
    not written)."""
    wanted: list[dict[str, list[int]]] = [{} for _ in sources]
    for i, h in enumerate(hashes):
        if skip is not None and skip[i]:
            continue
        at = int(staged.position[i])
        if i in own:
            staged[[at]] = encoded[own[i]]
            continue
        for source, want in zip(sources, wanted):
            if h in source.dims:
                want.setdefault(h, []).append(at)
                break
    for source, want in zip(sources, wanted):
        source.fill(want, staged)
