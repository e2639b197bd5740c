"""Diffusion retrieval: what the query finds directly seeds a cost-aware walk over
the graph, and what the walk reaches is collected per modality.

The idea (DualGraph): dense (and BM25) recall over facts, files and content
nodes picks seeds; a best-first search spreads from them along the graph's
edges, scoring a node reached at cumulative edge cost ``c`` as
``sim(node, q) · seed weight / (1 + c)``, so a passage that shares no word with
the query is still found through the entities and structure that link it to
one that does. Chunks, code, tables and images fill their own buckets, so every
modality the corpus has can answer. Where a model extracted the facts, a
personalised PageRank over entities and passages (:mod:`retrieval.walk`) ranks
the passages instead: a passage tied to several seeds rises, which multi-hop
questions need. Budgets bound the search, so a query's cost does not grow with
the graph.

:func:`retrieve` runs the stages in order, each a short function below, timed
in the trace under its own name (``recall``, ``rerank``, ``diffusion``,
``walk``, ``final``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from strata.retrieval.diffuse import DiffusionRun, diffuse
from strata.retrieval.fusion import ALPHA, fuse_scores, fused_recall
from strata.retrieval.graph_arrays import KIND_CODE, top_k
from strata.retrieval.prepared import BUCKETS, Prepared, prepare, query_sims
from strata.retrieval.rerank import (POOL_PER_K, final_rerank, load_cross_encoder, rerank_hits,
                                     sigmoid)
from strata.retrieval.results import Result, Trace


@dataclass(frozen=True)
class DiffusionConfig:
    """The DualGraph defaults; every field can be overridden per call (``**params``)."""

    # stage 1: dense recall sizes of the three vector stores
    fact_candidate_k: int = 100  # facts (OpenIE triples): they seed entities and source chunks
    file_candidate_k: int = 100  # files
    chunk_candidate_k: int = 100  # content nodes: chunks and sections, code, tables, images
    # stage 2
    rerank: str = "none"  # "none" | "cross-encoder"
    cross_encoder_path: str | None = None  # a LOCAL sentence-transformers CrossEncoder
    fact_top_k: int = 50  # facts kept after stage 2
    file_top_k: int = 50  # files kept (file seeds)
    chunk_top_k: int = 50  # kept: mandatory seeds, each in its own modality
    # stage 3: seed init weights
    fact_seed_weight: float = 0.8  # × the fact's relevance, for its head/tail entities
    file_seed_weight: float = 0.9
    chunk_seed_weight: float = 1.0  # stage-2 chunks; a fact's source chunk also × its relevance
    # stage 3: collection bucket sizes (diffusion stops once all are full)
    spread_chunk_k: int = 100
    spread_code_k: int = 5
    spread_table_k: int = 5
    spread_image_k: int = 5
    # stage 3: budgets
    time_budget_s: float = 2.0  # wall clock of the diffusion loop
    max_expansions: int = 12000  # nodes popped and expanded
    per_node_neighbor_limit: int = 96  # out-edges followed per expansion, cheapest first
    max_frontier_size: int = 20000  # heap entries kept (worst dropped)
    min_enqueue_score: float = 0.01  # a neighbour scoring less is not enqueued
    # stage 4: results per modality
    final_chunk_k: int = 10  # chunks and sections
    final_code_k: int = 2
    final_table_k: int = 2
    final_image_k: int = 2
    final_rerank: str = "none"  # "none" | "cross-encoder" | "llm" (needs llm=, a strata.core.llm.LLM)
    # quotas are per-modality shares, not a ceiling on k: a list they leave short of k is
    # topped up with the best remaining collected nodes of any modality (a code corpus
    # asked for 20 results gets 20 code nodes, not final_code_k = 2)
    final_fill: bool = True
    # stage 3b: the entity walk ranks chunks where the index has OpenIE passage edges.
    # "auto": only when most facts came from a model (an LLM or an import): the
    # offline heuristic's entities are too noisy to walk on. True/"on" forces it,
    # False/"off" skips it.
    walk: bool | str = "auto"
    walk_fact_k: int = 5  # the best facts whose head/tail entities seed the walk
    query_entity_weight: float = 1.0  # an entity named in the query (÷ its passages)
    walk_passage_weight: float = 0.2  # × the chunk's min-max normalised dense similarity
    walk_damping: float = 0.5
    walk_max_iter: int = 30
    dense_lead: int = 1  # the best dense chunks stay first, ahead of the walk's order
    # lexical evidence (retrieval.fusion): the fact, file and content recall and the path
    # scores use the fused dense + BM25 score instead of the cosine alone. The walk's
    # passage prior and dense_lead stay dense: on multi-hop questions BM25 is the weakest
    # signal, and fusing it there hurts. False: the design as published.
    lexical: bool = True
    alpha: float = ALPHA  # with lexical: weight of the dense signal (1 - alpha: BM25)

    def __post_init__(self) -> None:
        if self.rerank not in ("none", "cross-encoder"):
            raise ValueError(f"rerank must be 'none' or 'cross-encoder', not {self.rerank!r}")
        if self.walk not in (True, False, "auto", "on", "off"):
            raise ValueError(f"walk must be 'auto', 'on' or 'off' (or a bool), not {self.walk!r}")
        if self.final_rerank not in ("none", "cross-encoder", "llm"):
            raise ValueError("final_rerank must be 'none', 'cross-encoder' or 'llm', "
                             f"not {self.final_rerank!r}")


DEFAULTS = DiffusionConfig()


def _config(params: dict) -> DiffusionConfig:
    names = {f.name for f in dataclasses.fields(DiffusionConfig)}
    unknown = sorted(set(params) - names)
    if unknown:
        raise TypeError(f"unknown diffusion parameter(s) {', '.join(unknown)}; "
                        f"known: {', '.join(sorted(names))}")
    return dataclasses.replace(DEFAULTS, **params) if params else DEFAULTS


# --------------------------------------------------------------------------- entity walk

@dataclass
class WalkRun:
    """The outcome of stage 3b: the walk's mass per node, and what seeded it."""

    prep: Prepared
    mass: np.ndarray
    iterations: int
    entity_seeds: int
    linked: dict[str, np.ndarray]
    sims: np.ndarray
    ranked: bool  # any mass on a chunk

    def chunk_list(self, lead: list[int], size: int) -> list[tuple[float, int]]:
        """The chunk modality's best ``size`` by walk mass, ``lead`` first; scores
        are mass scaled so the best equals the best chunk similarity (comparable
        with the other modalities' path scores), handed out in rank order."""
        cand = np.nonzero(self.prep.bucket == 0)[0]
        if size <= 0 or not cand.size:
            return []
        order = top_k(self.mass[cand], cand, size + len(lead))[0].tolist()
        lead = [i for i in lead if self.prep.bucket[i] == 0][:size]
        ordered = (lead + [i for i in order if i not in lead])[:size]
        top = float(self.mass[order[0]]) or 1.0
        scale = float(self.sims[cand].max()) or 1.0
        scores = sorted((scale * float(self.mass[i]) / top for i in ordered), reverse=True)
        return list(zip(scores, ordered))

    def strongest_neighbour(self, i: int) -> int:
        """The neighbour that gave chunk ``i`` most of its mass (-1: none)."""
        m = self.prep.walk.matrix
        a, b = m.indptr[i], m.indptr[i + 1]
        if a == b:
            return -1
        nb = m.indices[a:b]
        return int(nb[np.argmax(m.data[a:b] * self.mass[nb])])


