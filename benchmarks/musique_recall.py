"""MuSiQue-100 retrieval recall and latency, per mode, through the real pipeline.

Writes the 1,890 passages as one Markdown file each, builds the index with
`strata index --openie-import` (the GPT-3.5 triples of ../shared/data), then
runs every mode on the 100 questions in one process and reports Recall@2/5/10
(HippoRAG's protocol: gold = supporting passages; a node counts for the
passage file it belongs to, by first occurrence) and warm p50/p95 latency with
the query embedding included.

Usage: python -m benchmarks.musique_recall [--work DIR] [--index DIR] [--modes flat,diffusion]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.musique_corpus import MUSIQUE_DIR, OPENIE_FILE, passage_file, write_corpus

MODES = ("flat", "keyword", "hybrid", "hierarchical", "diffusion")
KS = (2, 5, 10)
RESULTS = Path(__file__).resolve().parent / "results"


def build(work: Path) -> Path:
    docs, out = work / "docs", work / "index"
    if not (out / "CURRENT").exists():
        write_corpus(docs)
        env = {**os.environ, "DAGSTER_HOME": str(work / "dagster_home"),
               "STRATA_CORPORA": str(work / "corpora.yaml")}
        (work / "dagster_home").mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pipelines.cli", "index", str(docs), "--corpus",
                        "musique", "--out", str(out), "--openie-import", str(OPENIE_FILE), "-q"],
                       env=env, check=True)
        print(f"built in {time.perf_counter() - t0:.0f}s", flush=True)
    return out


def gold_sets() -> tuple[list[str], list[set[str]]]:
    corpus = json.loads((MUSIQUE_DIR / "corpus.json").read_text())
    key = {(c["title"], c["text"]): passage_file(i) for i, c in enumerate(corpus)}
    questions = json.loads((MUSIQUE_DIR / "questions.json").read_text())
    return ([q["question"] for q in questions],
            [{key[(p["title"], p["paragraph_text"])] for p in q["paragraphs"] if p["is_supporting"]}
             for q in questions])


def evaluate(index_dir: Path, modes) -> dict:
    from retrieval import Index

    idx = Index.open(index_dir)
    questions, gold = gold_sets()
    idx.search(questions[0], mode="diffusion")  # warm: tables, graph, vectors, model
    report = {}
    for mode in modes:
        idx._query_cache.clear()  # include the query embedding in every timing
        recall = {k: [] for k in KS}
        times = []
        for q, g in zip(questions, gold):
            t0 = time.perf_counter()
            res = idx.search(q, mode=mode, k=30)
            times.append((time.perf_counter() - t0) * 1000)
            ranked: list[str] = []
            for r in res:
                if r.path and r.path not in ranked:
                    ranked.append(r.path)
            for k in KS:
                recall[k].append(len(g & set(ranked[:k])) / len(g))
        times.sort()
        report[mode] = {f"R@{k}": round(100 * statistics.mean(v), 1) for k, v in recall.items()}
        report[mode].update(p50_ms=round(statistics.median(times), 1),
                            p95_ms=round(times[int(0.95 * len(times)) - 1], 1))
        print(mode, report[mode], flush=True)
    return report


def markdown(report: dict) -> str:
    lines = ["| mode | R@2 | R@5 | R@10 | p50 ms | p95 ms |", "|---|---|---|---|---|---|"]
    for mode, r in report.items():
        lines.append(f"| {mode} | {r['R@2']} | {r['R@5']} | {r['R@10']} | {r['p50_ms']} | {r['p95_ms']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="benchmarks/scratch/musique")
    ap.add_argument("--index", default=None, help="use an existing index instead of building")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    index_dir = Path(args.index) if args.index else build(Path(args.work).resolve())
    report = evaluate(index_dir, args.modes.split(","))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "musique.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (RESULTS / "musique.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
