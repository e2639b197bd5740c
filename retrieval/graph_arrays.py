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

__all__ = ["EDGE_CODE", "KIND_CODE", "Graph", "top_k"]


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