def _entity_walk(prep: Prepared, sims: np.ndarray, query: str, facts, strength,
                 cfg: DiffusionConfig) -> WalkRun:
    """Reset vector (HippoRAG's, plus query entity links) and the walk itself:
    the top facts' entities get the fact's strength ÷ the entity's passages,
    averaged over the facts naming it; an entity named in the query gets
    ``query_entity_weight`` ÷ its passages; every chunk/section gets
    ``walk_passage_weight`` × its min-max normalised similarity."""
    walk = prep.walk
    reset = np.zeros(prep.n)
    count = np.zeros(prep.n)
    spread = np.maximum(walk.passages, 1).astype(np.float64)
    for (fid, _), w in zip(facts[:max(0, int(cfg.walk_fact_k))], strength):
        ents = {e for h, t, _ in prep.facts.get(fid, ()) for e in (h, t) if e >= 0}
        for e in ents:
            reset[e] += w / spread[e]
            count[e] += 1
    np.divide(reset, count, out=reset, where=count > 0)
    linked = walk.link(query)
    for ids in linked.values():
        reset[ids] += cfg.query_entity_weight / spread[ids]
    entity_seeds = int(np.count_nonzero(reset))
    text = prep.bucket == 0
    if text.any():
        s = sims[text]
        lo, hi = float(s.min()), float(s.max())
        if hi > lo:
            reset[text] += cfg.walk_passage_weight * (s - lo) / (hi - lo)
    mass, iters = walk.run(reset, damping=cfg.walk_damping, max_iter=int(cfg.walk_max_iter))
    return WalkRun(prep=prep, mass=mass, iterations=iters, entity_seeds=entity_seeds,
                   linked=linked, sims=sims, ranked=bool(mass[text].max() > 0) if text.any() else False)


