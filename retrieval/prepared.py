"""The per-index arrays graph retrieval works on, and the query's similarity to
every node.

An opened :class:`retrieval.index.Index` is turned once into :class:`Prepared`
(cached per index object): normalised node vectors, which node lends a
vector-less node its similarity, the collection bucket of each node, and the
CSR graph with each node's out-edges sorted by cost, so that a query costs one
matrix-vector product and a best-first walk can stop at the cheapest edges.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from strata.retrieval.graph_arrays import EDGE_CODE, KIND_CODE, top_k
from strata.retrieval.walk import EntityWalk
from strata.retrieval.walk import build as build_walk

NO_VECTOR_SIM = 0.3  # sim of a node with no vector and no ancestor with one
BUCKETS = ("chunk", "code", "table", "image")  # collection buckets, in output order
BUCKET_OF_KIND = {"chunk": 0, "section": 0, "code": 1, "table": 2, "image": 3}
MODEL_SOURCES = ("import", "llm", "cache")  # OpenIE unit sources that are a model's work


@dataclass
class Prepared:
    """What graph retrieval needs from an opened index, computed once and kept."""

    n: int
    unit: np.ndarray  # row-normalised node vectors (float32; zero rows stay zero)
    sim_src: np.ndarray  # int32: the node whose vector gives this node's sim (-1: none)
    bucket: np.ndarray  # int8: collection bucket per node (-1: not collected)
    bucket_size: np.ndarray  # nodes per bucket
    indptr: np.ndarray  # the graph's CSR row pointers
    nbr: np.ndarray  # CSR neighbours, each slice sorted by edge cost
    cost: np.ndarray  # float64 edge costs, aligned with nbr
    edge_pos: np.ndarray  # original CSR edge position of each sorted edge (for explanations)
    facts: dict[str, list[tuple[int, int, int]]]  # fact_id → [(head, tail, chunk) dense ids]
    fact_text: dict[str, str]
    walk: EntityWalk | None = None  # None: no passage edges (no OpenIE), no walk
    model_facts: bool = False  # most OpenIE units came from a model (import/LLM), not heuristics
    own: np.ndarray | None = None  # bool: the node has its own vector (a recall candidate)
    fact_ids: list[str] = dataclasses.field(default_factory=list)  # rows of fact_unit
    fact_unit: np.ndarray | None = None  # row-normalised fact vectors

    def top(self, scores: np.ndarray, mask: np.ndarray | None, k: int) -> list[int]:
        """Rows of the ``k`` best ``scores`` (restricted to ``mask``), best first."""
        cand = np.nonzero(mask)[0] if mask is not None else np.arange(len(scores))
        return top_k(scores[cand], cand, k)[0].tolist()


_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def edge_costs(etype: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The cost of following each edge, by edge type code and weight (vectorised):
    a strong synonymy or semantic link is cheap, structure and passages are fixed."""
    w = weight.astype(np.float64)
    cost = np.full(len(etype), 0.5)  # jump, import, unknown
    syn = etype == EDGE_CODE["synonymy"]
    cost[syn] = np.maximum(0.01, 1.0 - w[syn])
    sem = etype == EDGE_CODE["semantic"]
    cost[sem] = 0.5 / np.maximum(w[sem], 0.1)
    cost[etype == EDGE_CODE["passage"]] = 0.2
    cost[etype == EDGE_CODE["structural"]] = 0.3
    return cost


def prepare(index) -> Prepared:
    """The :class:`Prepared` arrays of ``index``, built on first use and kept for as
    long as the index object lives (an object that cannot be weakly referenced is
    prepared anew each time)."""
    try:
        cached = _PREPARED.get(index)
    except TypeError:  # not weak-referenceable: no caching
        return _build(index)
    if cached is not None:
        return cached
    with _LOCK:
        cached = _PREPARED.get(index)
        if cached is None:
            cached = _PREPARED[index] = _build(index)
    return cached


