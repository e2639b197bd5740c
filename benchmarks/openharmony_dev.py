"""OpenHarmony dev set: does the hierarchy help a developer's question land on
the right page and the right section?

Builds the 51 OpenHarmony quick-start pages (../shared/data) through the CLI,
then runs the baselines and every mode on the labeled questions of
``benchmarks/data/openharmony_dev.yaml`` (written from the pages alone, before
any retrieval ran) and reports, per system:

* file Hit@k — the gold page among the first k distinct pages of the results;
* section Recall@k — the gold section among the first k distinct sections,
  where a result counts for the section that holds it (a code block or table
  for its section; a section for itself; a page-level result for none). With
  one gold section per question, Recall@k is the hit rate.

This set is the one to tune on (the MuSiQue questions are reported, not tuned).

Usage: ``python -m benchmarks.openharmony_dev [--reuse-build]``
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import yaml

from benchmarks.common import (BUILD_HEADER, DEFAULT, RESULTS, SCRATCH, build_stats_row,
                               build_with_cli, copy_once, default_targets, latency, machine,
                               mean_pct, recall_at, run_systems, size, smoke, target, targets_md,
                               write_result)

OH_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "openharmony_quickstart"
DEV_SET = Path(__file__).resolve().parent / "data" / "openharmony_dev.yaml"
MODES = ("auto", "hybrid", "hierarchical", "diffusion", "routed")
FILE_KS = (1, 3, 5)
SECTION_KS = (1, 3, 5, 10)
SMOKE_QUESTIONS = 4


def dev_questions() -> list[dict]:
    """The labeled questions (the first few in a smoke run)."""
    return yaml.safe_load(DEV_SET.read_text())[:size(None, SMOKE_QUESTIONS)]


def oh_docs() -> Path:
    """The pages to build: all of them, or in a smoke run the pages of
    :func:`dev_questions`, copied once into the scratch folder."""
    if not smoke():
        return OH_DIR
    names = sorted({q["file"] for q in dev_questions()})
    return copy_once(OH_DIR, names, SCRATCH / "openharmony_docs")


def norm_heading(text: str) -> str:
    """Heading text as written in Markdown vs as parsed: markup, escapes and
    tags dropped, whitespace collapsed, case folded."""
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[\\*`_]", "", text)
    return " ".join(text.split()).lower()


def gold_sections(idx, questions: list[dict]) -> list[str]:
    """The section node id of each question's (file, heading); fails loudly when
    a label does not resolve to exactly one section."""
    import polars as pl

    sections = idx.nodes().filter(pl.col("kind") == "section")
    by_key: dict[tuple[str, str], list[str]] = {}
    for nid, path, title in sections.select("node_id", "path", "title").iter_rows():
        by_key.setdefault((path, norm_heading(title or "")), []).append(nid)
    out, bad = [], []
    for q in questions:
        ids = by_key.get((q["file"], norm_heading(q["heading"])), [])
        if len(ids) != 1:
            bad.append(f"{q['id']}: {q['file']} / {q['heading']!r} -> {len(ids)} sections")
        out.append(ids[0] if ids else "")
    if bad:
        raise SystemExit("dev-set labels that do not resolve:\n  " + "\n  ".join(bad))
    return out


def section_of(idx):
    """node id -> the id of the section holding it (itself for a section)."""
    import polars as pl

    nodes = idx.nodes().select("node_id", "kind", "parent_id")
    kind = dict(zip(nodes["node_id"].to_list(), nodes["kind"].to_list()))
    parent = dict(zip(nodes["node_id"].to_list(), nodes["parent_id"].to_list()))
    memo: dict[str, str | None] = {}

    def find(nid: str) -> str | None:
        if nid in memo:
            return memo[nid]
        cur, seen = nid, 0
        while cur is not None and kind.get(cur) != "section" and seen < 64:
            cur, seen = parent.get(cur), seen + 1
        memo[nid] = cur if cur is not None and kind.get(cur) == "section" else None
        return memo[nid]

    del pl
    return find


def builds(work: Path) -> dict:
    if work.exists():
        shutil.rmtree(work)
    out = work / "index"
    print("building the OpenHarmony pages...", flush=True)
    docs = oh_docs()
    stats = {"first build": build_with_cli(docs, out, "openharmony", work),
             "rebuild, nothing changed": build_with_cli(docs, out, "openharmony", work)}
    for name, b in stats.items():
        print(f"  {name}: {b['wall_s']:.1f} s, {b['embeddings_computed']} embeddings", flush=True)
    return stats


def evaluate(index_dir: Path, questions: list[dict], modes) -> dict:
    from strata.retrieval import Index

    idx = Index.open(index_dir)
    gold = gold_sections(idx, questions)
    path_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["path"].to_list()))
    sec = section_of(idx)
    texts = [q["question"] for q in questions]
    runs = run_systems(idx, texts, list(modes), k=20, to_unit=lambda n: n)
    report = {}
    for name, r in runs.items():
        files = [[f for f in dict.fromkeys(path_of.get(n) for n in rk) if f] for rk in r["ranked"]]
        secs = [[s for s in dict.fromkeys(sec(n) for n in rk) if s] for rk in r["ranked"]]
        row = {f"file Hit@{k}": mean_pct([recall_at(f, {q["file"]}, k)
                                          for f, q in zip(files, questions)]) for k in FILE_KS}
        row.update({f"section R@{k}": mean_pct([recall_at(s, {g}, k) for s, g in zip(secs, gold)])
                    for k in SECTION_KS})
        # coverage: how many distinct places the first five results are
        row["sections in top 5"] = round(sum(len({sec(n) or n for n in rk[:5]})
                                             for rk in r["ranked"]) / len(questions), 2)
        row["files in top 5"] = round(sum(len({path_of.get(n) for n in rk[:5]})
                                          for rk in r["ranked"]) / len(questions), 2)
        row.update(latency(r["ms"]))
        report[name] = row
    return report


def targets(retrieval: dict) -> list[dict]:
    d, dense = retrieval.get(DEFAULT, {}), retrieval.get("dense kNN", {})
    routed = retrieval.get("strata routed", {})
    out = [target("default file Hit@1 ≥ 92", d.get("file Hit@1"), d.get("file Hit@1", 0) >= 92),
           target("default section R@5 ≥ 92", d.get("section R@5"),
                  d.get("section R@5", 0) >= 92)]
    out.append(target("default: distinct sections in the top 5 ≥ 4.0",
                      d.get("sections in top 5"), d.get("sections in top 5", 0) >= 4.0))
    out += default_targets(retrieval, ("file Hit@1", "file Hit@3", "section R@1", "section R@5",
                                       "section R@10"))
    if routed:
        out.append(target("routed file Hit@1 ≥ dense kNN file Hit@1",
                          f"{routed.get('file Hit@1')} vs {dense.get('file Hit@1')}",
                          routed.get("file Hit@1", 0) >= dense.get("file Hit@1", 101)))
    return out


def markdown(report: dict) -> str:
    cols = [f"file Hit@{k}" for k in FILE_KS] + [f"section R@{k}" for k in SECTION_KS] + \
        ["sections in top 5", "files in top 5"]
    lines = ["| system | " + " | ".join(cols) + " | p50 ms | p95 ms |",
             "|---|" + "---|" * (len(cols) + 2)]
    for name, r in report["retrieval"].items():
        lines.append(f"| {name} | " + " | ".join(str(r[c]) for c in cols)
                     + f" | {r['p50_ms']} | {r['p95_ms']} |")
    if report.get("build"):
        lines += ["", BUILD_HEADER] + [build_stats_row(n, b) for n, b in report["build"].items()]
    lines += targets_md(report.get("targets", []))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=str(SCRATCH / "openharmony"))
    ap.add_argument("--reuse-build", action="store_true")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    if not OH_DIR.is_dir():
        raise SystemExit(f"{OH_DIR} not found: this benchmark needs ../shared/data")
    questions = dev_questions()
    work = Path(args.work).resolve()
    previous = RESULTS / "openharmony.json"
    if args.reuse_build and (work / "index" / "CURRENT").exists():
        build = json.loads(previous.read_text()).get("build", {}) if previous.exists() else {}
    else:
        build = {n: {k: v for k, v in b.items() if k != "stages"} for n, b in builds(work).items()}
    retrieval = evaluate(work / "index", questions, args.modes.split(","))
    report = {"benchmark": f"OpenHarmony dev set ({len(questions)} questions over "
                           f"{len({q['file'] for q in questions})} of the 51 pages)",
              "machine": machine(), "retrieval": retrieval, "build": build,
              "targets": targets(retrieval)}
    write_result("openharmony", report, markdown(report))


if __name__ == "__main__":
    main()