def _rel(scores: list[float]) -> list[float]:
    """Relevance in [0, 1]: score / best score (negatives → 0)."""
    if not scores:
        return []
    top = max(scores)
    if top <= 0:
        return [0.0] * len(scores)
    return [max(0.0, s) / top for s in scores]


def _quotas(avail: list[int], k: int, best: list[float]) -> list[int]:
    """Split ``k`` over modalities in proportion to ``avail`` (each modality's
    quota capped by what it has), keeping at least one per non-empty modality
    while ``k`` allows (the best-scoring modalities first)."""
    total = sum(avail)
    if k >= total:
        return list(avail)
    if k <= 0:
        return [0] * len(avail)
    nonempty = sorted((i for i, a in enumerate(avail) if a > 0), key=lambda i: (-best[i], i))
    out = [0] * len(avail)
    if k <= len(nonempty):
        for i in nonempty[:k]:
            out[i] = 1
        return out
    for i in nonempty:
        out[i] = 1
    left = k - len(nonempty)
    ideal = [k * a / total for a in avail]
    # largest remainder over what each still may take, best modality first on ties
    while left > 0:
        room = [i for i in nonempty if out[i] < avail[i]]
        if not room:
            break
        i = max(room, key=lambda j: (ideal[j] - out[j], best[j], -j))
        out[i] += 1
        left -= 1
    return out


# --------------------------------------------------------------------------- retrieve

@dataclass
class Candidates:
    """What stages 1 and 2 hand on: the query's similarity to every node and the
    scored candidates of the three stores, best first."""

    sims: np.ndarray  # sim(node, q) that paths score with (fused with BM25 under lexical)
    dense_sims: np.ndarray  # dense only: the walk's passage prior
    dense_cos: np.ndarray  # unclamped cosines: the walk's dense lead
    facts: list[tuple[str, float]]
    files: list[tuple[str, float]]
    chunks: list[tuple[str, float]]
    fact_strength: list[float] = field(default_factory=list)  # per kept fact, for the walk
    fact_rel: list[float] = field(default_factory=list)  # fact_strength ÷ the best one


def retrieve(index, query: str, k: int = 10, trace: Trace | None = None, llm=None,
             cross_encoder=None, **params) -> tuple[list[Result], DiffusionRun]:
    """:func:`search`, also returning the :class:`DiffusionRun` (paths, buckets):
    recall, rerank, seeds and diffusion, the entity walk, the final selection."""
    cfg = _config(params)
    trace = trace or Trace()
    prep = prepare(index)
    cands = _recall(index, prep, query, cfg, trace)
    ce = _rerank(index, prep, query, cfg, cands, cross_encoder, trace)
    with trace.stage("diffusion"):
        t0 = time.perf_counter()
        seeds, pinned = _seeds(index.graph, prep, cands, cfg)
        run = diffuse(prep, cands.sims, seeds, pinned, cfg, t0=t0)
    _count_diffusion(trace, index.graph, run, seeds, cfg)
    walk = _walk(prep, query, cands, cfg, trace)
    with trace.stage("final"):
        results, paths, quota, filled = _final(index, query, prep, cands, run, walk, k, cfg,
                                               ce, llm, trace)
    trace.counts.update(final_filled=filled,
                        **{f"final_{name}": q for name, q in zip(BUCKETS, quota)})
    trace.diffusion = _explanation(index.graph, run, seeds, walk, paths, cfg)  # type: ignore[attr-defined]
    return results, run


