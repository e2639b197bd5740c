"""The default mode: fused lexical + dense recall, the entity graph where it
helps, and the hierarchy as context instead of as competition.

It is called ``auto`` because it is what a user gets without choosing: it
combines the other modes' signals and decides per index whether the entity walk
applies, so nobody need pick a mode.

Per query: units are recalled by fused dense + BM25 evidence
(:func:`retrieval.fusion.fused_recall`). On an index whose OpenIE facts a model
extracted, the diffusion mode's entity walk reorders them for questions that
need a second hop, the best unit by direct evidence staying first; the offline
heuristic's entities are too noisy to walk on, so there the fused ranking
stands. Then the list is made of distinct places: a container listed with one
of its own parts gives way to the part and is named in its context, hits inside
one section come back as that section, and each side of a comparison ("X vs Y")
gets a place (:mod:`retrieval.facets`). Every result carries its parent,
siblings and children as context (:mod:`retrieval.context`), so a hit comes with
its place in the document without spending the ``k`` slots. With
``budget_tokens`` the output is instead the best context that fits the budget.
"""

from __future__ import annotations

import numpy as np

from strata.retrieval.context import (assemble, attach_context, denest, gather_sections,
                                     subtree_text)
from strata.retrieval.facets import WINDOW, place, split
from strata.retrieval.fusion import ALPHA, DEPTH, fused_recall
from strata.retrieval.graph_arrays import KIND_CODE
from strata.retrieval.results import Result, Trace


def _uses_walk(index, walk) -> bool:
    """Whether the entity walk runs: forced, or (``"auto"``) when the index has
    passage edges and most of its facts came from a model."""
    if walk in (False, "off"):
        return False
    from strata.retrieval.prepared import model_facts, prepare

    if walk == "auto" and not model_facts(index.manifest):
        return False  # decided by the manifest: nothing of the walk is loaded
    return prepare(index).walk is not None


def _sides(index, query: str, qvec, kinds, alpha, candidates, trace) -> list[int]:
    """The best unit of each side of a comparison the query makes
    (:mod:`retrieval.facets`), each side recalled on its own; [] for a query
    that compares nothing."""
    parts = split(query)
    if not parts:
        return []
    out = []
    with trace.stage("facets"):
        whole = np.asarray(qvec, dtype=np.float32)
        for part in parts:
            # the side's own vector, with the whole question's to keep its context
            # ("V1 where an exception is thrown" is about the question's providers)
            vec = whole + np.asarray(index.embed_query(part), dtype=np.float32)
            rec = fused_recall(index, part, vec, kinds=kinds, depth=int(candidates),
                               alpha=float(alpha))
            if len(rec):
                out.append(int(rec.rows[0]))
    trace.notes.append(f"facets: {len(parts)} sides of a comparison, each recalled on its own")
    return out


def _with_sides(index, entries, sides, window, score):
    """``entries`` of :func:`gather_sections` with each side's unit placed at the
    end of the top ``window`` unless an entry there already is it, holds it or
    folded it in; a placed unit takes the score of the place it takes."""
    from strata.retrieval.context import ancestors

    g = index.graph
    missing = []
    for j in dict.fromkeys(sides):
        covered = any(j == r or j in folded or r in ancestors(g, j)
                      for r, folded in entries[:window])
        if not covered:
            missing.append(j)
    if not missing:
        return entries
    order = place([r for r, _ in entries], missing, window)
    rest = [r for r in order if r not in missing]
    at = order.index(missing[0])
    for n, j in enumerate(missing):
        ref = rest[min(at + n, len(rest) - 1)] if rest else j
        score[j] = max(score.get(j, 0.0), score.get(ref, 0.0))
    folded = dict(entries)
    return [(r, folded.get(r, [])) for r in order]


