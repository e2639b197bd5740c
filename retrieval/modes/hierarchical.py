"""Hierarchical retrieval: seeds from fused dense + BM25 recall, then their
parent, siblings and children from the document / code hierarchy.

The design follows HypRAG's ``subtree_expand`` (the flat encoder finds the
right region, the hierarchy supplies the surrounding context) with one
difference that matters at scale: HypRAG scans the whole corpus on every query
to find each hit's relatives; here the walk reads only the precomputed CSR
arrays of :class:`retrieval.graph_arrays.Graph` (``parent``, ``children``,
``siblings``), so a query costs in proportion to what it expands — at most
``seeds × (1 + max_siblings + max_children)`` nodes — whatever the size of the
corpus. No DataFrame is filtered or scanned in the query path once the index is
warm (``index.graph`` and ``index.node_vectors`` are built on first use and
kept).

Rules
-----
* Seeds are the best ``seeds`` units of :func:`retrieval.fusion.fused_recall`
  (dense and BM25 evidence fused on one scale; ``lexical=False``: dense kNN
  alone, ``index.dense(query vector, seeds, seed_kinds)``), best first.
* For each seed, best first: its parent (relation ``"parent"``), up to
  ``max_siblings`` siblings nearest in document order (ties: the preceding one
  first; relation ``"sibling"``), then up to ``max_children`` children in
  document order (relation ``"child"``). With ``context_order="similarity"``
  the siblings and children are instead the ones closest to the query, scored
  on that one child slice (still independent of the corpus size). ``via`` is
  always the id of the seed that brought the node in.
* Dedupe: a node keeps its first role. A seed stays a seed even when it is
  also another seed's parent/sibling/child; an expanded node keeps the
  relation of the first (best) seed that reached it, in the order parent,
  siblings, children.
* Scores: with ``rescore`` an expanded node that has a vector gets its
  similarity to the query on the seeds' scale (the fused score, or with
  ``lexical=False`` the cosine); one without a vector (or with ``rescore``
  off) gets ``seed score × decay`` (parent) or ``seed score × decay²``
  (sibling, child).
* ``max_expand`` caps the expanded nodes in the output. Candidates are
  gathered under the per-seed caps, scored, and the ``max_expand``
  best-scoring are kept (ties: discovery order). Choosing by score rather than
  by discovery order keeps the cap consistent with the final ranking, and a
  first seed cannot spend the whole budget on its own siblings and children
  while later seeds' parents are dropped.
* Output: seeds and kept expanded nodes with ``score >= min_score``, ranked by
  score (ties: seeds first, then discovery order), cut at ``k``. Nothing is
  kept beyond ``k``: a caller wanting more context raises ``k``. With ``fill``
  (default) a list shorter than ``k`` is topped up with the next dense hits
  (relation ``"seed"``, not expanded) and re-ranked by score: asking for 20
  results returns 20 when the index has them (OpenHarmony dev set: file Hit@5
  94.0 → 97.6; trace count ``filled``).
* Context: with ``context`` (default) every result also carries its parent,
  nearest siblings and first children in ``Result.context``
  (:func:`retrieval.context.attach_context`), whether or not they won a place
  among the ``k``: at ``k=5`` the five places usually go to seeds, and the
  context still says where each one sits.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from strata.retrieval.context import attach_context, nearest_siblings
from strata.retrieval.fusion import ALPHA, fused_recall
from strata.retrieval.results import Result, Trace

PARENT, SIBLING, CHILD = "parent", "sibling", "child"
RELATIONS = (PARENT, SIBLING, CHILD)


@dataclass(frozen=True)
class HierarchicalConfig:
    """Parameters of the hierarchical mode; every field can be overridden per
    call as a keyword argument of :func:`search` (``index.search(q,
    mode="hierarchical", siblings=False, max_expand=8)``)."""

    seeds: int = 5  # kNN seeds
    seed_kinds: tuple | None = None  # None: the index's embedded hierarchy kinds
    parents: bool = True
    siblings: bool = True
    children: bool = True
    max_expand: int = 20  # cap on expanded nodes in total
    max_siblings: int = 4  # per seed, nearest in document order first
    max_children: int = 6  # per seed, in document order
    rescore: bool = True  # cosine(node vector, query) for expanded nodes with a vector
    # which siblings/children a seed brings: "document" (nearest in order: the reading
    # context) or "similarity" (closest to the query, scored on that one child slice).
    # Chosen on the OpenHarmony dev set: equal at section R@5, document 91.7 vs 89.3 at R@10.
    context_order: str = "document"
    fill: bool = True  # a list shorter than k is topped up with the next dense hits
    decay: float = 0.85  # no vector: seed × decay (parent), × decay² (sibling, child)
    min_score: float = 0.0
    lexical: bool = True  # seeds and scores from fused dense + BM25 recall (False: dense only)
    alpha: float = ALPHA  # with lexical: weight of the dense signal
    context: bool = True  # attach parent / siblings / children to every result

    def __post_init__(self):
        if self.seed_kinds is not None:
            kinds = (self.seed_kinds,) if isinstance(self.seed_kinds, str) else self.seed_kinds
            object.__setattr__(self, "seed_kinds", tuple(kinds))
        for name in ("seeds", "max_expand", "max_siblings", "max_children"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"hierarchical: {name} must be a non-negative integer, got {v!r}")
        if self.context_order not in ("similarity", "document"):
            raise ValueError("hierarchical: context_order must be 'similarity' or 'document', "
                             f"got {self.context_order!r}")
        if not 0.0 <= float(self.decay) <= 1.0:
            raise ValueError(f"hierarchical: decay must be within [0, 1], got {self.decay!r}")

    @classmethod
    def from_params(cls, config: HierarchicalConfig | None = None,
                    **params) -> HierarchicalConfig:
        """The defaults (or ``config``) with ``params`` applied. ``kinds`` is
        accepted as an alias of ``seed_kinds`` (the name the flat modes use)."""
        if "kinds" in params:
            kinds = params.pop("kinds")
            params.setdefault("seed_kinds", kinds)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise TypeError(f"hierarchical mode got unknown parameter(s) {', '.join(unknown)}; "
                            f"it takes {', '.join(sorted(known))}")
        return replace(config or cls(), **params)


DEFAULTS = HierarchicalConfig()


@dataclass
class Expansion:
    """Nodes reached from seeds, in discovery order (dense graph ids)."""

    ids: np.ndarray  # int64 dense ids of the expanded nodes
    relations: list[str]  # "parent" | "sibling" | "child", per node
    via: np.ndarray  # int64 dense id of the seed that brought each node in

    def __len__(self) -> int:
        return len(self.relations)

    def counts(self) -> dict[str, int]:
        key = {PARENT: "parents", SIBLING: "siblings", CHILD: "children"}
        out = dict.fromkeys(key.values(), 0)
        for r in self.relations:
            out[key[r]] += 1
        return out

    def take(self, positions) -> Expansion:
        positions = np.asarray(positions, dtype=np.int64)
        return Expansion(self.ids[positions], [self.relations[p] for p in positions],
                         self.via[positions])


def _closest(index, nodes: np.ndarray, qvec, limit: int) -> np.ndarray:
    """The ``limit`` of ``nodes`` whose vectors are closest to the query (nodes
    without a vector last, in their given order)."""
    if limit <= 0 or not nodes.size:
        return nodes[:0]
    vecs = index.node_vectors[nodes]
    norms = np.linalg.norm(vecs, axis=1)
    q = np.asarray(qvec, dtype=np.float32).ravel()
    sims = np.where(norms > 0, (vecs @ q) / np.where(norms > 0, norms, 1.0), -np.inf)
    return nodes[np.argsort(-sims, kind="stable")[:limit]]


def expand_subtree(index, dense_ids, *, parents: bool = True, siblings: bool = True,
                   children: bool = True, max_siblings: int = DEFAULTS.max_siblings,
                   max_children: int = DEFAULTS.max_children, max_expand: int | None = None,
                   exclude=(), qvec=None) -> Expansion:
    """Parent, nearest siblings and first children of each node in
    ``dense_ids`` (dense graph ids, best first), deduplicated.

    ``index`` is an :class:`retrieval.Index` (or anything with a ``graph``
    attribute holding a :class:`retrieval.graph_arrays.Graph`). The seeds themselves
    and the dense ids in ``exclude`` are never returned; a node reached twice
    keeps its first role. ``max_expand`` (None: no cap beyond the per-seed
    ones) stops the walk after that many nodes, in discovery order. With
    ``qvec`` the siblings and children are the ones closest to the query
    (scored on that one child slice) instead of the nearest in document order.

    Cost: one parent lookup, one child slice of the parent and one child
    slice of the node per seed — proportional to the fan-out of the nodes
    visited, independent of the size of the corpus.
    """
    graph = index.graph
    seeds = [int(s) for s in dense_ids]
    seen = set(seeds)
    seen.update(int(x) for x in exclude)
    cap = float("inf") if max_expand is None else max_expand
    ids: list[int] = []
    rels: list[str] = []
    via: list[int] = []

    def add(node: int, relation: str, seed: int) -> bool:
        if node in seen:
            return True
        if len(ids) >= cap:
            return False
        seen.add(node)
        ids.append(node)
        rels.append(relation)
        via.append(seed)
        return True

    for s in seeds:
        if len(ids) >= cap:
            break
        if parents:
            p = int(graph.parent[s])
            if p >= 0:
                add(p, PARENT, s)
        if siblings and max_siblings > 0:
            if qvec is None:
                sibs = nearest_siblings(graph, s, max_siblings)
            else:
                sibs = _closest(index, graph.siblings(s).astype(np.int64), qvec, max_siblings)
            for j in sibs.tolist():
                if not add(j, SIBLING, s):
                    break
        if children and max_children > 0:
            kids = graph.children(s).astype(np.int64)
            kids = kids[:max_children] if qvec is None else _closest(index, kids, qvec,
                                                                     max_children)
            for j in kids.tolist():
                if not add(j, CHILD, s):
                    break
    return Expansion(np.asarray(ids, dtype=np.int64), rels, np.asarray(via, dtype=np.int64))


def score_expansion(index, expansion: Expansion, qvec, seed_score: dict[int, float],
                    rescore: bool = True, decay: float = DEFAULTS.decay,
                    sims: np.ndarray | None = None) -> np.ndarray:
    """Scores of the expanded nodes: cosine to the query (or ``sims``, a
    per-node similarity such as the fused score) for those with a non-zero
    vector (when ``rescore``), else the decay rule from the score of the seed
    that brought them in."""
    n = len(expansion)
    if not n:
        return np.zeros(0, dtype=np.float64)
    base = np.array([seed_score[v] for v in expansion.via.tolist()], dtype=np.float64)
    factor = np.array([decay if r == PARENT else decay * decay for r in expansion.relations])
    scores = base * factor
    if rescore:
        q = np.asarray(qvec, dtype=np.float32).ravel()
        qn = float(np.linalg.norm(q))
        if qn > 0:
            vecs = index.node_vectors[expansion.ids]  # only the expanded rows
            norms = np.linalg.norm(vecs, axis=1)
            has = norms > 0
            if has.any():
                scores[has] = sims[expansion.ids[has]] if sims is not None else \
                    (vecs[has] @ q) / (norms[has] * qn)
    return scores


def search(index, query: str, k: int = 10, trace: Trace | None = None,
           config: HierarchicalConfig | None = None, **params) -> list[Result]:
    """Dense seeds plus their hierarchy context, ranked by score, cut at ``k``.

    Keyword arguments override :class:`HierarchicalConfig` fields (``kinds``
    is an alias of ``seed_kinds``). Trace stages: ``embed_query``, ``seeds``,
    ``expand``, ``rescore``, ``assemble``; counts: ``seeds``, ``candidates``,
    ``expanded``, ``parents``, ``siblings``, ``children``.
    """
    cfg = HierarchicalConfig.from_params(config, **params)
    trace = trace if trace is not None else Trace(mode="hierarchical")
    with trace.stage("embed_query"):
        qvec = index.embed_query(query)
    with trace.stage("seeds"):
        want = max(cfg.seeds, int(k)) if cfg.fill else cfg.seeds
        sims = None
        if cfg.lexical and want:
            recall = fused_recall(index, query, qvec, kinds=cfg.seed_kinds, alpha=cfg.alpha)
            sims = recall.fused_all()
            dense_hits = [(index.graph.ids[j], s) for j, s in recall.top(want)]
        else:
            dense_hits = index.dense(qvec, want, cfg.seed_kinds) if want else []
        hits, spare = dense_hits[:cfg.seeds], dense_hits[cfg.seeds:]

    with trace.stage("expand"):
        graph = index.graph  # built once per index, then kept
        seed_dense: list[int] = []
        seed_score: dict[int, float] = {}
        for nid, s in hits:
            j = graph.index.get(nid)
            if j is not None and j not in seed_score:
                seed_dense.append(j)
                seed_score[j] = float(s)
        expansion = expand_subtree(index, seed_dense, parents=cfg.parents, siblings=cfg.siblings,
                                   children=cfg.children, max_siblings=cfg.max_siblings,
                                   max_children=cfg.max_children,
                                   qvec=qvec if cfg.context_order == "similarity" else None)
    with trace.stage("rescore"):
        scores = score_expansion(index, expansion, qvec, seed_score, cfg.rescore, cfg.decay, sims)
        candidates = len(expansion)
        if candidates > cfg.max_expand:
            keep = np.sort(np.argsort(-scores, kind="stable")[:cfg.max_expand])
            expansion, scores = expansion.take(keep), scores[keep]

    with trace.stage("assemble"):
        ranked = [(nid, float(s), "seed", None) for nid, s in hits]
        ids = graph.ids
        ranked += [(ids[j], float(sc), rel, ids[v]) for j, sc, rel, v in
                   zip(expansion.ids.tolist(), scores.tolist(), expansion.relations,
                       expansion.via.tolist())]
        ranked = [r for r in ranked if r[1] >= cfg.min_score]
        ranked.sort(key=lambda r: -r[1])  # stable: seeds first, then discovery order
        ranked = ranked[:k]
        filled = 0
        if len(ranked) < k and spare:  # top up with the next dense hits
            taken = {r[0] for r in ranked}
            for nid, s in spare:
                if len(ranked) >= k:
                    break
                if nid not in taken and s >= cfg.min_score:
                    ranked.append((nid, float(s), "seed", None))
                    taken.add(nid)
                    filled += 1
            ranked.sort(key=lambda r: -r[1])
        results = [index.result(nid, s, rel, via) for nid, s, rel, via in ranked]
        if cfg.context:
            attach_context(index, results)

    trace.counts.update(seeds=len(hits), candidates=candidates, expanded=len(expansion),
                        filled=filled, **expansion.counts())
    return results
