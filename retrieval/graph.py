"""The index graph as compact arrays, built once per opened index.

Nodes get dense integer ids; edges become a CSR adjacency (``indptr``,
``indices``, per-edge type code and weight) and the hierarchy a parent array
plus a children CSR. Query-time walks are array lookups: no per-query dict
building, and cost proportional to what is visited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from strata.schema import EDGE_TYPES, NODE_KINDS

EDGE_CODE = {t: i for i, t in enumerate(EDGE_TYPES)}
KIND_CODE = {k: i for i, k in enumerate(NODE_KINDS)}


@dataclass
class Graph:
    ids: list[str]  # dense id → node_id
    index: dict[str, int]  # node_id → dense id
    kind: np.ndarray  # int8 kind code per node
    parent: np.ndarray  # int32 dense parent id, -1 for roots
    child_ptr: np.ndarray
    child_idx: np.ndarray  # children in document order
    indptr: np.ndarray
    indices: np.ndarray  # neighbour dense ids
    etype: np.ndarray  # int8 edge type code
    weight: np.ndarray  # float32
    relation: list[str]  # per edge (for explanations)

    @classmethod
    def build(cls, nodes: pl.DataFrame, edges: pl.DataFrame) -> Graph:
        ids = nodes["node_id"].to_list()
        index = {nid: i for i, nid in enumerate(ids)}
        n = len(ids)
        kind = np.array([KIND_CODE.get(k, -1) for k in nodes["kind"].to_list()], dtype=np.int8)
        parent = np.array([index.get(p, -1) if p else -1 for p in nodes["parent_id"].to_list()],
                          dtype=np.int32)
        ordinal = nodes["ordinal"].fill_null(0).to_numpy() if "ordinal" in nodes.columns \
            else np.zeros(n, dtype=np.int32)
        has_parent = np.nonzero(parent >= 0)[0]
        order = has_parent[np.lexsort((ordinal[has_parent], parent[has_parent]))]
        child_ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(child_ptr, parent[order] + 1, 1)
        child_ptr = np.cumsum(child_ptr)
        child_idx = order.astype(np.int32)

        e = edges.filter(pl.col("src").is_in(ids) & pl.col("dst").is_in(ids)) if edges.height else edges
        src = np.array([index[s] for s in e["src"].to_list()], dtype=np.int64)
        dst = np.array([index[d] for d in e["dst"].to_list()], dtype=np.int32)
        et = np.array([EDGE_CODE.get(t, len(EDGE_CODE)) for t in e["type"].to_list()], dtype=np.int8)
        w = e["weight"].to_numpy().astype(np.float32) if e.height else np.zeros(0, np.float32)
        rel = e["relation"].to_list()
        order = np.argsort(src, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        indptr = np.cumsum(indptr)
        return cls(ids=ids, index=index, kind=kind, parent=parent, child_ptr=child_ptr,
                   child_idx=child_idx, indptr=indptr, indices=dst[order], etype=et[order],
                   weight=w[order], relation=[rel[i] for i in order])

    def children(self, i: int) -> np.ndarray:
        return self.child_idx[self.child_ptr[i]:self.child_ptr[i + 1]]

    def siblings(self, i: int) -> np.ndarray:
        p = self.parent[i]
        if p < 0:
            return np.zeros(0, dtype=np.int32)
        kids = self.children(p)
        return kids[kids != i]

    def neighbours(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, slice]:
        """(dense ids, type codes, weights, edge slice) of i's out-edges."""
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.indices[a:b], self.etype[a:b], self.weight[a:b], slice(a, b)


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