def search(index, query: str, k: int = 10, trace: Trace | None = None, kinds=None,
           alpha: float = ALPHA, candidates: int = DEPTH, walk: str | bool = "auto",
           context: bool = True, budget_tokens: int | None = None,
           facets: bool = True) -> list[Result]:
    """The default mode (see the module docstring). ``kinds``: unit kinds to
    rank (default all); ``alpha``: weight of the dense signal in the fusion;
    ``candidates``: units taken from each signal; ``walk``: ``"auto"`` (on
    when the facts are model-made), ``"on"``/``True`` or ``"off"``/``False``;
    ``context``: attach each hit's parent/siblings/children; ``budget_tokens``:
    return the best context that fits this many estimated tokens, at most
    ``k`` blocks; ``facets``: give each side of a comparison the query makes
    ("X vs Y") a place in the top (:mod:`retrieval.facets`)."""
    if walk not in (True, False, "auto", "on", "off"):
        raise ValueError(f"walk must be 'auto', 'on' or 'off', not {walk!r}")
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be within [0, 1], got {alpha!r}")
    trace = trace if trace is not None else Trace(mode="auto")
    g = index.graph
    with trace.stage("embed_query"):
        qvec = index.embed_query(query)
    relation: dict[int, tuple[str, str | None]] = {}  # how the walk found a unit
    if _uses_walk(index, walk):
        from strata.retrieval.modes.diffusion import retrieve

        want = max(3 * int(k), int(k) + 10, int(budget_tokens or 0) // 50)
        found, _ = retrieve(index, query, k=want, trace=trace, walk="on", alpha=float(alpha))
        if kinds:
            found = [r for r in found if r.kind in set(kinds)]
        ranked = [(g.index[r.node_id], r.score) for r in found if r.node_id in g.index]
        relation = {g.index[r.node_id]: (r.relation, r.via) for r in found if r.node_id in g.index}
        # the best unit by direct evidence leads; the walk's order follows (the walk is for
        # the second hop, not for what the query names outright)
        with trace.stage("recall"):
            recall = fused_recall(index, query, qvec, kinds=kinds, depth=int(candidates),
                                  alpha=float(alpha))
        if len(recall):
            lead = int(recall.rows[0])
            top = max((s for _, s in ranked), default=1.0)
            ranked = [(lead, top)] + [(j, s) for j, s in ranked if j != lead]
            relation.setdefault(lead, ("seed", None))
        trace.notes.append("auto: fused lead + entity walk (the facts are model-made)")
    else:
        if walk == "auto":
            trace.notes.append("walk: off (no model-made facts in this index)")
        with trace.stage("recall"):
            recall = fused_recall(index, query, qvec, kinds=kinds, depth=int(candidates),
                                  alpha=float(alpha))
        trace.counts.update(candidates=len(recall),
                            lexical_hits=int(np.count_nonzero(recall.lexical)))
        ranked = recall.top(len(recall))
        trace.notes.append("auto: fused recall (dense + BM25)")
    sides = _sides(index, query, qvec, kinds, alpha, candidates, trace) if facets else []

    with trace.stage("assemble"):
        if budget_tokens is not None:
            score = dict(ranked)
            order = place([j for j, _ in ranked], sides, window=min(int(k), WINDOW))
            for j in sides:  # a side's unit found by its own recall ranks where it is placed
                score.setdefault(j, 0.0)
            kept, dropped = denest(g, order, yielding=(KIND_CODE["file"],),
                                   drop_containers=False)
            for container, child in dropped.items():
                score[child] = max(score[child], score[container])
            blocks = assemble(index, [(j, score[j]) for j in kept], int(budget_tokens),
                              max_blocks=int(k))
            results = []
            for j, s, rel in blocks:
                how, via = ("merged", None) if rel == "merged" else relation.get(j, ("seed", None))
                r = index.result(g.ids[j], s, how, via)
                if rel == "merged":
                    r.text = subtree_text(index, j)
                results.append(r)
            trace.counts.update(budget_tokens=int(budget_tokens), blocks=len(results),
                                merged=sum(1 for b in blocks if b[2] == "merged"))
        else:
            rows = [j for j, _ in ranked[:max(3 * int(k), int(k) + 10)]]
            kept, dropped = denest(g, rows, yielding=(KIND_CODE["file"],))
            score = dict(ranked)
            for container, child in dropped.items():  # a part listed for its file keeps its rank
                score[child] = max(score[child], score[container])
            gathered = _with_sides(index, gather_sections(
                index, kept, as_section=not kinds or "section" in kinds), sides,
                                   min(int(k), WINDOW), score)[:k]
            results, hits = [], {}
            for j, folded in gathered:
                best = max([score.get(j, 0.0)] + [score[x] for x in folded])
                how = relation.get(j, relation.get(folded[0], ("seed", None)) if folded
                                   else ("seed", None))
                results.append(index.result(g.ids[j], best, *how))
                if folded:
                    hits[g.ids[j]] = [g.ids[x] for x in folded]
            displaced: dict[str, list[str]] = {}
            for container, child in dropped.items():
                displaced.setdefault(g.ids[child], []).append(g.ids[container])
            trace.counts.update(denested=len(dropped),
                                gathered=sum(len(f) for _, f in gathered))
            if context:
                attach_context(index, results, displaced=displaced, hits=hits)
    return results
