"""MuSiQue-100: retrieval recall and latency of every mode and baseline, and the
cost of building, rebuilding and editing, through the real pipeline.

Writes the 1,890 passages as one Markdown file each, builds the index with
``strata index --openie-import`` (the GPT-3.5 triples of ../shared/data) under
:mod:`benchmarks.measure` (wall time, peak RSS), rebuilds it with nothing
changed, edits one passage and rebuilds, restores it and rebuilds; then runs the
baselines (BM25 from bm25s, dense kNN, their RRF) and Strata's modes on the 100
questions in one warm process. Recall@k follows HippoRAG's protocol: gold = the
supporting passages; a result counts for the passage file it belongs to, by
first occurrence; Recall@k = |gold ∩ top-k| / |gold|, averaged, in percent.
Latency includes the query embedding.

Usage: ``python -m benchmarks.musique_recall [--reuse-build] [--modes ...]``
(``--reuse-build`` keeps an index already in the scratch folder and the build
figures of the last results file: for iterating on retrieval only).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from benchmarks.common import (BUILD_HEADER, DEFAULT, RESULTS, SCRATCH, build_stats_row,
                               build_with_cli, default_targets, latency, machine, mean_pct,
                               recall_at, run_systems, smoke, target, targets_md, write_result)
from benchmarks.musique_corpus import (MUSIQUE_DIR, OPENIE_FILE, passage_count, passage_file,
                                      write_corpus)

MODES = ("auto", "keyword", "hybrid", "hierarchical", "diffusion")
# the build without --openie-import: facts from the offline heuristic, as a user without an
# LLM gets them; the default mode decides from the index not to walk on them
OFFLINE_MODES = ("auto", "hybrid", "diffusion")
OFFLINE_PARAMS = {"diffusion": {"walk": "on"}}  # reported: what the walk does on heuristic facts
KS = (2, 5, 10)
EDITED = passage_file(7)
EDIT_TEXT = "\nThis sentence was added by the benchmark to measure an incremental rebuild.\n"


def gold_sets() -> tuple[list[str], list[set[str]]]:
    """The questions and their supporting passages; when only the first passages are
    written (:func:`benchmarks.musique_corpus.passage_count`), the questions whose
    supporting passages are all among them."""
    corpus = json.loads((MUSIQUE_DIR / "corpus.json").read_text())
    written = {passage_file(i) for i in range(len(corpus))[:passage_count()]}
    key = {(c["title"], c["text"]): passage_file(i) for i, c in enumerate(corpus)}
    questions, gold = [], []
    for q in json.loads((MUSIQUE_DIR / "questions.json").read_text()):
        g = {key[(p["title"], p["paragraph_text"])] for p in q["paragraphs"] if p["is_supporting"]}
        if g <= written:
            questions.append(q["question"])
            gold.append(g)
    return questions, gold


def builds(work: Path) -> dict:
    """First build, unchanged rebuild, one passage edited, and restored."""
    if work.exists():
        shutil.rmtree(work)
    docs, out = work / "docs", work / "index"
    write_corpus(docs)
    extra = ["--openie-import", str(OPENIE_FILE)]
    stats = {}
    print("building MuSiQue-100 (first build: embeds every node, entity and fact)...", flush=True)
    stats["first build"] = build_with_cli(docs, out, "musique", work, extra)
    stats["rebuild, nothing changed"] = build_with_cli(docs, out, "musique", work, extra)
    original = (docs / EDITED).read_text()
    (docs / EDITED).write_text(original + EDIT_TEXT)
    stats["rebuild, one passage edited"] = build_with_cli(docs, out, "musique", work, extra)
    (docs / EDITED).write_text(original)
    if not smoke():  # a smoke run has had this kind of rebuild just above
        stats["rebuild, edit reverted"] = build_with_cli(docs, out, "musique", work, extra)
    print("building MuSiQue-100 without the import (offline OpenIE)...", flush=True)
    stats["first build, offline OpenIE"] = build_with_cli(docs, work / "index_offline",
                                                          "musique_offline", work)
    for name, b in stats.items():
        print(f"  {name}: {b['wall_s']:.1f} s, {b['peak_rss_mb']:.0f} MB, "
              f"{b['embeddings_computed']} embeddings, {b['llm_calls']} LLM calls", flush=True)
    return stats


def evaluate(index_dir: Path, modes, mode_params: dict | None = None) -> dict:
    from strata.retrieval import Index

    idx = Index.open(index_dir)
    path_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["path"].to_list()))
    questions, gold = gold_sets()
    runs = run_systems(idx, questions, list(modes), k=30, to_unit=lambda n: path_of.get(n) or None,
                       mode_params=mode_params)
    report = {}
    for name, r in runs.items():
        row = {f"R@{k}": mean_pct([recall_at(rk, g, k) for rk, g in zip(r["ranked"], gold)])
               for k in KS}
        # the first passage is a supporting one (each passage is its own file)
        row["file Hit@1"] = mean_pct([float(bool(rk) and rk[0] in g)
                                      for rk, g in zip(r["ranked"], gold)])
        row.update(latency(r["ms"]))
        if r.get("stages_ms"):
            row["max_diffusion_stage_ms"] = round(max(t.get("diffusion", 0.0) + t.get("walk", 0.0)
                                                      for t in r["stages_ms"]), 1)
        report[name] = row
    return report


def targets(retrieval: dict, build: dict, offline: dict | None = None) -> list[dict]:
    d, dense = retrieval.get("strata diffusion", {}), retrieval.get("dense kNN", {})
    h = retrieval.get("strata hierarchical", {})
    a = retrieval.get(DEFAULT, {})
    out = [target("default R@5 ≥ 72 (imported triples)", a.get("R@5"), a.get("R@5", 0) >= 72),
           target("default R@2 ≥ 53 (imported triples)", a.get("R@2"), a.get("R@2", 0) >= 53)]
    out += default_targets(retrieval, ("file Hit@1", "R@2", "R@5", "R@10"))
    if offline:
        ao, do = offline.get(DEFAULT, {}), offline.get("dense kNN", {})
        out.append(target("offline OpenIE: default R@5 ≥ dense R@5 + 2",
                          f"{ao.get('R@5')} vs {do.get('R@5')}",
                          ao.get("R@5", 0) >= do.get("R@5", 101) + 2))
        out += [dict(t, target="offline OpenIE: " + t["target"])
                for t in default_targets(offline, ("R@2", "R@5", "R@10"))]
    out += [
        target("diffusion R@5 ≥ 70", d.get("R@5"), d.get("R@5", 0) >= 70),
        target("diffusion R@2 ≥ 53", d.get("R@2"), d.get("R@2", 0) >= 53),
        target("diffusion R@5 ≥ dense R@5 − 1", f"{d.get('R@5')} vs {dense.get('R@5')}",
               d.get("R@5", 0) >= dense.get("R@5", 0) - 1),
        target("hierarchical p50 ≤ 15 ms", h.get("p50_ms"), h.get("p50_ms", 1e9) <= 15),
        target("diffusion p50 ≤ 50 ms", d.get("p50_ms"), d.get("p50_ms", 1e9) <= 50),
        target("diffusion p95 ≤ 120 ms", d.get("p95_ms"), d.get("p95_ms", 1e9) <= 120),
        target("diffusion stage ≤ time budget (2 s) + 20 ms", d.get("max_diffusion_stage_ms"),
               d.get("max_diffusion_stage_ms", 1e9) <= 2020)]
    if build:
        first, same = build["first build"], build["rebuild, nothing changed"]
        edit = build["rebuild, one passage edited"]
        speedup = first["wall_s"] / max(same["wall_s"], 1e-9)
        out += [
            target("unchanged rebuild ≥ 20× faster", f"{speedup:.0f}×", speedup >= 20),
            target("unchanged rebuild: 0 embeddings, 0 LLM calls",
                   f"{same['embeddings_computed']}, {same['llm_calls']}",
                   same["embeddings_computed"] == 0 and same["llm_calls"] == 0),
            target("one passage edited: 1 file parsed", edit["files_parsed"],
                   edit["files_parsed"] == 1),
            target("peak RSS of the build ≤ 3 GB", f"{first['peak_rss_mb']:.0f} MB",
                   first["peak_rss_mb"] <= 3072)]
    return out


def _recall_rows(retrieval: dict) -> list[str]:
    lines = ["| system | file Hit@1 | R@2 | R@5 | R@10 | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|"]
    for name, r in retrieval.items():
        lines.append(f"| {name} | {r.get('file Hit@1', '–')} | {r['R@2']} | {r['R@5']} | "
                     f"{r['R@10']} | {r['p50_ms']} | {r['p95_ms']} |")
    return lines


def markdown(report: dict) -> str:
    lines = _recall_rows(report["retrieval"])
    if report.get("retrieval_offline"):
        lines += ["", "Without the import (facts from the offline heuristic; `strata diffusion` "
                  "here forces the walk on, to show what it does on heuristic facts):", ""]
        lines += _recall_rows(report["retrieval_offline"])
    if report.get("build"):
        lines += ["", BUILD_HEADER] + [build_stats_row(n, b) for n, b in report["build"].items()]
    lines += targets_md(report["targets"])
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=str(SCRATCH / "musique"))
    ap.add_argument("--reuse-build", action="store_true",
                    help="keep the index in --work and the last build figures")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    work = Path(args.work).resolve()
    previous = RESULTS / "musique.json"
    if args.reuse_build and (work / "index" / "CURRENT").exists():
        old = json.loads(previous.read_text()) if previous.exists() else {}
        build, stages = old.get("build", {}), old.get("build_stages", {})
    else:
        build = builds(work)
        stages = {n: b.pop("stages", {}) for n, b in build.items()}
    retrieval = evaluate(work / "index", args.modes.split(","))
    offline = None
    if (work / "index_offline" / "CURRENT").exists():
        offline = evaluate(work / "index_offline", OFFLINE_MODES, OFFLINE_PARAMS)
    report = {"benchmark": "MuSiQue-100 (1,890 passages, 100 questions; GPT-3.5 OpenIE import; "
                           "all-MiniLM-L6-v2)", "machine": machine(), "retrieval": retrieval,
              "retrieval_offline": offline, "build": build, "build_stages": stages}
    report["targets"] = targets(retrieval, report["build"], offline)
    write_result("musique", report, markdown(report))


if __name__ == "__main__":
    main()
