"""Walking an index by hand: a file's outline, a node with its relatives, and
what a node connects to.

Search answers "where is X"; an agent or a reader then wants to look around:
the outline of the file a hit sits in (its hierarchy, with ids and lines),
the hit's parent, siblings and children, and its direct connections beyond
the hierarchy — the links and imports to and from it, the OpenIE facts
extracted from it, the entities it mentions. The MCP server, the HTTP
service's ``/indexes/{name}/nodes/{id}`` and ``/outline`` endpoints and the
web page's side panel all read these functions, so the three always agree.

Everything here returns plain dicts and lists (JSON-ready) and costs a few
CSR slices per call: the outgoing edges come from :attr:`Index.graph`, the
incoming ones from a reversed copy built once per opened index.
"""

from __future__ import annotations

import difflib
import re
import weakref
from dataclasses import dataclass

import numpy as np

from strata.retrieval.graph_arrays import EDGE_CODE, KIND_CODE
from strata.retrieval.results import Result
from strata.core.config.schema import ENTITY, FILE, IMPORT, JUMP, PASSAGE, SEMANTIC, SYNONYMY

MAX_OUTLINE = 400  # entries of one outline (a huge generated file stays readable)
MAX_RELATIVES = 20  # siblings or children listed per node
MAX_CONNECTIONS = 20  # items per connection group
MAX_FACTS = 20

_REVERSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class NotFound(LookupError):
    """A node id, path or module name the index does not have (the message
    suggests close matches)."""


def _title(node: dict) -> str:
    return node["title"] or node["node_path"] or node["kind"]


def item(index, node_id: str, relation: str | None = None) -> dict:
    """One node as a short reference: id, kind, title, breadcrumb, path,
    lines, location (and the relation that led to it)."""
    node = index.node(node_id)
    d = {"node_id": node_id, "kind": node["kind"], "title": _title(node),
         "breadcrumb": node["breadcrumb"], "path": node["path"],
         "start_line": node["start_line"], "end_line": node["end_line"], "page": node["page"],
         "location": Result(**node, score=0.0).location()}
    if relation is not None:
        d["relation"] = relation
    return d


def _dense(index, node_id: str) -> int:
    i = index.graph.index.get(node_id)
    if i is None:
        raise NotFound(f"no node {node_id!r} in this index" + (
            " (a fact is not a graph node: use the chunk it came from)"
            if node_id.startswith("fact-") else ""))
    return i


def ancestors(index, node_id: str) -> list[str]:
    """Ids from the node's parent up to its file (nearest first)."""
    g = index.graph
    out, p = [], int(g.parent[_dense(index, node_id)])
    while p >= 0 and len(out) < 64:
        out.append(g.ids[p])
        p = int(g.parent[p])
    return out


# --------------------------------------------------------------------------- finding a target

_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MAX_CANDIDATES = 8  # names listed when a target is ambiguous or unknown
TARGET_HELP = ("a node id (section-4b33f6494d79af18), a file path (docs/setup.md, "
               "pkg/module.py), a module or symbol (pkg.module, pkg.module.Class.method, "
               "or its unique tail: Class.method) or a document anchor "
               "(docs/setup.md#setup/install)")


@dataclass
class _Names:
    """What a target may name in one index: file paths and module names
    (→ the file's node id) and every non-entity node path (→ its node ids)."""

    files: dict[str, str]
    by_path: dict[str, str]
    node_paths: dict[str, list[str]]
    is_file: set[str]


def _names(index) -> _Names:
    names = _NAMES.get(index)
    if names is None:
        cols = index._columns
        files, modules, node_paths, is_file = {}, {}, {}, set()
        for nid, kind, path, npath in zip(cols["node_id"], cols["kind"], cols["path"],
                                          cols["node_path"]):
            if kind == ENTITY:
                continue
            if kind == FILE:
                files[path] = nid
                is_file.add(nid)
                if npath and npath != path:
                    modules[npath] = nid
            if npath:
                node_paths.setdefault(npath, []).append(nid)
        names = _Names(files, {**modules, **files}, node_paths, is_file)
        _NAMES[index] = names
    return names


