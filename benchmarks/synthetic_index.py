"""A published index of any size written directly, without a build: what a
query against a million nodes costs cannot wait for a million nodes to be
parsed and embedded on a small machine.

The version folder looks like one ``strata index`` publishes, as far as a
query reads it: ``CURRENT``, ``versions/v000001/manifest.json`` (a real
index's manifest, its counts replaced, so the model and the query runtime are
that index's) and ``query/`` written by :func:`strata.core.query_arrays.save`, with
the approximate index it writes at this size. There are no Parquet tables,
Lance tables or BM25 collections, so only dense (``flat``) queries run on it.

Its shape is that of a documentation corpus: files of about ten sections of
about ten chunks (parent ids, ordinals, breadcrumbs, ``contains``/``part_of``
edges both ways, a link per section to another file, a similarity edge per
chunk). Its vectors are 384-dimensional unit vectors drawn around a few
thousand random centres on the sphere, a section near its file's topic and a
chunk near its section's, so nearest neighbours are a neighbourhood rather
than noise and the recall of an approximate search against the exact one
measures something. The probe texts and vectors are the template index's,
so the query runtime's agreement recorded for it holds here.

Usage: ``python -m benchmarks.synthetic_index OUT --nodes 1000000 --template INDEX``
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

DIM = 384
FORMAT = 2  # bump when what is written changes, so a cached index is written again
INFO = "synthetic.json"  # in the index folder: the parameters and the time writing took
CHILDREN = (5, 16)  # sections per file and chunks per section: uniform, about ten
NOISE = 1.0  # length of the Gaussian offset of a vector from its centre (centres are unit)
QUERY_NOISE = 0.5  # the same for a query, from the stored vector it copies
TOPIC_STAYS = (0.6, 0.8)  # chance a section keeps its file's centre, a chunk its section's
WORDS = [a + b + c for a in ("b", "d", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
         for b in ("a", "e", "i", "o", "u", "ai", "ou") for c in ("l", "n", "r", "s", "th", "x")]


def clusters_for(nodes: int) -> int:
    """Centres for ``nodes`` vectors: a few thousand, a few hundred vectors each."""
    return int(min(3000, max(16, nodes // 300)))


def _ids(kind: np.ndarray, names: tuple[str, ...]) -> list[str]:
    """``kind-<16 hex>`` ids, distinct, that look like the content hashes real ids are."""
    mixed = (np.arange(len(kind), dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    return [f"{names[k]}-{h:016x}" for k, h in zip(kind.tolist(), mixed.tolist())]


def _hierarchy(nodes: int, rng: np.random.Generator):
    """Dense ids in the order files, sections, chunks: (kind 0/1/2, parent, ordinal,
    file of each node, section of each chunk or -1), all as dense ids."""
    files = max(1, int(nodes / 111 * 1.02) + 1)
    per_file = rng.integers(*CHILDREN, files)
    sections = int(per_file.sum())
    if files + sections >= nodes:
        raise ValueError(f"{nodes} nodes are too few for a hierarchy of files and sections")
    per_section = rng.integers(*CHILDREN, sections)
    chunks = nodes - files - sections
    sec_parent = np.repeat(np.arange(files), per_file)
    chunk_parent = np.repeat(np.arange(sections), per_section)[:chunks]
    kind = np.concatenate([np.zeros(files, np.int8), np.ones(sections, np.int8),
                           np.full(chunks, 2, np.int8)])
    parent = np.concatenate([np.full(files, -1), sec_parent, files + chunk_parent]).astype(np.int32)

    def ordinals(par: np.ndarray) -> np.ndarray:
        starts = np.r_[0, np.nonzero(np.diff(par))[0] + 1]
        counts = np.diff(np.r_[starts, len(par)])
        return np.arange(len(par)) - np.repeat(starts, counts)

    ordinal = np.concatenate([np.zeros(files, np.int64), ordinals(sec_parent),
                              ordinals(chunk_parent)])
    file_of = np.concatenate([np.arange(files), sec_parent, sec_parent[chunk_parent]])
    section_of = np.concatenate([np.full(files + sections, -1), files + chunk_parent])
    return kind, parent, ordinal, file_of, section_of


def _vectors(kind, parent, centres: np.ndarray, rng: np.random.Generator):
    """(unit vectors, centre of each node): a file's centre at random, a
    section's its file's or (sometimes) another, a chunk's its section's or another."""
    n = len(kind)
    centre = rng.integers(0, len(centres), n)
    for level, stays in zip((1, 2), TOPIC_STAYS):  # parents precede children: one pass a level
        rows = np.nonzero(kind == level)[0]
        keep = rows[rng.random(len(rows)) < stays]
        centre[keep] = centre[parent[keep]]
    out = np.empty((n, centres.shape[1]), np.float32)
    sigma = np.float32(NOISE / np.sqrt(centres.shape[1]))
    for a in range(0, n, 65536):
        b = min(n, a + 65536)
        v = centres[centre[a:b]] + sigma * rng.standard_normal((b - a, centres.shape[1]),
                                                               dtype=np.float32)
        out[a:b] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out, centre


def _edges(kind, parent, centre, rng: np.random.Generator):
    """(src, dst, type code, relation name) of every edge."""
    from strata.core.query_arrays import EDGE_CODE
    from strata.core.config.schema import JUMP, SEMANTIC, STRUCTURAL

    child = np.nonzero(parent >= 0)[0]
    files = np.nonzero(kind == 0)[0]
    sections = np.nonzero(kind == 1)[0]
    chunks = np.nonzero(kind == 2)[0]
    linked = files[rng.integers(0, len(files), len(sections))]  # a link to another page
    # a similarity edge to a chunk drawn among those of the same centre (itself when alone)
    by_centre = chunks[np.argsort(centre[chunks], kind="stable")]
    c_sorted = centre[by_centre]
    lo = np.searchsorted(c_sorted, centre[chunks], "left")
    hi = np.searchsorted(c_sorted, centre[chunks], "right")
    similar = by_centre[lo + (rng.random(len(chunks)) * (hi - lo)).astype(np.int64)]
    parts = [(parent[child], child, STRUCTURAL, "contains"),
             (child, parent[child], STRUCTURAL, "part_of"),
             (sections, linked, JUMP, "links_to"),
             (chunks, similar, SEMANTIC, "similar_to")]
    relations = [r for _, _, _, r in parts]
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int32)
    etype = np.concatenate([np.full(len(p[0]), EDGE_CODE[p[2]], np.int8) for p in parts])
    rel = np.concatenate([np.full(len(p[0]), i, np.int8) for i, p in enumerate(parts)])
    return src, dst, etype, rel, relations


def _node_table(kind, parent, ordinal, file_of, section_of, ids, rng: np.random.Generator):
    """The node fields a query returns (:data:`strata.core.query_arrays.NODE_FIELDS`)."""
    import pyarrow as pa

    names = ("file", "section", "chunk")
    n = len(kind)
    words = rng.integers(0, len(WORDS), (n, 10)).tolist()
    titles = [f"{WORDS[w[0]].capitalize()} {WORDS[w[1]]}" for w in words]
    path = [f"docs/d{f // 100:03d}/page{f:06d}.md" for f in file_of.tolist()]
    sec_no = np.where(kind == 1, ordinal, 0)
    sec_no[kind == 2] = ordinal[section_of[kind == 2]]
    node_path, breadcrumb = [], []
    for i, (k, p, s, o) in enumerate(zip(kind.tolist(), path, sec_no.tolist(), ordinal.tolist())):
        if k == 0:
            node_path.append(p)
            breadcrumb.append(p)
        elif k == 1:
            node_path.append(f"{p}#section-{s + 1}")
            breadcrumb.append(f"{p} > {titles[i]}")
        else:
            sec = titles[parent[i]]
            node_path.append(f"{p}#section-{s + 1}/chunk-{o + 1}")
            breadcrumb.append(f"{p} > {sec} > {sec} (part {o + 1})")
    text = [" ".join(WORDS[x] for x in w) + "." for w in words]
    start = (np.where(kind == 0, 1, 1 + 12 * ordinal) + 3 * np.where(kind == 2, sec_no, 0))
    return pa.table({
        "node_id": pa.array(ids, pa.string()),
        "kind": pa.array([names[k] for k in kind.tolist()], pa.string()),
        "path": pa.array(path, pa.string()),
        "node_path": pa.array(node_path, pa.string()),
        "breadcrumb": pa.array(breadcrumb, pa.string()),
        "text": pa.array(text, pa.string()),
        "title": pa.array(titles, pa.string()),
        "start_line": pa.array(start.astype(np.int32)),
        "end_line": pa.array((start + 10).astype(np.int32)),
        "page": pa.nulls(n, pa.int32()),
        "language": pa.nulls(n, pa.string()),
    })


def _csr(n: int, index_of, values):
    """Pointer array and the permutation grouping ``values`` by ``index_of``."""
    order = np.argsort(index_of, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(index_of, minlength=n))
    return ptr, order


def write(out: Path, nodes: int, template: Path, seed: int = 0,
          ann_min_vectors: int | None = None) -> dict:
    """Write a synthetic index of ``nodes`` nodes into ``out`` (replacing what is
    there), its manifest and probe from the published index ``template``;
    returns the parameters and the seconds writing took (also in ``out/synthetic.json``)."""
    import pyarrow as pa

    from strata.core.storage.layout import IndexLayout
    from strata.core.query_arrays import KIND_CODE, Graph, QueryArrays, open_arrays, save
    from strata.core.config.schema import CHUNK, FILE, SECTION

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    tdir = IndexLayout(template).resolve()
    manifest = json.loads((tdir / "manifest.json").read_text())
    probe = open_arrays(tdir)
    if probe is None or manifest.get("dim") != DIM:
        raise SystemExit(f"{template}: a published index of dimension {DIM} with query arrays "
                         "is needed as the template")
    kind, parent, ordinal, file_of, section_of = _hierarchy(nodes, rng)
    codes = np.array([KIND_CODE[FILE], KIND_CODE[SECTION], KIND_CODE[CHUNK]], np.int8)[kind]
    k = clusters_for(nodes)
    centres = rng.standard_normal((k, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors, centre = _vectors(kind, parent, centres, rng)
    src, dst, etype, rel, relations = _edges(kind, parent, centre, rng)
    indptr, order = _csr(nodes, src, dst)
    has_parent = np.nonzero(parent >= 0)[0]  # parent[has_parent] is non-decreasing
    child_ptr = np.zeros(nodes + 1, np.int64)
    child_ptr[1:] = np.cumsum(np.bincount(parent[has_parent], minlength=nodes))
    ids = _ids(kind, ("file", "section", "chunk"))
    graph = Graph(ids, codes, parent, child_ptr, has_parent.astype(np.int32), indptr,
                  dst[order], etype[order], np.ones(len(order), np.float32),
                  [relations[r] for r in rel[order].tolist()])
    table = _node_table(kind, parent, ordinal, file_of, section_of, ids, rng)
    t_arrays = time.perf_counter() - t0

    if out.exists():
        shutil.rmtree(out)
    vdir = out / "versions" / "v000001"
    vdir.mkdir(parents=True)
    arrays = QueryArrays(graph=graph, nodes=table, vectors=vectors,
                         has_vector=np.ones(nodes, bool), fact_ids=pa.array([], pa.string()),
                         fact_vectors=np.zeros((0, DIM), np.float32),
                         probe_texts=list(probe.probe_texts),
                         probe_vectors=np.asarray(probe.probe_vectors, np.float32))
    t1 = time.perf_counter()
    save(arrays, vdir, ann_min_vectors=ann_min_vectors)
    t_save = time.perf_counter() - t1
    meta = json.loads((vdir / "query" / "arrays.json").read_text())

    kinds = {"file": int((kind == 0).sum()), "section": int((kind == 1).sum()),
             "chunk": int((kind == 2).sum())}
    by_type = {}
    for r, name in enumerate(relations):
        t = {"contains": "structural", "part_of": "structural", "links_to": "jump",
             "similar_to": "semantic"}[name]
        by_type[t] = by_type.get(t, 0) + int((rel == r).sum())
    manifest.update({
        "corpus": "synthetic", "root": f"(written by benchmarks.synthetic_index, seed {seed})",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), "version": 1,
        "run_id": None, "source_fingerprint": None, "skipped": 0, "stages": {},
        "counts": {"nodes": nodes, "edges": int(len(src)), "files": kinds["file"],
                   "nodes_by_kind": kinds, "edges_by_type": by_type,
                   "depth_distribution": {str(d): c for d, c in enumerate(kinds.values())}}})
    (vdir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "CURRENT").write_text("v000001")
    info = {"format": FORMAT, "nodes": nodes, "seed": seed, "clusters": k,
            "ann_min_vectors": ann_min_vectors, "ann": bool(meta.get("ann")),
            "edges": int(len(src)), "nodes_by_kind": kinds, "template": str(template),
            "seconds": {"arrays_in_memory": round(t_arrays, 1), "save": round(t_save, 1),
                        "total": round(time.perf_counter() - t0, 1)},
            "bytes": sum(p.stat().st_size for p in (vdir / "query").rglob("*") if p.is_file())}
    (out / INFO).write_text(json.dumps(info, indent=2) + "\n")
    return info


def cached(out: Path, nodes: int, seed: int = 0, ann_min_vectors: int | None = None) -> dict | None:
    """What :func:`write` recorded for the index in ``out`` when it was written
    with these parameters and is complete; else None."""
    try:
        info = json.loads((out / INFO).read_text())
        complete = (out / "versions" / "v000001" / "query" / "arrays.json").exists()
    except (OSError, ValueError):
        return None
    same = (info.get("format"), info.get("nodes"), info.get("seed"),
            info.get("ann_min_vectors")) == (FORMAT, nodes, seed, ann_min_vectors)
    return info if same and complete else None


def query_vectors(vectors: np.ndarray, n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(rows, queries): ``n`` stored rows drawn at random and a unit query near
    each, its stored vector plus a Gaussian offset of length about ``QUERY_NOISE``."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(vectors), size=n, replace=False))
    q = np.asarray(vectors[rows], np.float32)
    q = q + np.float32(QUERY_NOISE / np.sqrt(q.shape[1])) * rng.standard_normal(q.shape,
                                                                                 dtype=np.float32)
    return rows, q / np.linalg.norm(q, axis=1, keepdims=True)


def query_texts(n: int, seed: int = 2) -> list[str]:
    """``n`` distinct short queries in the index's made-up words."""
    rng = np.random.default_rng(seed)
    return [f"{i} " + " ".join(WORDS[w] for w in rng.integers(0, len(WORDS), 6).tolist())
            for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--template", required=True, help="a published index (its manifest, probe)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ann-min-vectors", type=int, default=None,
                    help="write the approximate index from this many vectors "
                         "(default $STRATA_ANN_MIN_VECTORS)")
    args = ap.parse_args()
    info = write(Path(args.out), args.nodes, Path(args.template), args.seed, args.ann_min_vectors)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
