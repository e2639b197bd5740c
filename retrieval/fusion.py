"""Fused recall: dense and lexical evidence for the same units, as one score.

Every structure-aware mode starts from a short list of seed units. Dense kNN
alone misses what the encoder cannot see (a rare identifier, a decorator name,
an error string); BM25 alone misses paraphrase. Both are computed for every
unit at once — one matrix-vector product, one sparse gather — and fused.

Fusion is a convex combination of standardised scores,
``sigmoid(alpha · z(dense) + (1 − alpha) · z(bm25))`` over the union of each
signal's best ``depth`` units (z: minus the candidates' mean, over their
standard deviation), rather than reciprocal rank fusion. RRF keeps only ranks:
an exact match of a rare identifier and a marginal one-word match count the
same when they hold the same rank. A convex combination keeps the size of each
signal's lead (Bruch, Gai and Ingber, *An Analysis of Fusion Functions for
Hybrid Retrieval*, TOIS 2023, find it ahead of RRF in and out of domain).
Standardising rather than min-max scaling puts each signal on the scale of its
whole candidate distribution instead of its single best score (one outlying
BM25 match would otherwise squash every other lexical score towards 0). The
sigmoid only maps the result into (0, 1), where the graph modes need a
positive similarity; it does not change the order. ``alpha = 0.6`` leans on
the dense signal, the one that generalises across paraphrase; BM25 adds what
the encoder cannot see. The sweep behind it (three dev sets) is in
docs/benchmarks.md. A query with no lexical match (all its words are stop
words, or none occurs in the corpus) is ranked by the dense signal alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata.retrieval.graph_arrays import KIND_CODE, top_k
from strata.core.config.schema import EMBEDDED_KINDS

ALPHA = 0.6  # weight of the dense signal; 1 - ALPHA for BM25
DEPTH = 100  # best units taken from each signal before fusing


@dataclass
class Recall:
    """Fused candidates, best first (dense graph ids) with their evidence, and
    the normalisation that put them on one scale (so any other node can be
    scored on the same scale: :meth:`fused_all`)."""

    rows: np.ndarray  # int64 dense graph ids
    scores: np.ndarray  # fused score in [0, 1]
    dense: np.ndarray  # cosine similarity per candidate
    lexical: np.ndarray  # BM25 score per candidate (0: no term matched)
    cosine: np.ndarray  # cosine of every graph node (zeros without a vector)
    bm25: np.ndarray  # BM25 of every graph node (zeros without text or match)
    alpha: float = ALPHA
    d_mean: float = 0.0  # the candidates' dense mean and standard deviation
    d_std: float = 1.0
    b_mean: float = 0.0  # the same for BM25 (b_std 0: no lexical evidence)
    b_std: float = 0.0

    def __len__(self) -> int:
        return len(self.rows)

    def top(self, k: int) -> list[tuple[int, float]]:
        return list(zip(self.rows[:k].tolist(), self.scores[:k].tolist()))

    def fused_all(self) -> np.ndarray:
        """The fused score of every graph node, standardised with the
        candidates' statistics (so a non-candidate lands on the same scale)."""
        return _fuse(self.cosine, self.bm25, self.alpha, self.d_mean, self.d_std, self.b_mean,
                     self.b_std)


def fuse_scores(dense: np.ndarray, lexical: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Two aligned score arrays fused over the whole of them (for a small
    collection such as the facts, where every item is a candidate)."""
    d, b = np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64)
    return _fuse(d, b, alpha, float(d.mean()), float(d.std()), float(b.mean()), float(b.std()))


def _fuse(d, b, alpha, d_mean, d_std, b_mean, b_std) -> np.ndarray:
    zd = (np.asarray(d, dtype=np.float64) - d_mean) / (d_std or 1.0)
    z = zd if b_std <= 0 else \
        alpha * zd + (1.0 - alpha) * (np.asarray(b, dtype=np.float64) - b_mean) / b_std
    return 1.0 / (1.0 + np.exp(-z))


def kind_mask(index, kinds) -> np.ndarray:
    """Nodes with their own vector whose kind is one of ``kinds`` (default: the
    hierarchy kinds)."""
    _, own, kind = index._unit_vectors
    codes = [KIND_CODE[k] for k in (kinds or EMBEDDED_KINDS) if k in KIND_CODE]
    return own & np.isin(kind, codes)


def fused_recall(index, query: str, qvec, kinds=None, depth: int = DEPTH,
                 alpha: float = ALPHA, mask: np.ndarray | None = None,
                 cosine: np.ndarray | None = None) -> Recall:
    """The fused ranking of the units of ``kinds`` (or of ``mask``), best first.
    ``cosine``: the query's cosine to every node, when the caller has it already."""
    if cosine is None:
        unit, _, _ = index._unit_vectors
        q = np.asarray(qvec, dtype=np.float32)
        cosine = unit @ (q / (float(np.linalg.norm(q)) or 1.0))
    m = kind_mask(index, kinds) if mask is None else mask
    lexical = index.lexical_scores(query)
    cand_rows = np.nonzero(m)[0]
    dense_top = top_k(cosine[cand_rows], cand_rows, depth)[0]
    lex_rows = np.nonzero(m & (lexical > 0))[0]
    lex_top = top_k(lexical[lex_rows], lex_rows, depth)[0] if lex_rows.size else lex_rows
    rows = np.union1d(dense_top, lex_top).astype(np.int64)
    if not rows.size:
        empty = np.zeros(0)
        return Recall(rows, empty, empty, empty, cosine, lexical, alpha)
    d, b = cosine[rows].astype(np.float64), lexical[rows].astype(np.float64)
    stats = (float(d.mean()), float(d.std()), float(b.mean()), float(b.std()))
    fused = _fuse(d, b, alpha, *stats)  # no lexical match at all (b_std 0): the dense order
    order = np.lexsort((rows, -fused))  # best first; ties by graph order (stable output)
    return Recall(rows[order], fused[order], d[order], b[order], cosine, lexical, alpha, *stats)