def _paths(index) -> tuple[dict[str, str], dict[str, str]]:
    """(file path → file node id, file path or module name → file node id)."""
    names = _names(index)
    return names.files, names.by_path


def resolve(index, target: str) -> str:
    """The node id a user or an agent means by ``target``; every MCP tool that
    takes a node (outline, node, neighbourhood) and :func:`outline` read their
    argument through here, so they all accept the same names. In order:

    1. a node id (``code-641342418cfd80ef``; entities too);
    2. a file path (``tidewater/calibration.py``, ``./docs/calibration.md``) or
       a module name (``tidewater.calibration``): the file's node;
    3. a node path: a symbol (``tidewater.calibration.Calibrator.fit``) or a
       document anchor (``docs/calibration.md#calibration/barometric-drift``);
    4. the unique file path or node path that ends with ``target`` at a
       ``/``, ``.`` or ``#`` boundary (``calibration.md``, ``Calibrator.fit``).

    Raises :class:`NotFound` — one line — listing the candidates when a name
    fits several nodes, or the nearest names when it fits none."""
    target = (target or "").strip()
    if not target:
        raise NotFound("give a node id, a file path or a module name")
    g = index.graph
    if target in g.index:
        return target
    names = _names(index)
    stripped = target[2:] if target.startswith("./") else target
    for t in dict.fromkeys((target, stripped)):
        if t in names.by_path:
            return names.by_path[t]
        ids = names.node_paths.get(t)
        if ids:
            return _one(t, ids, names)
    stripped = stripped.strip("/")
    found: dict[str, str] = {}  # node id → the name it was found by
    for path, nid in names.files.items():
        if path.endswith("/" + stripped):
            found.setdefault(nid, path)
    for npath, ids in names.node_paths.items():
        if npath.endswith(stripped) and npath[-len(stripped) - 1:-len(stripped)] in "/.#" \
                and len(npath) > len(stripped):
            for nid in ids:
                found.setdefault(nid, npath)
    if len(found) == 1:
        return next(iter(found))
    if found:
        shown = sorted(set(found.values()), key=lambda s: (len(s), s))
        raise NotFound(f"{_short(target)!r} fits {len(found)} nodes: "
                       + _list(shown) + "; give the full path or the node id")
    pool = list(dict.fromkeys([*names.by_path, *names.node_paths]))
    near = [n for n in difflib.get_close_matches(target, pool, n=20, cutoff=0.5)
            if _shares_a_word(target, n)][:5]
    raise NotFound(f"no node, file or module {_short(target)!r} in this index"
                   + (f"; did you mean {', '.join(near)}?" if near else ""))


def _leaf(name: str) -> str:
    """The part of a name that tells it apart: the last word of a dotted path,
    a heading's slug or a file's name without its extension."""
    name = name.strip("/").lower()
    last = name.rsplit("/", 1)[-1]
    if "/" in name or last.rsplit(".", 1)[-1] in _FILE_SUFFIXES:
        last = last.rsplit(".", 1)[0] if "." in last else last
        return re.split(r"[#:]+", last)[-1]
    return re.split(r"[./#:]+", name)[-1]


_FILE_SUFFIXES = {"md", "py", "rs", "go", "js", "ts", "txt", "rst", "json", "yaml", "yml",
                  "toml", "html", "htm", "pdf", "docx", "c", "h", "cpp", "java", "ipynb"}


def _shares_a_word(target: str, candidate: str) -> bool:
    """Whether a suggestion is like the name asked for where names differ, in
    their last word (a typo, a plural), not only in letters scattered over them
    or in the package or folder every name shares (``docs/zzz.md`` is not
    ``docs/index.md``)."""
    return difflib.SequenceMatcher(None, _leaf(target), _leaf(candidate)).ratio() >= 0.7


