"""Reading Lance vector tables a batch of rows at a time, only the columns asked for.

A vector table holds each embedded text beside its vector, and the texts are most of
its bytes: a reader that wants ids and vectors (the graph's synonymy edges, the query
arrays at publish, the vector cache of the next build) reads those columns in batches,
so what it holds grows with a batch, not with the corpus. One module for the build's
stages and the foundation's query arrays alike; lancedb is imported only when a table
is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

# Rows read at a time.
READ_BATCH = 4096


def table_names(db) -> list[str]:
    """The table names of a LanceDB connection (whichever shape its version returns)."""
    res = db.list_tables()
    return list(getattr(res, "tables", res))


def connect(lance_dir: Path):
    """A LanceDB connection to ``lance_dir``."""
    from strata.core.library_logs import quiet_libraries

    quiet_libraries()
    import lancedb

    return lancedb.connect(str(lance_dir))


def scan(table, columns: list[str], batch: int = READ_BATCH) -> Iterator:
    """The ``columns`` of an open Lance ``table`` as Arrow record batches of at most
    ``batch`` rows, in the table's order.

    Each range of ``batch`` rows is a query of its own (offset and limit), not one
    streamed scan: Lance's scan decodes ahead of its reader, as far as an I/O buffer
    sized for throughput allows, so a table read through one scan was held about
    whole however small the batches taken from it. A range query reads only its
    rows, so what a reader holds is one range, at about the same speed."""
    total = table.count_rows()
    for start in range(0, total, max(1, batch)):
        part = table.search().select(columns).offset(start).limit(batch).to_arrow()
        yield from part.to_batches()


def vector_matrix(column) -> np.ndarray:
    """An Arrow list column of equal-length float vectors as one (rows, dim)
    float32 matrix, without a Python list per row."""
    import pyarrow.compute as pc

    arr = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    rows = len(arr)
    if rows == 0:
        return np.zeros((0, 0), np.float32)
    flat = pc.list_flatten(arr).to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return flat.reshape(rows, -1)
