"""A hit's place in its document, and a context assembled to a token budget.

Two uses of the hierarchy that do not spend result slots:

* :func:`attach_context` gives every result its parent, its nearest siblings
  and (for a section or a class) its first children, as ``Result.context`` —
  the reader sees where a hit sits without the relatives competing with other
  hits for the ``k`` places.
* :func:`denest` keeps a result list free of containment: a section listed
  below one of its own subsections (or a class below one of its methods) is
  dropped from the list and becomes part of that descendant's context — the
  more specific unit already answers, and its parent is named with it.
* :func:`gather_sections` spends the ``k`` places on distinct places: two or
  more hits inside one section come back as that section, the hits named in
  its context (relation ``"hit"``), instead of filling the list with one
  section's chunks and code blocks.
* :func:`assemble` packs the best units into ``budget_tokens`` estimated
  tokens, merging siblings into their parent when the parent's whole text
  costs less than listing them one by one (the "auto-merging" of LlamaIndex's
  hierarchical retriever, decided here by cost rather than by a fixed ratio).
"""

from __future__ import annotations


import numpy as np

from strata.core.tokens import estimate_tokens
from strata.retrieval.results import Result

CONTEXT_SIBLINGS = 2  # nearest siblings named with each hit
CONTEXT_CHILDREN = 4  # first children named with a container hit
MERGE_SLACK = 1.25  # a parent replaces its listed children if it costs ≤ this × their sum
# a section longer than this (characters) is not returned in place of its hits: its
# best hit stays the result and the others become its context
SECTION_MAX_CHARS = 8000
_PARTS = ("chunk", "code", "table", "image")  # what a document section is made of


def ancestors(graph, i: int, limit: int = 64) -> list[int]:
    out: list[int] = []
    p = int(graph.parent[i])
    while p >= 0 and len(out) < limit:
        out.append(p)
        p = int(graph.parent[p])
    return out


def denest(graph, rows: list[int], yielding=(),
           drop_containers: bool = True) -> tuple[list[int], dict[int, int]]:
    """``rows`` (best first) without any node that a descendant of it precedes;
    returns (kept rows, dropped container → the descendant that displaced it).

    A node whose kind code is in ``yielding`` (files: a whole file is rarely
    the answer when one of its parts is also listed) also gives way to a
    descendant listed *after* it: the best such descendant moves up into the
    container's place, and the container becomes that descendant's context.
    ``drop_containers=False`` applies only that (a budgeted context keeps a
    section and its subsection: their own texts do not overlap)."""
    rows = list(rows)
    dropped: dict[int, int] = {}
    if yielding:
        anc_of = {r: set(ancestors(graph, r)) for r in rows}
        out: list[int] = []
        placed: set[int] = set()
        for r in rows:
            if r in placed:
                continue
            if int(graph.kind[r]) in yielding:
                below = next((d for d in rows if d not in placed and r in anc_of[d]), None)
                if below is not None:
                    dropped[r] = below
                    r = below
            out.append(r)
            placed.add(r)
        rows = out
    if not drop_containers:
        return rows, dropped
    pos = {r: i for i, r in enumerate(rows)}
    for r in rows:
        for a in ancestors(graph, r):
            if a in pos and pos[a] > pos[r] and a not in dropped:
                dropped[a] = r
    return [r for r in rows if r not in dropped], dropped


def _item(index, j: int, relation: str) -> dict:
    node = index.node(index.graph.ids[j])
    loc = Result(**node, score=0.0).location()
    return {"node_id": node["node_id"], "relation": relation, "kind": node["kind"],
            "title": node["title"] or node["node_path"] or node["kind"], "location": loc}


def nearest_siblings(graph, i: int, limit: int) -> np.ndarray:
    """Up to ``limit`` siblings of ``i``, nearest in document order first (the
    preceding one first on a tie). Reads only the parent's child slice."""
    p = int(graph.parent[i])
    if p < 0 or limit <= 0:
        return np.zeros(0, dtype=np.int64)
    kids = graph.children(p)
    where = np.flatnonzero(kids == i)
    if not where.size:  # not listed under its parent (should not happen)
        return np.zeros(0, dtype=np.int64)
    pos = int(where[0])
    lo, hi = max(0, pos - limit), min(len(kids), pos + limit + 1)
    window = kids[lo:hi]
    dist = np.abs(np.arange(lo, hi) - pos)
    order = np.argsort(dist, kind="stable")[1:limit + 1]  # [0] is i itself
    return window[order].astype(np.int64)


def _section_of(graph, i: int, section: int, parts: set[int]) -> int | None:
    """The document section holding part ``i`` (a chunk, code block, table or
    image under a heading), ``i`` itself for a section; None for anything else
    (a file, or a function or class of a source file, whose parents are code)."""
    k = int(graph.kind[i])
    if k == section:
        return i
    if k not in parts:
        return None
    p = int(graph.parent[i])
    while p >= 0 and int(graph.kind[p]) in parts:
        p = int(graph.parent[p])
    return p if p >= 0 and int(graph.kind[p]) == section else None