def _one(name: str, ids: list[str], names: _Names) -> str:
    """The node a node path names: the file when a file has it, else the only
    node with it; several (a redefined symbol) are ambiguous."""
    files = [i for i in ids if i in names.is_file]
    if files or len(ids) == 1:
        return (files or ids)[0]
    raise NotFound(f"{_short(name)!r} names {len(ids)} nodes: {_list(ids)}; pass one of "
                   "these ids")


def _list(items: list[str]) -> str:
    more = len(items) - MAX_CANDIDATES
    return ", ".join(items[:MAX_CANDIDATES]) + (f" and {more} more" if more > 0 else "")


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


# --------------------------------------------------------------------------- outline

def outline(index, target: str, max_depth: int | None = None,
            max_items: int = MAX_OUTLINE) -> dict:
    """The hierarchy under ``target`` in document order.

    A file path, a module or a symbol path gives the outline of that node; a
    node id gives the outline of its whole file with that node marked
    (``focus``), which is what a reader of a search hit wants. Each entry:
    node_id, kind, title, depth (0 = the root of the outline), lines, how
    many children it has and whether they are listed (``expanded``). Entries
    deeper than ``max_depth`` are left out, except the way down to ``focus``;
    past ``max_items`` the outline stops and says so (``truncated``)."""
    g = index.graph
    node_id = resolve(index, target)
    focus = None
    if target.strip() == node_id and int(g.kind[g.index[node_id]]) != KIND_CODE[FILE]:
        focus = node_id
        chain = ancestors(index, node_id)
        node_id = chain[-1] if chain else node_id
    root = g.index[node_id]
    on_path = {g.index[a] for a in ancestors(index, focus)} if focus else set()
    entries: list[dict] = []
    truncated = False
    stack = [(root, 0)]
    while stack:
        j, depth = stack.pop()
        if len(entries) >= max_items:
            truncated = True
            break
        kids = g.children(j)
        expand = max_depth is None or depth < max_depth or j in on_path
        e = item(index, g.ids[j])
        e.update(depth=depth, children=int(len(kids)), expanded=bool(expand and len(kids)))
        entries.append(e)
        if expand:
            stack.extend((int(c), depth + 1) for c in kids[::-1])
    return {"root": entries[0], "focus": focus, "entries": entries, "truncated": truncated,
            "ancestors": [item(index, a) for a in ancestors(index, node_id)]}


# --------------------------------------------------------------------------- a node and its relatives

def node_view(index, node_id: str, max_relatives: int = MAX_RELATIVES) -> dict:
    """A node (its text included) with its ancestors (parent first), its
    siblings in document order (the nearest ``max_relatives``) and its first
    ``max_relatives`` children; ``more_siblings`` / ``more_children`` count
    what was left out."""
    g = index.graph
    i = _dense(index, node_id)
    node = item(index, node_id)
    full = index.node(node_id)
    node.update(text=full["text"] or "", language=full["language"],
                node_path=full["node_path"])
    p = int(g.parent[i])
    siblings: list[int] = []
    if p >= 0:
        kids = g.children(p).tolist()
        pos = kids.index(i) if i in kids else 0
        near = sorted((j for j in range(len(kids)) if j != pos),
                      key=lambda j: (abs(j - pos), j))[:max_relatives]
        siblings = [kids[j] for j in sorted(near)]
        node["position"] = pos + 1
        node["of"] = len(kids)
    kids = g.children(i)
    n_sib = (len(g.children(p)) - 1) if p >= 0 else 0
    return {"node": node,
            "ancestors": [item(index, a, "ancestor") for a in ancestors(index, node_id)],
            "parent": item(index, g.ids[p], "parent") if p >= 0 else None,
            "siblings": [item(index, g.ids[j], "sibling") for j in siblings],
            "more_siblings": max(0, n_sib - len(siblings)),
            "children": [item(index, g.ids[int(j)], "child") for j in kids[:max_relatives]],
            "more_children": max(0, len(kids) - max_relatives)}


# --------------------------------------------------------------------------- connections

@dataclass
class _Reversed:
    """Incoming edges as CSR arrays (the graph holds outgoing ones)."""

    indptr: np.ndarray
    src: np.ndarray
    etype: np.ndarray
    relation: list[str]


