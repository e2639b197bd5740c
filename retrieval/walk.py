"""Entity walk: a personalised PageRank over the entity–passage graph, seeded
by the question's own entities, its best facts and the dense hits.

Why it exists next to best-first diffusion: diffusion scores a node by
``sim(node, q) × path potential``, so a passage that shares no words with the
question — the second hop of a multi-hop question ("the spouse of *the
performer of Green*": the page about Steve Hillage never says "Green") — can
never outrank a dense hit. A random walk instead accumulates mass on passages
*connected to several seeds at once*, whatever their own similarity. This is
HippoRAG's retrieval step (PPR over OpenIE entities and passages, damping 0.5,
passage nodes in the reset vector) plus one thing HippoRAG leaves to an LLM:
the question's named spans are linked to entity nodes by exact normalised name
(longest span first), weighted by specificity (1 / passages mentioning it), so
"Journal of Psychotherapy Integration" seeds its node strongly and "state"
barely at all.

The walk runs over ``passage`` (entity ↔ the chunk it was extracted from) and
``synonymy`` (entity ↔ entity, weight = similarity) edges, both directions;
every other node only keeps its reset mass. One sparse matrix–vector product
per iteration, so a query's walk costs a few sparse products over the walk edges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from strata.core.lexical.bm25 import STOPWORDS
from strata.retrieval.graph_arrays import EDGE_CODE, KIND_CODE

WALK_EDGE_TYPES = ("passage", "synonymy")
MAX_SPAN_TOKENS = 6
_TOKEN = re.compile(r"\w+")


def normalise(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


@dataclass
class EntityWalk:
    """What the walk needs from an opened index, computed once and kept."""

    n: int
    matrix: object  # scipy CSR, column-stochastic transposed transition: x' = M @ x
    passages: np.ndarray  # int: passage edges per node (an entity's specificity is 1 / this)
    names: dict[str, np.ndarray]  # normalised entity name → dense ids of the entity nodes

    def link(self, text: str) -> dict[str, np.ndarray]:
        """Entity nodes named in ``text``: span → dense ids, longest spans first;
        a span inside an already linked longer span is skipped."""
        toks = _TOKEN.findall(text.lower())
        found: dict[str, np.ndarray] = {}
        taken = np.zeros(len(toks), dtype=bool)
        for size in range(min(MAX_SPAN_TOKENS, len(toks)), 0, -1):
            for i in range(len(toks) - size + 1):
                if taken[i:i + size].any():
                    continue
                span = " ".join(toks[i:i + size])
                # a stop word never names an entity on its own
                if size == 1 and (span in STOPWORDS or len(span) < 3):
                    continue
                ids = self.names.get(span)
                if ids is not None:
                    found[span] = ids
                    taken[i:i + size] = True
        return found

    def run(self, reset: np.ndarray, damping: float = 0.5, max_iter: int = 30,
            tol: float = 1e-6) -> tuple[np.ndarray, int]:
        """PageRank personalised on ``reset`` (normalised here); returns the
        stationary mass and the iterations used."""
        total = float(reset.sum())
        if total <= 0:
            return np.zeros(self.n), 0
        r = reset / total
        x = r.copy()
        it = 0
        for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
            nxt = (1.0 - damping) * r + damping * (self.matrix @ x)
            delta = float(np.abs(nxt - x).sum())
            x = nxt
            if delta < tol:
                break
        return x, it


def build(graph, titles: list[str | None]) -> EntityWalk | None:
    """The walk over ``graph``; None when the index has no passage edges
    (no OpenIE stage ran), so callers fall back to diffusion alone."""
    import scipy.sparse as sp

    walk_codes = [EDGE_CODE[t] for t in WALK_EDGE_TYPES if t in EDGE_CODE]
    src = np.repeat(np.arange(len(graph.ids)), np.diff(graph.indptr))
    keep = np.isin(graph.etype, walk_codes)
    if not keep[graph.etype == EDGE_CODE.get("passage", -1)].any():
        return None
    n = len(graph.ids)
    s, d = src[keep], graph.indices[keep].astype(np.int64)
    w = np.where(graph.etype[keep] == EDGE_CODE["passage"], 1.0,
                 np.clip(graph.weight[keep].astype(np.float64), 0.0, 1.0))
    adj = sp.coo_matrix((np.concatenate([w, w]), (np.concatenate([s, d]), np.concatenate([d, s]))),
                        shape=(n, n)).tocsr()
    adj.sum_duplicates()
    adj.data = np.minimum(adj.data, 1.0)  # an edge stored both ways counts once
    out = np.asarray(adj.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros(n), where=out > 0)
    matrix = (sp.diags(inv) @ adj).T.tocsr()  # column j spreads j's mass over its neighbours

    is_passage = graph.etype == EDGE_CODE["passage"]
    ps, pd = src[is_passage], graph.indices[is_passage].astype(np.int64)
    linked = sp.coo_matrix((np.ones(2 * len(ps)), (np.concatenate([ps, pd]), np.concatenate([pd, ps]))),
                           shape=(n, n)).tocsr()
    linked.sum_duplicates()
    passages = np.diff(linked.indptr)  # distinct passage neighbours (edges may be stored both ways)
    names: dict[str, list[int]] = {}
    entity = KIND_CODE.get("entity", -1)
    for i in np.nonzero(graph.kind == entity)[0].tolist():
        key = normalise(titles[i] or "")
        if key:
            names.setdefault(key, []).append(i)
    return EntityWalk(n=n, matrix=matrix, passages=passages,
                      names={k: np.array(v, dtype=np.int64) for k, v in names.items()})