def _recall(index, prep: Prepared, query: str, cfg: DiffusionConfig, trace: Trace) -> Candidates:
    """Stage 1, multi-vector recall: exact kNN on the vectors held in memory (one
    matrix product, no table scan) over files, content nodes (each seeds its own
    modality) and facts; with ``lexical`` the scores are fused with BM25."""
    g = index.graph
    with trace.stage("embed_query"):
        qvec = index.embed_query(query)
    with trace.stage("recall"):
        raw: list = []
        sims = query_sims(prep, qvec, raw)
        cos = raw[0]
        file_mask = prep.own & (g.kind == KIND_CODE["file"])
        chunk_mask = prep.own & (prep.bucket >= 0)
        dense_sims, dense_cos = sims, cos
        if cfg.lexical:  # one scale for dense and BM25 evidence, used everywhere below
            recall = fused_recall(index, query, qvec, mask=file_mask | chunk_mask, cosine=cos,
                                  depth=max(cfg.chunk_candidate_k, cfg.file_candidate_k),
                                  alpha=cfg.alpha)
            cos = recall.fused_all()
            sims = query_sims(prep, qvec, raw=cos)
        files = [(g.ids[i], float(cos[i])) for i in prep.top(cos, file_mask, cfg.file_candidate_k)]
        chunks = [(g.ids[i], float(cos[i])) for i in prep.top(cos, chunk_mask, cfg.chunk_candidate_k)]
        facts = _recall_facts(index, prep, query, qvec, cfg)
    trace.counts.update(recall_facts=len(facts), recall_files=len(files),
                        recall_chunks=len(chunks))
    return Candidates(sims=sims, dense_sims=dense_sims, dense_cos=dense_cos, facts=facts,
                      files=files, chunks=chunks)


def _recall_facts(index, prep: Prepared, query: str, qvec,
                  cfg: DiffusionConfig) -> list[tuple[str, float]]:
    """The best facts by cosine; with ``lexical``, facts that name the query's
    words rise (fused with the facts' own BM25 index)."""
    if not prep.fact_ids:
        return []
    q = np.asarray(qvec, dtype=np.float32)
    fcos = prep.fact_unit @ (q / (float(np.linalg.norm(q)) or 1.0))
    if cfg.lexical:
        fcos = fuse_scores(fcos, index.fact_lexical_scores(query), cfg.alpha)
    return [(prep.fact_ids[i], float(fcos[i])) for i in prep.top(fcos, None, cfg.fact_candidate_k)]


def _rerank(index, prep: Prepared, query: str, cfg: DiffusionConfig, cands: Candidates,
            cross_encoder, trace: Trace):
    """Stage 2: a cross-encoder (``cross_encoder=``, or loaded from the local
    ``cross_encoder_path``) reorders the candidates when ``rerank`` asks for it,
    else the recall order stands; each list is cut to its ``*_top_k``, and each
    kept fact gets the strength it seeds with. Returns the cross-encoder (None
    without one) for the final rerank to reuse."""
    with trace.stage("rerank"):
        ce = None
        if cfg.rerank == "cross-encoder" or cfg.final_rerank == "cross-encoder":
            ce = cross_encoder
            if ce is None and cfg.cross_encoder_path:
                ce = load_cross_encoder(cfg.cross_encoder_path)
        if cfg.rerank == "cross-encoder" and ce is not None:
            cands.facts = rerank_hits(ce, query, cands.facts, lambda f: prep.fact_text.get(f, f))
            cands.files = rerank_hits(ce, query, cands.files, lambda f: index.node(f)["text"] or "")
            cands.chunks = rerank_hits(ce, query, cands.chunks,
                                       lambda c: index.node(c)["text"] or "")
            cands.facts = cands.facts[:cfg.fact_top_k]
            cands.fact_strength = sigmoid(np.array([s for _, s in cands.facts])).tolist()
        else:
            if cfg.rerank == "cross-encoder":
                trace.notes.append("rerank: no cross-encoder configured (cross_encoder_path); "
                                   "kept the dense order")
            cands.facts = cands.facts[:cfg.fact_top_k]
            cands.fact_strength = [max(0.0, s) for _, s in cands.facts]  # cosine
        cands.fact_rel = _rel(cands.fact_strength)
        cands.files = cands.files[:cfg.file_top_k]
        cands.chunks = cands.chunks[:cfg.chunk_top_k]
    trace.counts.update(top_facts=len(cands.facts), top_files=len(cands.files),
                        top_chunks=len(cands.chunks))
    return ce