def _reversed(index) -> _Reversed:
    rev = _REVERSED.get(index)
    if rev is None:
        g = index.graph
        n = len(g.ids)
        src = np.repeat(np.arange(n, dtype=np.int32), np.diff(g.indptr))
        order = np.argsort(g.indices, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, g.indices.astype(np.int64) + 1, 1)
        rev = _Reversed(np.cumsum(indptr), src[order], g.etype[order],
                        [g.relation[k] for k in order.tolist()])
        _REVERSED[index] = rev
    return rev


def _facts(index) -> dict[str, list[dict]]:
    """node id (a chunk or section the fact came from, or either entity) → facts."""
    by = _FACTS.get(index)
    if by is None:
        by = {}
        table = index.facts()
        if table is not None and table.height:
            for f in table.unique(["fact_id", "chunk_id"], keep="first",
                                  maintain_order=True).iter_rows(named=True):
                fact = {"fact_id": f["fact_id"], "head": f["head"], "relation": f["relation"],
                        "tail": f["tail"], "head_id": f["head_id"], "tail_id": f["tail_id"],
                        "source_id": f["chunk_id"]}
                for key in {f["chunk_id"], f["head_id"], f["tail_id"]}:
                    if key:
                        lst = by.setdefault(key, [])
                        if not any(x["fact_id"] == fact["fact_id"] for x in lst):
                            lst.append(fact)
        _FACTS[index] = by
    return by


# (edge type, outgoing group, incoming group); structural edges are node_view's
_GROUPS = ((JUMP, "links_to", "linked_from"), (IMPORT, "imports", "imported_by"),
           (PASSAGE, "entities", "mentioned_in"), (SEMANTIC, "related", "related"),
           (SYNONYMY, "similar", "similar"))


def connections(index, node_id: str, max_items: int = MAX_CONNECTIONS,
                max_facts: int = MAX_FACTS) -> dict:
    """The direct (one-hop) connections of a node beyond its parent and
    children: the sections and files it links to and that link to it
    (``links_to`` / ``linked_from``, jump edges: Markdown links, file paths
    named in configs and code), the modules and symbols it imports and that
    import it, the entities it mentions (or, for an entity, the passages that
    mention it, its related and similar entities), and the OpenIE facts
    extracted from it or about it. Each group holds at most ``max_items``;
    ``counts`` has every group's full size."""
    g = index.graph
    i = _dense(index, node_id)
    out_ids, out_types, _, sl = g.neighbours(i)
    rev = _reversed(index)
    a, b = rev.indptr[i], rev.indptr[i + 1]
    groups: dict[str, list[dict]] = {}
    counts: dict[str, int] = {}
    seen: dict[str, set] = {}

    def add(group: str, j: int, relation: str) -> None:
        nid = g.ids[j]
        if nid == node_id or nid in seen.setdefault(group, set()):
            return
        seen[group].add(nid)
        counts[group] = counts.get(group, 0) + 1
        if counts[group] <= max_items:
            groups.setdefault(group, []).append(item(index, nid, relation))

    code = {EDGE_CODE[t]: (o, inc) for t, o, inc in _GROUPS}
    for j, t, rel in zip(out_ids.tolist(), out_types.tolist(), g.relation[sl]):
        if t == EDGE_CODE[PASSAGE]:  # stored both ways: chunk → entity, entity → chunk
            add("entities" if int(g.kind[j]) == KIND_CODE[ENTITY] else "mentioned_in", j, rel)
        elif t in code:
            add(code[t][0], j, rel)
    for j, t, rel in zip(rev.src[a:b].tolist(), rev.etype[a:b].tolist(), rev.relation[a:b]):
        if t in code and t != EDGE_CODE[PASSAGE]:  # passage edges are stored both ways
            add(code[t][1], j, rel)
    facts = _facts(index).get(node_id, [])
    counts["facts"] = len(facts)
    return {"node": item(index, node_id), "groups": groups, "counts": counts,
            "facts": facts[:max_facts]}