def _sim_sources(g, has: np.ndarray) -> np.ndarray:
    """Per node, the node whose vector stands for it: itself when it has one, else
    its nearest ancestor with one (-1: none), found in a few vectorised hops."""
    n = len(g.ids)
    src = np.arange(n, dtype=np.int32)
    src[~has] = -1
    cur = np.arange(n, dtype=np.int32)
    todo = np.nonzero(~has)[0]
    while todo.size:
        up = g.parent[cur[todo]]
        ok = up >= 0
        todo, up = todo[ok], up[ok]
        cur[todo] = up
        found = has[up]
        src[todo[found]] = up[found]
        todo = todo[~found]
    return src


def _fact_map(index, g) -> tuple[dict[str, list[tuple[int, int, int]]], dict[str, str]]:
    """fact id → its (head, tail, source chunk) dense ids, and fact id → its text."""
    facts: dict[str, list[tuple[int, int, int]]] = {}
    fact_text: dict[str, str] = {}
    cols = index.fact_columns("fact_id", "head_id", "tail_id", "chunk_id", "text")
    for fid, h, t, c, text in zip(cols["fact_id"], cols["head_id"], cols["tail_id"],
                                  cols["chunk_id"], cols["text"]):
        facts.setdefault(fid, []).append((g.index.get(h, -1), g.index.get(t, -1),
                                          g.index.get(c, -1)))
        fact_text.setdefault(fid, text or "")
    return facts, fact_text


def _build(index) -> Prepared:
    g = index.graph
    n = len(g.ids)
    unit, has, _ = index._unit_vectors  # shared with Index.dense: held once per index
    src = _sim_sources(g, has)

    bucket = np.full(n, -1, dtype=np.int8)
    for kind, b in BUCKET_OF_KIND.items():
        if kind in KIND_CODE:
            bucket[g.kind == KIND_CODE[kind]] = b
    bucket_size = np.bincount(bucket[bucket >= 0], minlength=len(BUCKETS))

    cost = edge_costs(g.etype, g.weight)
    src_of_edge = np.repeat(np.arange(n), np.diff(g.indptr))
    order = np.lexsort((cost, src_of_edge))  # by source, then cost: slices stay in place
    facts, fact_text = _fact_map(index, g)
    walk = build_walk(g, index._columns["title"]) if facts else None  # titles in graph order
    fact_ids, fact_unit = index._fact_unit if facts else ([], np.zeros((0, unit.shape[1]),
                                                                            dtype=np.float32))
    return Prepared(n=n, unit=unit, sim_src=src, bucket=bucket, bucket_size=bucket_size,
                    indptr=g.indptr, nbr=g.indices[order], cost=cost[order], edge_pos=order,
                    facts=facts, fact_text=fact_text, walk=walk,
                    model_facts=model_facts(index.manifest), own=has, fact_ids=fact_ids,
                    fact_unit=fact_unit)


def model_facts(manifest: dict) -> bool:
    """Whether at least half of the OpenIE units were extracted by a model (an LLM or
    an import) rather than by the offline heuristic."""
    openie = (manifest.get("stages") or {}).get("openie") or {}
    sources = openie.get("units_by_source")
    if not isinstance(sources, dict):  # an index built before sources were recorded
        return int(openie.get("calls", 0) or 0) > 0
    total = sum(int(v) for v in sources.values())
    return total > 0 and 2 * sum(int(sources.get(s, 0)) for s in MODEL_SOURCES) >= total


def query_sims(prep: Prepared, qvec, raw_out: list | None = None,
               raw: np.ndarray | None = None) -> np.ndarray:
    """sim(node, q) for every node: cosine, negatives clamped to 0, vector-less
    nodes borrowing their ancestor's (else ``NO_VECTOR_SIM``, a neutral value that
    neither blocks nor favours paths through them). ``raw_out``, when given,
    receives the unclamped cosines (the dense recall ranks by them); ``raw``:
    per-node similarities to use instead of the cosines (the fused ones)."""
    if raw is None:
        q = np.asarray(qvec, dtype=np.float32)
        qn = float(np.linalg.norm(q))
        raw = prep.unit @ (q / qn if qn > 0 else q)
    else:
        raw = np.array(raw, dtype=np.float64)
    if raw_out is not None:
        raw_out.append(raw.copy())
    np.maximum(raw, 0.0, out=raw)
    sims = np.where(prep.sim_src >= 0, raw[np.maximum(prep.sim_src, 0)], NO_VECTOR_SIM)
    return sims.astype(np.float64)
