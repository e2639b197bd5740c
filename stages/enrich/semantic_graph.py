"""The semantic layer of the graph, built from OpenIE output.

- :func:`build_entities`: entity nodes (NODES schema, kind "entity"), one per
  normalized name across the corpus, and the FACTS table (one row per triple
  and the unit it came from).
- :func:`passage_edges`: unit <-> entity ("mentions" / "mentioned_in").
- :func:`semantic_edges`: entity <-> entity from facts, weighted by how many
  facts link the pair.
- :func:`synonymy_edges`: entity <-> entity when their embeddings are close
  (cosine >= threshold), found with a kNN index (faiss; an exact inner-product
  index up to 20k entities, an IVF index above), never an all-pairs loop.
- :func:`redirect_edges`: rewrite edge endpoints through a mapping (image
  dedup folds duplicates into one node).

Plain functions on plain data: no Dagster here.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from strata.stages.enrich.openie import OpenIEOut, normalize
from strata.stages.parse.finalize import stable_hash
from strata.core.storage.layout import read_parquet_file
from strata.core.config.schema import (EDGES, ENTITY, FACTS, NODES, PASSAGE, SEMANTIC, SYNONYMY,
                                empty_table)

__all__ = ["build_entities", "entity_id", "entity_id_map", "fact_id", "passage_edges",
           "semantic_edges", "synonymy_edges", "redirect_edges", "synonymy_benchmark"]

# the entity vectors: a matrix, or a function yielding its rows in blocks (synonymy_edges)
Vectors = np.ndarray | Callable[[], Iterator[np.ndarray]]
# how the kNN is computed, in the synonymy cache's key: bumped when its edges can change
# (2: queries searched in batches of SEARCH_BATCH, not all in one search)
KNN_VERSION = 2
# Queries per faiss search, one size whatever blocks the vectors came in: faiss's
# similarities differ in their last bits with how many queries a search is given.
SEARCH_BATCH = 4096
FLAT_MAX = 20_000  # above this many entities, an IVF index instead of an exact one
NPROBE = 8
MAX_ALIASES = 20


def entity_id(corpus: str, name: str) -> str:
    return "entity-" + stable_hash(corpus, normalize(name))


def fact_id(head: str, relation: str, tail: str,
            norm: Callable[[str], str] = normalize) -> str:
    """``norm``: :func:`normalize`, or a memoized copy of it for a caller that
    sees the same names over and over."""
    return "fact-" + stable_hash(norm(head), norm(relation), norm(tail))


def build_entities(corpus: str, per_unit: Mapping[str, OpenIEOut]) -> tuple[pa.Table, pa.Table]:
    """Entity nodes and facts from validated OpenIE output.

    Entities are the union of each unit's entities and its triples' heads and
    tails, merged by normalized name. ``title`` is the most frequent surface
    form, ``text`` "name: description" (the most frequent description; ties
    broken alphabetically, so ids and arrival order do not matter), ``attrs`` ``{"mentions": units mentioning it,
    "aliases": other surface forms}``. Facts keep one row per (triple, unit),
    so ``fact_id`` repeats when several units state the same fact."""
    norm = lru_cache(maxsize=None)(normalize)  # names recur across units and facts
    forms: dict[str, Counter[str]] = defaultdict(Counter)
    desc: dict[str, Counter[str]] = defaultdict(Counter)
    mentions: Counter[str] = Counter()
    facts: list[dict] = []
    for unit_id in sorted(per_unit):
        out = per_unit[unit_id]
        seen_here: set[str] = set()

        def see(name: str, description: str = "") -> str:
            key = norm(name)
            if not key:
                return ""
            surface = " ".join(name.split())
            forms[key][surface] += 1
            if description:
                desc[key][" ".join(description.split())] += 1
            if key not in seen_here:  # noqa: B023 - called in this iteration only
                seen_here.add(key)  # noqa: B023 - called in this iteration only
                mentions[key] += 1
            return key

        for name, description in out.entities:
            see(name, description)
        for h, r, t in out.triples:
            kh, kt = see(h), see(t)
            if not kh or not kt or kh == kt:
                continue
            h, r, t = (" ".join(x.split()) for x in (h, r, t))
            facts.append({
                "fact_id": fact_id(h, r, t, norm), "head": h, "relation": r, "tail": t,
                "head_id": "entity-" + stable_hash(corpus, kh),
                "tail_id": "entity-" + stable_hash(corpus, kt),
                "chunk_id": unit_id, "text": f"({h}, {r}, {t})",
            })

    rows = []
    for i, key in enumerate(sorted(forms)):
        counts = forms[key]
        # Most frequent form and description; ties broken by the text itself, so
        # the result does not depend on node ids or on the order units arrive in.
        title = min(counts, key=lambda f: (-counts[f], f))
        aliases = sorted(f for f in counts if f != title)[:MAX_ALIASES]
        d = min(desc[key], key=lambda x: (-desc[key][x], x)) if desc.get(key) else ""
        text = f"{title}: {d}" if d else title
        rows.append({
            "node_id": "entity-" + stable_hash(corpus, key), "corpus": corpus, "kind": ENTITY,
            "subkind": "", "path": "", "node_path": f"entity:{key}", "parent_id": None,
            "depth": 0, "ordinal": i, "title": title, "breadcrumb": title, "text": text,
            "start_line": None, "end_line": None, "page": None, "language": None,
            "content_hash": stable_hash(text), "embedded": True,
            "attrs": json.dumps({"mentions": mentions[key], "aliases": aliases},
                                ensure_ascii=False),
        })
    return (pa.Table.from_pylist(rows, schema=NODES),
            pa.Table.from_pylist(facts, schema=FACTS))


def entity_id_map(entities: pa.Table | pl.DataFrame) -> dict[str, str]:
    """normalized name -> entity node id, from an entities table."""
    df = entities if isinstance(entities, pl.DataFrame) else pl.from_arrow(entities)
    if df.height == 0:
        return {}
    return {p.removeprefix("entity:"): i
            for p, i in zip(df["node_path"].to_list(), df["node_id"].to_list())}


def _edges(src: list[str], dst: list[str], etype: str, relation: list[str] | str,
           weight: list[float] | np.ndarray | float) -> pa.Table:
    n = len(src)
    rel = [relation] * n if isinstance(relation, str) else relation
    w = np.full(n, weight, dtype=np.float32) if np.isscalar(weight) else np.asarray(weight, np.float32)
    return pa.table({"src": pa.array(src, pa.string()), "dst": pa.array(dst, pa.string()),
                     "type": pa.array([etype] * n, pa.string()), "relation": pa.array(rel, pa.string()),
                     "weight": pa.array(w, pa.float32())}, schema=EDGES)


def passage_edges(per_unit: Mapping[str, OpenIEOut],
                  entity_ids: Mapping[str, str] | pa.Table | pl.DataFrame) -> pa.Table:
    """unit -> entity ("mentions") and entity -> unit ("mentioned_in"), weight 1,
    for every entity a unit lists or uses in a triple. ``entity_ids`` maps
    normalized names to entity ids (or is the entities table)."""
    ids = entity_ids if isinstance(entity_ids, Mapping) else entity_id_map(entity_ids)
    src: list[str] = []
    dst: list[str] = []
    for unit_id in sorted(per_unit):
        out = per_unit[unit_id]
        names = [e[0] for e in out.entities] + [x for h, _, t in out.triples for x in (h, t)]
        linked: list[str] = []
        for name in names:
            eid = ids.get(normalize(name))
            if eid and eid not in linked:
                linked.append(eid)
        for eid in linked:
            src.append(unit_id)
            dst.append(eid)
    return pa.concat_tables([_edges(src, dst, PASSAGE, "mentions", 1.0),
                             _edges(dst, src, PASSAGE, "mentioned_in", 1.0)])


def semantic_edges(facts: pa.Table | pl.DataFrame) -> pa.Table:
    """Entity <-> entity in both directions, one pair of edges per unordered
    entity pair: relation = the pair's most frequent relation text (ties: the
    alphabetically first), weight = the number of fact rows linking the pair."""
    df = facts if isinstance(facts, pl.DataFrame) else pl.from_arrow(facts)
    if df.height == 0:
        return empty_table(EDGES)
    df = (df.filter(pl.col("head_id") != pl.col("tail_id"))
          .with_columns(a=pl.min_horizontal("head_id", "tail_id"),
                        b=pl.max_horizontal("head_id", "tail_id")))
    weights = df.group_by("a", "b").agg(pl.len().alias("weight"))
    top_rel = (df.group_by("a", "b", "relation").agg(pl.len().alias("n"))
               .sort(["a", "b", "n", "relation"], descending=[False, False, True, False])
               .group_by("a", "b", maintain_order=True).first()
               .select("a", "b", "relation"))
    pairs = weights.join(top_rel, on=["a", "b"]).sort("a", "b")
    a, b = pairs["a"].to_list(), pairs["b"].to_list()
    rel, w = pairs["relation"].to_list(), pairs["weight"].to_numpy()
    return pa.concat_tables([_edges(a, b, SEMANTIC, rel, w), _edges(b, a, SEMANTIC, rel, w)])


def _knn_faiss(vectors: Vectors, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of the ``n`` vectors' ``k`` nearest by inner product: (similarities,
    positions), as faiss's ``search`` gives them.

    Given blocks (see :func:`synonymy_edges`), the vectors are never held beside
    the index's own copy of them: an exact index is filled a block at a time; an
    IVF index is trained on the whole matrix, which goes once each vector's list
    is known, and is then filled from a second pass. The queries are the index's
    own copies, read back ``SEARCH_BATCH`` at a time (an IVF index keeps where
    each went: eight bytes a vector), not a third read of the vectors: the same
    numbers, without a reader's buffers beside the index. Given a matrix, the
    same steps run on it as one block."""
    import faiss

    blocks = vectors if callable(vectors) else lambda: iter((vectors,))
    if n <= FLAT_MAX:
        index = None
        for block in blocks():
            if index is None:
                index = faiss.IndexFlatIP(block.shape[1])
            index.add(_float32(block))
    else:
        matrix = _matrix(vectors, n)
        dim = matrix.shape[1]
        # ~4·sqrt(n) lists, but no more than the training set supports (39 points each)
        nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(matrix)
        index.nprobe = NPROBE
        _, lists = index.quantizer.search(matrix, 1)
        del matrix
        lists = np.ascontiguousarray(lists.ravel(), dtype=np.int64)
        _reserve_lists(index, lists)
        at = 0
        for block in blocks():
            block = _float32(block)
            if at + len(block) > n:  # the lists cover n vectors: never read past them
                raise ValueError(f"{n} entity ids but more vectors")
            # each vector to the list its quantizer picked (what ``add`` does); its id
            # is its position
            index.add_core(len(block), faiss.swig_ptr(block), None,
                           faiss.swig_ptr(lists[at:at + len(block)]))
            at += len(block)
        index.make_direct_map()  # a vector's list and place in it, for reconstruct_n
    if index is None or index.ntotal != n:
        raise ValueError(f"{n} entity ids but {0 if index is None else index.ntotal} vectors")
    sims, labels = np.empty((n, k), np.float32), np.empty((n, k), np.int64)
    for at in range(0, n, SEARCH_BATCH):
        queries = index.reconstruct_n(at, min(SEARCH_BATCH, n - at))
        sims[at:at + len(queries)], labels[at:at + len(queries)] = index.search(queries, k)
    return sims, labels