def _seeds(g, prep: Prepared, cands: Candidates,
           cfg: DiffusionConfig) -> tuple[dict[int, tuple[float, str | None]], set[int]]:
    """Stage 3's starting points, dense id → (init weight, the fact that brought
    it in), and the mandatory chunks. The top facts seed their head and tail
    entities (``fact_seed_weight`` × the fact's relevance) and their source chunk
    (``chunk_seed_weight`` × relevance; a fact stated at file level seeds its
    file); the top files seed with ``file_seed_weight``; the top content nodes
    with ``chunk_seed_weight``. Content seeds are mandatory: always collected."""
    seeds: dict[int, tuple[float, str | None]] = {}
    pinned: set[int] = set()

    def seed(i: int, w: float, fact: str | None = None) -> None:
        if i >= 0 and w > 0 and (i not in seeds or w > seeds[i][0]):
            seeds[i] = (w, fact)

    for (fid, _), rel in zip(cands.facts, cands.fact_rel):
        for h, t, c in prep.facts.get(fid, ()):
            for e in (h, t):
                if e >= 0:
                    seed(e, cfg.fact_seed_weight * rel, fid)
            if c >= 0:  # the source: a chunk or section (a file, for a file-level fact)
                seed(c, cfg.chunk_seed_weight * rel, fid)
                if prep.bucket[c] >= 0:
                    pinned.add(c)
    for fid, _ in cands.files:
        seed(g.index.get(fid, -1), cfg.file_seed_weight)
    for cid, _ in cands.chunks:
        i = g.index.get(cid, -1)
        if i >= 0:
            seeds[i] = (max(cfg.chunk_seed_weight, seeds.get(i, (0.0, None))[0]), None)
            pinned.add(i)
    return seeds, pinned


def _count_diffusion(trace: Trace, g, run: DiffusionRun, seeds, cfg: DiffusionConfig) -> None:
    """Stage 3's counts and budgets into ``trace.counts``, its stop reason into the notes."""
    trace.counts.update(
        seeds=run.seeds, seed_entities=sum(1 for i in seeds if g.kind[i] == KIND_CODE["entity"]),
        seed_files=sum(1 for i in seeds if g.kind[i] == KIND_CODE["file"]),
        mandatory_chunks=len(run.pinned), expansions=run.expansions, pops=run.pops,
        enqueued=run.enqueued, frontier_peak=run.frontier_peak,
        frontier_dropped=run.frontier_dropped, evicted=run.evicted,
        max_expansions=int(cfg.max_expansions), time_budget_ms=int(round(cfg.time_budget_s * 1000)),
        max_frontier_size=int(cfg.max_frontier_size),
        per_node_neighbor_limit=int(cfg.per_node_neighbor_limit),
        **{f"collected_{name}": len(bk) for name, bk in zip(BUCKETS, run.buckets)})
    trace.notes.append(f"diffusion stop: {run.stop_reason}")


def _walk(prep: Prepared, query: str, cands: Candidates, cfg: DiffusionConfig,
          trace: Trace) -> WalkRun | None:
    """Stage 3b, the entity walk, where the index has passage edges and ``walk``
    allows it (by default only when the facts are a model's work); None otherwise."""
    use_walk = cfg.walk in (True, "on") or (cfg.walk == "auto" and prep.model_facts)
    if cfg.walk == "auto" and prep.walk is not None and not prep.model_facts:
        trace.notes.append("walk: off (the facts come from the offline heuristic; walk='on' "
                           "forces it)")
    if not use_walk or prep.walk is None:
        return None
    with trace.stage("walk"):
        walk = _entity_walk(prep, cands.dense_sims, query, cands.facts, cands.fact_strength, cfg)
    trace.counts.update(walk_iterations=walk.iterations, walk_entity_seeds=walk.entity_seeds,
                        query_entities=len(walk.linked))
    return walk


def _final(index, query: str, prep: Prepared, cands: Candidates, run: DiffusionRun,
           walk: WalkRun | None, k: int, cfg: DiffusionConfig, ce, llm, trace: Trace):
    """Stage 4, final selection: per modality the best ``final_*_k`` by score
    (after the optional final rerank), ``k`` shared out over the modalities, and
    each chosen node explained. Returns (results, paths, quotas, nodes filled in)."""
    finals = (cfg.final_chunk_k, cfg.final_code_k, cfg.final_table_k, cfg.final_image_k)
    finals = [max(0, int(fk)) for fk in finals]
    pool = POOL_PER_K if cfg.final_rerank != "none" else 1
    picked, spare = _pools(prep, cands, run, walk, finals, pool, k, cfg)
    if cfg.final_rerank != "none" and any(picked):
        picked = final_rerank(index, query, cfg.final_rerank, picked, BUCKETS, ce, llm, trace)
    picked = [p[:fk] for p, fk in zip(picked, finals)]
    chosen, quota, filled = _choose(picked, spare, k, cfg.final_fill)
    results, paths = _explain(index, run, walk, chosen)
    return results, paths, quota, filled


