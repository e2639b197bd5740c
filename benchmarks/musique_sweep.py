"""The parameter sweep behind diffusion's entity-walk defaults, on MuSiQue-100.

One factor at a time around the defaults (a grid would be 300+ runs and an
invitation to fit the 100 questions): each row changes one parameter and
reports R@2/5/10. The defaults were set by reasoning first — HippoRAG's damping
0.5 and top-5 facts, a passage weight between HippoRAG 2's 0.05 and the facts'
~0.6 — and this table shows how much each choice matters; it is written to
``benchmarks/results/musique_sweep.md`` so the sweep is reported, not hidden.

Usage: ``python -m benchmarks.musique_sweep`` (after ``benchmarks.musique_recall``
has built the index in benchmarks/scratch/musique)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import SCRATCH, first_occurrence, machine, mean_pct, recall_at, write_result
from benchmarks.musique_recall import KS, gold_sets

SWEEP = [
    ("defaults (walk on)", {}),
    ("walk off (best-first diffusion only)", {"walk": "off"}),
    ("walk_fact_k = 0 (no fact seeds)", {"walk_fact_k": 0}),
    ("walk_fact_k = 3", {"walk_fact_k": 3}),
    ("walk_fact_k = 10", {"walk_fact_k": 10}),
    ("query_entity_weight = 0 (no query entity links)", {"query_entity_weight": 0.0}),
    ("query_entity_weight = 0.5", {"query_entity_weight": 0.5}),
    ("query_entity_weight = 2", {"query_entity_weight": 2.0}),
    ("walk_passage_weight = 0.05 (HippoRAG 2)", {"walk_passage_weight": 0.05}),
    ("walk_passage_weight = 1", {"walk_passage_weight": 1.0}),
    ("walk_damping = 0.3", {"walk_damping": 0.3}),
    ("walk_damping = 0.7", {"walk_damping": 0.7}),
    ("dense_lead = 0", {"dense_lead": 0}),
    ("dense_lead = 2", {"dense_lead": 2}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=str(SCRATCH / "musique" / "index"))
    args = ap.parse_args()
    from strata.retrieval import Index

    idx = Index.open(Path(args.index))
    path_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["path"].to_list()))
    questions, gold = gold_sets()
    rows = {}
    for name, params in SWEEP:
        p = {"walk": "on", **params}
        ranked = [first_occurrence(path_of.get(r.node_id) or None for r in
                                   idx.search(q, mode="diffusion", k=30, **p)) for q in questions]
        rows[name] = {f"R@{k}": mean_pct([recall_at(r, g, k) for r, g in zip(ranked, gold)])
                      for k in KS}
        print(name, rows[name], flush=True)
    lines = ["| diffusion variant | R@2 | R@5 | R@10 |", "|---|---|---|---|"]
    lines += [f"| {n} | {r['R@2']} | {r['R@5']} | {r['R@10']} |" for n, r in rows.items()]
    write_result("musique_sweep", {"machine": machine(), "sweep": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