def _float32(block: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(block, dtype=np.float32)


def _matrix(vectors: Vectors, n: int) -> np.ndarray:
    """The vectors as one matrix (filled in place from blocks, never a list of
    blocks joined, which would hold every vector twice)."""
    if not callable(vectors):
        matrix = _float32(vectors)
        if matrix.shape[0] != n:
            raise ValueError(f"{n} entity ids but {matrix.shape[0]} vectors")
        return matrix
    matrix, at = None, 0
    for block in vectors():
        if matrix is None:
            matrix = np.empty((n, block.shape[1]), np.float32)
        if at + len(block) > n:
            raise ValueError(f"{n} entity ids but more vectors")
        matrix[at:at + len(block)] = block
        at += len(block)
    if matrix is None or at != n:
        raise ValueError(f"{n} entity ids but {at} vectors")
    return matrix


def _reserve_lists(index, lists: np.ndarray) -> None:
    """Give each inverted list of a trained IVF index the room for exactly the
    vectors ``lists`` assigns it, before they go in: a list grown one vector at a
    time doubles its buffer as it fills, and the copies and the unused half were
    the index's largest transient. faiss's own ``resize`` (up, then back to empty)
    reserves the room; the index is the one ``add`` makes."""
    invlists = index.invlists
    for list_no, count in enumerate(np.bincount(lists, minlength=index.nlist).tolist()):
        if count:
            invlists.resize(list_no, count)
            invlists.resize(list_no, 0)


def synonymy_edges_cached(entity_ids: list[str], vectors, cache_dir: Path,
                          threshold: float = 0.8, k: int = 10,
                          vectors_key: str | None = None) -> tuple[pa.Table, bool]:
    """:func:`synonymy_edges`, kept as Parquet in ``cache_dir`` under a key of
    the entity ids, their vectors and the parameters: the all-pairs kNN is most
    of an unchanged rebuild's graph stage. Returns (edges, from_cache).

    ``vectors``: as :func:`synonymy_edges` takes them. ``vectors_key``: a
    digest that stands for the vectors (the text hashes they were encoded from),
    so a cache hit needs no vector read at all; without it the key hashes the
    vectors' own bytes."""
    import hashlib

    import pyarrow.parquet as pq

    h = hashlib.sha256(f"{KNN_VERSION}:{threshold}:{k}:{len(entity_ids)}:".encode())
    h.update("\x00".join(entity_ids).encode())
    if vectors_key is None:
        for block in (vectors() if callable(vectors) else (vectors,)):
            h.update(memoryview(_float32(block)))  # the array's own bytes: no copy of every vector
    else:
        h.update(f"\x01{vectors_key}".encode())
    path = Path(cache_dir) / f"synonymy-{h.hexdigest()[:32]}.parquet"
    if path.exists():
        try:
            return read_parquet_file(path), True
        except (OSError, ValueError):
            pass  # a damaged entry is recomputed
    table = synonymy_edges(entity_ids, vectors, threshold=threshold, k=k)
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    for old in Path(cache_dir).glob("synonymy-*.parquet"):  # one entry: the latest
        old.unlink(missing_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return table, False


def synonymy_edges(entity_ids: list[str], vectors: Vectors, threshold: float = 0.8,
                   k: int = 10) -> pa.Table:
    """Entity <-> entity ("similar_to") for each entity's k nearest neighbours
    with cosine similarity >= ``threshold`` (vectors must be L2-normalized);
    both directions, weight = the similarity, self matches skipped.

    ``vectors``: the matrix, one row per id; or a function that yields its rows
    in order, a block at a time, each time it is called (a reader of the vector
    table: the kNN reads them in passes rather than hold them beside its index,
    :func:`_knn_faiss`)."""
    n = len(entity_ids)
    if n < 2:
        return empty_table(EDGES)
    kk = min(k + 1, n)  # +1: each vector finds itself
    sims, idx = _knn_faiss(vectors, n, kk)
    rows = np.repeat(np.arange(n), idx.shape[1])
    cols = idx.ravel()
    vals = sims.ravel()
    keep = (cols >= 0) & (cols != rows) & (vals >= threshold)
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    # one entry per unordered pair (the best similarity either side saw), then both directions
    a, b = np.minimum(rows, cols), np.maximum(rows, cols)
    order = np.lexsort((-vals, b, a))
    a, b, vals = a[order], b[order], vals[order]
    first = np.ones(len(a), bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    a, b, vals = a[first], b[first], np.minimum(vals[first], 1.0)
    ids = np.asarray(entity_ids, dtype=object)
    src = ids[np.concatenate([a, b])].tolist()
    dst = ids[np.concatenate([b, a])].tolist()
    return _edges(src, dst, SYNONYMY, "similar_to", np.concatenate([vals, vals]))


def redirect_edges(edges: pa.Table, mapping: Mapping[str, str]) -> pa.Table:
    """Rewrite src/dst through ``mapping`` (ids not in it stay), then drop the
    self-loops this creates and duplicate (src, dst, type, relation) edges,
    keeping the first."""
    if edges.num_rows == 0 or not mapping:
        return edges
    df = pl.from_arrow(edges)
    if not isinstance(df, pl.DataFrame):  # pragma: no cover - a table always gives a frame
        df = df.to_frame()
    m = dict(mapping)
    df = df.with_columns(pl.col("src").replace(m), pl.col("dst").replace(m))
    df = (df.filter(pl.col("src") != pl.col("dst"))
          .unique(subset=["src", "dst", "type", "relation"], keep="first", maintain_order=True))
    return df.to_arrow().select(EDGES.names).cast(EDGES)


def synonymy_benchmark(n: int, dim: int = 384, k: int = 10, seed: int = 0) -> dict:
    """Time :func:`synonymy_edges` on ``n`` random unit vectors (benchmark only)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ids = [f"e{i}" for i in range(n)]
    t0 = time.perf_counter()
    edges = synonymy_edges(ids, v, k=k)
    return {"n": n, "seconds": time.perf_counter() - t0, "edges": edges.num_rows,
            "index": "flat" if n <= FLAT_MAX else "ivf"}
