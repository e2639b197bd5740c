"""Approximate nearest neighbours for large indexes: an inverted file over the
query arrays' vectors, written at publish beside them.

Below ``STRATA_ANN_MIN_VECTORS`` vectors a query scans every vector (one
matrix-vector product over the memory-mapped rows: exact, and fast at that
size). Above it a scan reads the whole matrix per query, so a publish also
writes ``query/ann.faiss``: faiss's IVF with 8-bit scalar-quantised vectors
(a quarter of the float32 size, so the part a query keeps resident is small),
searched over ``STRATA_ANN_NPROBE`` lists. Its best candidates are then scored
again exactly on the float32 rows (a few hundred rows touched), so the scores
a user sees are the exact cosines and only the candidate set is approximate.
``benchmarks.cold_start`` reports its recall@10 against the exact scan.

faiss (already a dependency for the build's kNN edges and image groups) is
imported only when an index has this file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

ANN_FILE = "ann.faiss"
TRAIN_PER_LIST = 64  # training vectors per inverted list (faiss warns below 39)
RERANK = 10  # exact re-scoring of this many candidates per result asked for


def lists_for(n: int) -> int:
    """Inverted lists for ``n`` vectors: about 2·sqrt(n), the usual IVF sizing,
    so a probe of a few dozen lists scans a few percent of the vectors."""
    return max(1, min(65536, int(2 * np.sqrt(max(n, 1)))))


def build(vectors: np.ndarray, rows: np.ndarray, path: Path, seed: int = 0) -> None:
    """Write the IVF-SQ8 index of ``vectors[rows]`` (unit rows) to ``path``,
    labelled with the dense row ids ``rows``."""
    import faiss

    dim = vectors.shape[1]
    nlist = lists_for(len(rows))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit,
                                          faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(seed)
    take = min(len(rows), nlist * TRAIN_PER_LIST)
    sample = np.sort(rng.choice(len(rows), size=take, replace=False))
    # rows come through AnnIndex.rows: positioned reads when the matrix is a mapped
    # file (a publish writes it so), which leave none of it resident
    index.train(np.ascontiguousarray(AnnIndex.rows(vectors, rows[sample]), dtype=np.float32))
    step = 65536
    for a in range(0, len(rows), step):
        part = rows[a:a + step]
        index.add_with_ids(np.ascontiguousarray(AnnIndex.rows(vectors, part), dtype=np.float32),
                           part.astype(np.int64))
    tmp = path.with_name(f".{path.name}.tmp")
    faiss.write_index(index, str(tmp))
    tmp.replace(path)


class AnnIndex:
    """The IVF index of one version, opened for queries."""

    def __init__(self, path: Path, nprobe: int):
        import faiss

        self.index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        self.index.nprobe = max(1, int(nprobe))

    def candidates(self, q: np.ndarray, n: int) -> np.ndarray:
        """Dense row ids of about the ``n`` best rows for unit query ``q``."""
        _, ids = self.index.search(np.asarray(q, np.float32).reshape(1, -1), int(n))
        ids = ids[0]
        return ids[ids >= 0]


    @staticmethod
    def rows(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``vectors[rows]`` (sorted rows) read from the file with positioned reads
        when ``vectors`` is memory-mapped: a page fault on a mapped file maps a
        whole large folio, so a few hundred scattered rows read through the map
        would leave most of the file resident."""
        path, offset = getattr(vectors, "filename", None), getattr(vectors, "offset", None)
        if path is None or offset is None:
            return np.asarray(vectors[rows], dtype=np.float32)
        dim = vectors.shape[1]
        width = dim * vectors.dtype.itemsize
        out = np.empty((len(rows), dim), dtype=vectors.dtype)
        fd = os.open(path, os.O_RDONLY)
        try:
            for i, r in enumerate(rows.tolist()):
                out[i] = np.frombuffer(os.pread(fd, width, offset + r * width), vectors.dtype)
        finally:
            os.close(fd)
        return out


def open_ann(folder: Path, nprobe: int) -> AnnIndex | None:
    """The ANN index in a version's ``query/`` folder, or None when it has none."""
    path = folder / ANN_FILE
    return AnnIndex(path, nprobe) if path.exists() else None
