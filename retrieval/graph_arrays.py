"""The index graph as compact arrays (:class:`strata.core.query_arrays.Graph`) and
the partial sort every mode ranks with.

Nodes have dense integer ids; edges are a CSR adjacency (``indptr``,
``indices``, per-edge type code and weight) and the hierarchy a parent array
plus a children CSR. Query-time walks are array lookups: no per-query dict
building, and cost proportional to what is visited.
"""

from __future__ import annotations

import numpy as np

# the graph's arrays are written at publish and memory-mapped here: one definition, in
# the foundation, shared by the build that writes them and the queries that read them
from strata.core.query_arrays import EDGE_CODE, KIND_CODE, Graph
from strata.core.config.settings import QuerySettings, value_or_default

__all__ = ["EDGE_CODE", "KIND_CODE", "Graph", "limit_blas_threads", "top_k"]


def top_k(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of ``rows`` by ``scores`` (aligned arrays), best first, ties in
    row order: (rows, scores). A partial sort, so a query over a large index costs
    O(n + k log k), not a full sort."""
    if k <= 0 or not len(rows):
        return rows[:0], scores[:0]
    if k < len(rows):
        part = np.argpartition(-scores, k - 1)[:k]
        part.sort()  # back to row order, so the stable sort below breaks ties by row
        rows, scores = rows[part], scores[part]
    order = np.argsort(-scores, kind="stable")
    return rows[order], scores[order]


_BLAS_LIMITED = False


def limit_blas_threads() -> None:
    """Run numpy's BLAS on one thread in a querying process (``STRATA_BLAS_THREADS``,
    default 1; 0 leaves it alone).

    Why: after a matrix-vector product OpenBLAS's worker threads spin-wait for
    more work, and on a small machine they steal the cores the next query
    embedding needs (it took about twice as long with them spinning). The
    products here are memory-bound matrix-vector ones, no faster on more threads.
    Applied once, process-wide, when an index first loads its vectors."""
    global _BLAS_LIMITED
    if _BLAS_LIMITED:
        return
    _BLAS_LIMITED = True
    n = value_or_default(QuerySettings, "blas_threads")
    if n > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n, user_api="blas")
