"""Flat baselines: dense kNN, keyword (BM25 full-text), and their RRF fusion."""

from __future__ import annotations

from strata.retrieval.results import Result, Trace

RRF_K = 60


def dense(index, query: str, k: int = 10, trace: Trace | None = None, kinds=None) -> list[Result]:
    trace = trace or Trace()
    with trace.stage("embed_query"):
        vec = index.embed_query(query)
    with trace.stage("knn"):
        hits = index.dense(vec, k, kinds)
    return [index.result(nid, s) for nid, s in hits]


def keyword(index, query: str, k: int = 10, trace: Trace | None = None, kinds=None) -> list[Result]:
    trace = trace or Trace()
    with trace.stage("lexical"):
        hits = index.keyword(query, k, kinds)
    return [index.result(nid, s) for nid, s in hits]


def hybrid(index, query: str, k: int = 10, trace: Trace | None = None, kinds=None,
           candidates: int = 50, rrf_k: int = RRF_K) -> list[Result]:
    """Reciprocal rank fusion of dense and keyword rankings."""
    trace = trace or Trace()
    with trace.stage("embed_query"):
        vec = index.embed_query(query)
    with trace.stage("knn"):
        d = index.dense(vec, candidates, kinds)
    with trace.stage("lexical"):
        w = index.keyword(query, candidates, kinds)
    with trace.stage("fuse"):
        score: dict[str, float] = {}
        for ranking in (d, w):
            for rank, (nid, _) in enumerate(ranking):
                score[nid] = score.get(nid, 0.0) + 1.0 / (rrf_k + rank + 1)
        best = sorted(score.items(), key=lambda kv: -kv[1])[:k]
    trace.counts.update(dense=len(d), keyword=len(w))
    return [index.result(nid, s) for nid, s in best]