def gather_sections(index, rows: list[int], max_chars: int = SECTION_MAX_CHARS,
                    as_section: bool = True) -> list[tuple[int, list[int]]]:
    """``rows`` (best first) with the hits of one document section gathered
    into one entry: returns (row, folded rows) in rank order, where ``row`` is
    the section when two or more of its parts (or it and a part) were hit and
    its text is at most ``max_chars``, else the best hit; the other hits of
    that section are ``folded`` (named in its context, not given places).

    Why: a question about one topic matches every chunk and code block of
    the section that covers it; listing them one by one spends the ``k``
    places on one place, and the second page or section a question needs
    drops out of the list. ``as_section=False`` keeps the best hit as the entry
    (a search restricted to kinds that exclude sections). Parts of source
    files (functions, classes) are
    not gathered: they are distinct answers, and :func:`denest` already keeps
    a class from being listed below its own methods."""
    from strata.retrieval.graph_arrays import KIND_CODE

    g = index.graph
    section = KIND_CODE["section"]
    parts = {KIND_CODE[k] for k in _PARTS if k in KIND_CODE}
    texts, row_of = index._columns["text"], index._row_of
    entries: list[list] = []  # [row, folded rows]
    at: dict[int, int] = {}  # section → its entry
    for r in rows:
        s = _section_of(g, r, section, parts)
        if s is None:
            entries.append([r, []])
            continue
        if s not in at:
            at[s] = len(entries)
            entries.append([r, []])
            continue
        entry = entries[at[s]]
        if as_section and entry[0] != s and len(texts[row_of[g.ids[s]]] or "") <= max_chars:
            entry[1].append(entry[0])  # the section takes the place of its first hit
            entry[0] = s
        if r != entry[0]:
            entry[1].append(r)
    return [(r, folded) for r, folded in entries]


def attach_context(index, results: list[Result], siblings: int = CONTEXT_SIBLINGS,
                   children: int = CONTEXT_CHILDREN,
                   displaced: dict[str, list[str]] | None = None,
                   hits: dict[str, list[str]] | None = None) -> list[Result]:
    """Fill ``Result.context`` of each result with a graph node: its parent, its
    nearest ``siblings`` in document order, its first ``children``, the
    containers :func:`denest` dropped in its favour (relation ``"container"``)
    and the hits :func:`gather_sections` folded into it (relation ``"hit"``).
    Cost: a few CSR slices per result, whatever the size of the index."""
    g = index.graph
    for r in results:
        i = g.index.get(r.node_id)
        if i is None:
            continue
        items = [_item(index, g.index[nid], "hit") for nid in (hits or {}).get(r.node_id, [])
                 if nid in g.index]
        p = int(g.parent[i])
        if p >= 0:
            items.append(_item(index, p, "parent"))
        items += [_item(index, j, "sibling") for j in nearest_siblings(g, i, siblings).tolist()]
        items += [_item(index, int(j), "child") for j in g.children(i)[:max(0, children)]]
        for nid in (displaced or {}).get(r.node_id, []):
            j = g.index.get(nid)
            if j is not None and j != p:
                items.append(_item(index, j, "container"))
        r.context = items
    return results


def subtree(graph, i: int) -> list[int]:
    """``i`` and everything below it, in document order (pre-order)."""
    out, stack = [], [i]
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(int(c) for c in graph.children(j)[::-1])
    return out


def assemble(index, ranked: list[tuple[int, float]], budget_tokens: int,
             max_blocks: int | None = None) -> list[tuple[int, float, str]]:
    """The best units of ``ranked`` (dense id, score; best first) that fit in
    ``budget_tokens``, at most ``max_blocks`` of them (the budget caps the
    list; it never lengthens it past the caller's ``k``): returns (dense id, score, relation) where relation is
    ``"seed"`` for a unit taken as it is and ``"merged"`` for a parent that
    replaced two or more of its children.

    Greedy by rank: a unit is taken when its text fits the remaining budget
    (a longer one is skipped, a later shorter one may still fit). After each
    take, when two or more taken units share a parent and the parent's whole
    subtree costs at most ``MERGE_SLACK`` × their summed cost plus what is
    left, the parent replaces them — one coherent block for about the same
    tokens, carrying its children's text and the text between them."""
    g = index.graph
    texts = index._columns["text"]
    row = index._row_of
    cost_of: dict[int, int] = {}

    def own_cost(j: int) -> int:
        if j not in cost_of:
            cost_of[j] = estimate_tokens(texts[row[g.ids[j]]])
        return cost_of[j]

    def subtree_cost(j: int) -> int:
        return sum(own_cost(x) for x in subtree(g, j))

    taken: dict[int, tuple[float, str]] = {}
    covered: set[int] = set()  # nodes whose text a merged block already includes
    used = 0
    for j, s in ranked:
        if max_blocks is not None and len(taken) >= max_blocks:
            break
        if j in taken or j in covered:
            continue
        c = own_cost(j)
        if used + c > budget_tokens:
            continue
        taken[j] = (s, "seed")
        used += c
        p = int(g.parent[j])
        if p < 0 or p in covered:
            continue
        if sum(1 for x in taken if int(g.parent[x]) == p) < 2:
            continue
        inside = [x for x in taken if x == p or p in ancestors(g, x)]  # all taken below p
        listed = sum(own_cost(x) for x in inside)
        whole = subtree_cost(p)
        if whole <= MERGE_SLACK * listed and used - listed + whole <= budget_tokens:
            best = max(taken[x][0] for x in inside)
            for x in inside:
                del taken[x]
            used = used - listed + whole
            taken[p] = (best, "merged")
            covered.update(subtree(g, p))
    return sorted(((j, s, rel) for j, (s, rel) in taken.items()), key=lambda t: -t[1])


def subtree_text(index, j: int) -> str:
    """The text of ``j`` and everything below it, in document order."""
    g = index.graph
    texts, row = index._columns["text"], index._row_of
    return "\n\n".join(t for t in (texts[row[g.ids[x]]] for x in subtree(g, j)) if t)