def _pools(prep: Prepared, cands: Candidates, run: DiffusionRun, walk: WalkRun | None,
           finals: list[int], pool: int, k: int, cfg: DiffusionConfig):
    """Each modality's candidates for its quota, best first (``pool`` × the quota,
    for a reranker to choose from; the chunk modality in the walk's order when
    the walk ranked it), and the collected nodes beyond the quotas (``spare``,
    what ``final_fill`` tops up with)."""
    picked: list[list[tuple[float, int]]] = []
    spare: list[tuple[float, int]] = []
    for bk, fk in zip(run.buckets, finals):
        ranked = sorted(((run.score(i), i) for i in bk), key=lambda t: (-t[0], t[1]))
        picked.append(ranked[:fk * pool])
        spare += ranked[fk:]
    if walk is not None and walk.ranked:
        lead = prep.top(cands.dense_cos, prep.own & (prep.bucket == 0), max(0, int(cfg.dense_lead)))
        walked = walk.chunk_list(lead, max(finals[0] * pool, int(k)))
        picked[0] = walked[:finals[0] * pool]
        spare = [t for t in spare if prep.bucket[t[1]] != 0] + walked[finals[0]:]
    return picked, spare


def _choose(picked, spare, k: int, fill: bool):
    """``k`` shared out over the modalities (:func:`_quotas`), then, with ``fill``,
    a list left short of ``k`` topped up with the best of ``spare``. Returns the
    chosen (score, dense id) best first, the quotas and how many were filled in."""
    avail = [len(p) for p in picked]
    quota = _quotas(avail, int(k), [p[0][0] if p else -1.0 for p in picked])
    chosen = [(s, i) for p, qk in zip(picked, quota) for s, i in p[:qk]]
    filled = 0
    if fill and len(chosen) < k:  # quotas left room: the best of the rest
        taken = {i for _, i in chosen}
        for s_, i in sorted(spare, key=lambda t: (-t[0], t[1])):
            if len(chosen) >= k:
                break
            if i not in taken:
                chosen.append((s_, i))
                taken.add(i)
                filled += 1
    chosen.sort(key=lambda t: (-t[0], t[1]))
    return chosen, quota, filled


def _explain(index, run: DiffusionRun, walk: WalkRun | None, chosen):
    """The results, each with how it was found: a mandatory seed (relation
    ``seed``, ``via`` the fact that brought it in), reached along a path
    (``diffused``, ``via`` its predecessor) or by the walk alone (``walk``, ``via``
    its strongest neighbour); and each result's path, seed first."""
    g = index.graph
    results = []
    paths: dict[str, list[str]] = {}
    for s, i in chosen:
        if i in run.pinned:
            rel, via = "seed", run.seed_via.get(i)
            path = run.path(i)
        elif run.best_pot[i] > 0:
            rel, via = "diffused", g.ids[run.via[i]] if run.via[i] >= 0 else None
            path = run.path(i)
        else:  # reached by the walk alone: explained by its strongest neighbour
            j = walk.strongest_neighbour(i) if walk is not None else -1
            rel, via = "walk", g.ids[j] if j >= 0 else None
            path = [j, i] if j >= 0 else [i]
        results.append(index.result(g.ids[i], s, relation=rel, via=via))
        paths[g.ids[i]] = [g.ids[j] for j in path]
    return results, paths


def _explanation(g, run: DiffusionRun, seeds, walk: WalkRun | None, paths,
                 cfg: DiffusionConfig) -> dict:
    """``trace.diffusion``: the stop reason, the paths, the seeds and the config."""
    return {
        "stop_reason": run.stop_reason, "paths": paths,
        "seeds": {g.ids[i]: round(w, 6) for i, (w, _) in seeds.items()},
        "seed_facts": {g.ids[i]: f for i, f in run.seed_via.items()},
        "query_entities": sorted(walk.linked) if walk is not None else [],
        "config": dataclasses.asdict(cfg)}


def search(index, query: str, k: int = 10, trace: Trace | None = None, llm=None,
           cross_encoder=None, **params) -> list[Result]:
    """Diffusion retrieval (see the module docstring); ``params`` override
    :class:`DiffusionConfig` fields."""
    results, _ = retrieve(index, query, k=k, trace=trace, llm=llm,
                          cross_encoder=cross_encoder, **params)
    return results
