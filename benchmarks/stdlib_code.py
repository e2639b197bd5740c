"""Code questions over a subset of the standard library: the default mode against
the flat baselines, on the same units and encoder.

Builds (or reuses) the index of :mod:`benchmarks.hyprag_peer` — 85 Python files
of CPython's standard library — and answers the 45 hand-labeled questions of
``benchmarks/data/stdlib_code_questions.yaml`` (gold = the 1-3 most specific
definitions, as dotted node paths) with BM25 (bm25s), dense kNN, their RRF and
Strata's modes. R@k = |gold ∩ top-k node paths| / |gold|, in percent.

Usage: ``python -m benchmarks.stdlib_code [--work DIR]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import (DEFAULT, RESULTS, SCRATCH, default_targets, latency, machine,
                               mean_pct, recall_at, run_systems, target, targets_md,
                               write_result)

MODES = ("auto", "hybrid", "hierarchical", "diffusion")
KS = (5, 10, 20)


def evaluate(index_dir: Path) -> dict:
    from benchmarks.hyprag_peer import load_questions
    from strata.retrieval import Index

    idx = Index.open(index_dir)
    questions = load_questions()
    n = idx.nodes()
    path_of = dict(zip(n["node_id"].to_list(), n["node_path"].to_list()))
    file_of = dict(zip(n["node_path"].to_list(), n["path"].to_list()))
    runs = run_systems(idx, [q["question"] for q in questions], list(MODES), k=max(KS),
                       to_unit=lambda nid: path_of.get(nid))
    report = {}
    for name, r in runs.items():
        row = {f"R@{k}": mean_pct([recall_at(rk, set(q["gold"]), k)
                                   for rk, q in zip(r["ranked"], questions)]) for k in KS}
        # the first result's file is a file the answer is in
        row["file Hit@1"] = mean_pct([float(bool(rk) and file_of.get(rk[0]) in
                                            {file_of.get(g) for g in q["gold"]})
                                      for rk, q in zip(r["ranked"], questions)])
        # the questions whose answer spans two or more files
        multi = [(rk, q) for rk, q in zip(r["ranked"], questions)
                 if len({file_of.get(g) for g in q["gold"]}) > 1]
        row["R@5, gold in 2+ files"] = mean_pct([recall_at(rk, set(q["gold"]), 5)
                                                 for rk, q in multi])
        row.update(latency(r["ms"]))
        report[name] = row
    return report


def targets(retrieval: dict) -> list[dict]:
    d = retrieval.get(DEFAULT, {})
    return [target("default R@10 ≥ 85", d.get("R@10"), d.get("R@10", 0) >= 85),
            target("default R@20 ≥ 93", d.get("R@20"), d.get("R@20", 0) >= 93)] + \
        default_targets(retrieval, ("file Hit@1",) + tuple(f"R@{k}" for k in KS))


def markdown(report: dict) -> str:
    cols = ["file Hit@1"] + [f"R@{k}" for k in KS] + ["R@5, gold in 2+ files"]
    lines = ["| system | " + " | ".join(cols) + " | p50 ms | p95 ms |",
             "|---|" + "---|" * (len(cols) + 2)]
    for name, r in report["retrieval"].items():
        lines.append(f"| {name} | " + " | ".join(str(r[c]) for c in cols)
                     + f" | {r['p50_ms']} | {r['p95_ms']} |")
    peer = report.get("hyprag_reference")
    if peer:
        lines += ["", "For reference, HypRAG 0.7.2 expand+rescore (seeds=5) on the same units, "
                  f"from the peer benchmark below: R@10 {peer['R@10']}, R@20 {peer['R@20']}."]
    lines += targets_md(report["targets"])
    return "\n".join(lines)


def main() -> None:
    from benchmarks.hyprag_peer import build

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=str(SCRATCH))
    args = ap.parse_args()
    index_dir, _ = build(Path(args.work).resolve())
    retrieval = evaluate(index_dir)
    peer = None
    hyp = RESULTS / "hyprag.json"
    if hyp.exists():
        systems = json.loads(hyp.read_text()).get("evaluation", {}).get("systems", {})
        row = systems.get("hyprag expand+rescore, seeds=5", {}).get("quality")
        if row:
            peer = {k: round(100 * row[k], 1) for k in ("R@10", "R@20")}
    report = {"benchmark": "stdlib code questions (45 over 85 files of CPython 3.11)",
              "machine": machine(), "retrieval": retrieval, "hyprag_reference": peer,
              "targets": targets(retrieval)}
    write_result("stdlib_code", report, markdown(report))


if __name__ == "__main__":
    main()
