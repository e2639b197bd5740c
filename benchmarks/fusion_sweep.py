"""The one fusion weight, swept on the three dev sets at once.

The default mode fuses dense and BM25 evidence as
``sigmoid(alpha · z(dense) + (1 − alpha) · z(bm25))`` (:mod:`retrieval.fusion`).
This sweep runs the default mode, with the entity walk off so the fusion alone
is measured, for several ``alpha`` on the OpenHarmony dev set, the stdlib code
questions and MuSiQue-100 (imported-triples build), and reports the headline
metric of each. ``alpha = 1`` is dense alone. Reported so the choice of 0.6 is
visible; nothing here is tuned per question.

Reuses the indexes of :mod:`benchmarks.openharmony_dev`,
:mod:`benchmarks.stdlib_code` and :mod:`benchmarks.musique_recall`.

Usage: ``python -m benchmarks.fusion_sweep``
"""

from __future__ import annotations

from benchmarks.common import SCRATCH, first_occurrence, machine, mean_pct, recall_at, write_result
from strata.retrieval.fusion import ALPHA

ALPHAS = (0.4, 0.5, 0.6, 0.7, 0.8, 1.0)


def _oh():
    from benchmarks.openharmony_dev import dev_questions, gold_sections, section_of
    from strata.retrieval import Index

    idx = Index.open(SCRATCH / "openharmony" / "index")
    qs = dev_questions()
    gold, sec = gold_sections(idx, qs), section_of(idx)
    path_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["path"].to_list()))

    def score(ranked):
        files = [first_occurrence(path_of.get(n) for n in r) for r in ranked]
        secs = [first_occurrence(sec(n) for n in r) for r in ranked]
        return {"OH file Hit@1": mean_pct([recall_at(f, {q["file"]}, 1) for f, q in zip(files, qs)]),
                "OH section R@5": mean_pct([recall_at(s, {g}, 5) for s, g in zip(secs, gold)])}
    return idx, [q["question"] for q in qs], score


def _stdlib():
    from benchmarks.hyprag_peer import load_questions
    from strata.retrieval import Index

    idx = Index.open(SCRATCH / "stdlib_subset_index")
    qs = load_questions()
    np_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["node_path"].to_list()))

    def score(ranked):
        paths = [[np_of[n] for n in r] for r in ranked]
        return {f"stdlib R@{k}": mean_pct([recall_at(p, set(q["gold"]), k)
                                           for p, q in zip(paths, qs)]) for k in (10, 20)}
    return idx, [q["question"] for q in qs], score


def _musique():
    from benchmarks.musique_recall import gold_sets
    from strata.retrieval import Index

    idx = Index.open(SCRATCH / "musique" / "index")
    qs, gold = gold_sets()
    path_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["path"].to_list()))

    def score(ranked):
        units = [first_occurrence(path_of.get(n) for n in r) for r in ranked]
        return {f"MuSiQue R@{k}": mean_pct([recall_at(u, g, k) for u, g in zip(units, gold)])
                for k in (2, 5)}
    return idx, qs, score


def main() -> None:
    rows = {a: {} for a in ALPHAS}
    for load in (_oh, _stdlib, _musique):
        idx, questions, score = load()
        for a in ALPHAS:
            ranked = [[r.node_id for r in idx.search(q, k=20, alpha=a, walk="off")]
                      for q in questions]
            rows[a].update(score(ranked))
        print(f"  {load.__name__.strip('_')}: done", flush=True)
    cols = list(rows[ALPHAS[0]])
    lines = ["| alpha (dense weight) | " + " | ".join(cols) + " |",
             "|---|" + "---|" * len(cols)]
    for a, r in rows.items():
        label = f"{a}" + (" (dense only)" if a == 1.0 else " (default)" if a == ALPHA else "")
        lines.append(f"| {label} | " + " | ".join(str(r[c]) for c in cols) + " |")
    write_result("fusion_sweep", {"machine": machine(), "rows": {str(a): r for a, r in rows.items()}},
                 "\n".join(lines))


if __name__ == "__main__":
    main()
