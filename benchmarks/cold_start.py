"""Cold start: what a fresh querying process costs, from the interpreter's
start to its first answer, and a warm one's query latency, on indexes from 528
nodes to a million.

A query is often a process of its own (a shell command, an agent's tool call,
a server that was just restarted), so the figures that matter are those of a
fresh process. Each is the median of several fresh processes, run in
interleaved rounds (one of each figure per round) so that a burst of other
work on the shared cores falls on all of them alike; the 1-minute load
average at the start of each run is reported beside the figures. The page
cache is warm: one run of each command, not counted, comes first. Figures:

* the floor, ``python -c "import numpy"``, and ``import strata.retrieval``;
* ``strata search -k 5`` on the sample index, the OpenHarmony pages and
  MuSiQue (wall time and peak RSS from :mod:`benchmarks.measure`), and the
  sample's over the floor (the median of the rounds' ratios);
* one fresh process per index: the heavy modules (torch, transformers,
  sentence-transformers, lancedb, dagster) in ``sys.modules`` after a first
  ``Index.search``, and that process's peak RSS;
* ``strata mcp`` over stdio: from the process's start to its answer to an MCP
  ``initialize`` request; ``strata serve``: to the first 200 of ``/health``;
* warm query latency in one process (100 queries after a warm-up, query
  embedding included): flat and auto on MuSiQue and OpenHarmony;
* a synthetic index of a million nodes written without a build
  (:mod:`benchmarks.synthetic_index`): opening it, the first flat query, warm
  flat latency, peak RSS, and recall@10 of its approximate dense search
  against an exact scan of the same vectors.

Usage: ``python -m benchmarks.cold_start [--reuse-build] [--quick]``
(``--reuse-build`` keeps indexes already in the scratch folder, this
benchmark's or those of ``service_load``, ``musique_recall`` and
``openharmony_dev``, as a smoke run always does;
``--quick`` checks the code in a minute: the sample index, two rounds, a
20,000-node synthetic index with its approximate index forced; its results
go to the scratch folder, not to ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.service_load import stop_server
from benchmarks.common import (REPO, SCRATCH, build_with_cli, latency, machine, sample_docs, size,
                               smoke, target, targets_md, write_result)

REPS = size(5, 1)
WARM_QUERIES = size(100, 5)
HEAVY = ("torch", "transformers", "sentence_transformers", "lancedb", "dagster")
# not targets, listed so a reader sees what a query does import
NOTED = ("onnxruntime", "tokenizers", "faiss", "pyarrow", "polars", "scipy", "bm25s", "pydantic")
SAMPLE_QUESTION = "how do I correct pressure readings for barometric drift?"
SYNTHETIC_NODES = size(1_000_000, 2000)
QUICK_NODES, QUICK_ANN_MIN = size(20_000, 2000), 1000
RECALL_QUERIES = size(100, 5)

# targets
MCP_INIT_S, SERVE_HEALTH_S = 1.0, 2.0
SEARCH_RATIO = 5.0  # a cold `strata search` on the sample, in times `python -c "import numpy"`
MUSIQUE_RSS_MB = 250
MUSIQUE_FLAT_P50_MS, OH_AUTO_P50_MS = 6.0, 12.0
SYN_OPEN_S, SYN_FIRST_S, SYN_WARM_MS, SYN_RSS_MB, SYN_RECALL = 0.5, 2.0, 50.0, 1536, 0.95


def load() -> float:
    return round(os.getloadavg()[0], 2)


def child_env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "STRATA_LLM_BACKEND": "offline"}


def strata_cmd() -> list[str]:
    """The ``strata`` console script of this interpreter, as a user runs it."""
    exe = Path(sys.executable).with_name("strata")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "strata.pipelines.cli"]


# --------------------------------------------------------------------------- indexes

def shown(path: Path) -> str:
    """``path`` as the report shows it: relative to the repository when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def usable(index: Path) -> bool:
    """A published index of this Strata's format with its query arrays."""
    from strata.core.storage.layout import IndexLayout, read_manifest
    from strata.core.query_arrays import present
    from strata.core.config.schema import FORMAT_VERSION

    try:
        vdir = IndexLayout(index).resolve()
        return present(vdir) and read_manifest(vdir).get("format_version") == FORMAT_VERSION
    except Exception:  # noqa: BLE001 - missing, damaged, an older format: build it again
        return False


def ensure_index(name: str, docs: Path, reuse: list[Path], extra: list[str] = (),
                 write_docs=None) -> tuple[Path, dict]:
    """An index of ``docs``: the first usable one of ``reuse`` (``--reuse-build``),
    else a fresh build into ``SCRATCH/cold_start/name`` through the CLI."""
    for candidate in reuse:
        if usable(candidate):
            print(f"{name}: reusing {candidate}", flush=True)
            return candidate, {"reused": shown(candidate)}
    work = SCRATCH / "cold_start" / name
    if write_docs is not None:
        docs = work / "docs"
        if not docs.exists():
            write_docs(docs)
    index = work / "index"
    if index.exists():
        import shutil

        shutil.rmtree(index)
    print(f"{name}: building {docs} ...", flush=True)
    b = build_with_cli(docs, index, name, work, list(extra))
    b.pop("stages", None)
    print(f"  {b['wall_s']:.1f} s, {b['peak_rss_mb']:.0f} MB", flush=True)
    return index, {"built": b}


def synthetic(nodes: int, template: Path, ann_min_vectors: int | None) -> tuple[Path, dict]:
    """The synthetic index of ``nodes`` nodes, written once into the scratch folder."""
    from benchmarks.synthetic_index import cached

    suffix = f"_ann{ann_min_vectors}" if ann_min_vectors is not None else ""
    out = SCRATCH / "cold_start" / f"synthetic_{nodes}{suffix}"
    info = cached(out, nodes, ann_min_vectors=ann_min_vectors)
    if info is not None:
        print(f"synthetic index of {nodes:,} nodes: reusing {out} (written in "
              f"{info['seconds']['total']} s)", flush=True)
        return out, {**info, "reused": True}
    print(f"synthetic index of {nodes:,} nodes: writing {out} ...", flush=True)
    cmd = [sys.executable, "-m", "benchmarks.measure", "--", sys.executable, "-m",
           "benchmarks.synthetic_index", str(out), "--nodes", str(nodes), "--template",
           str(template)]
    if ann_min_vectors is not None:
        cmd += ["--ann-min-vectors", str(ann_min_vectors)]
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"writing the synthetic index failed:\n{proc.stderr[-4000:]}")
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    info = {**json.loads((out / "synthetic.json").read_text()), "reused": False,
            "writer_wall_s": measured["wall_s"], "writer_peak_rss_mb": measured["peak_rss_mb"]}
    print(f"  written in {measured['wall_s']:.1f} s ({info['seconds']}), peak RSS "
          f"{measured['peak_rss_mb']:.0f} MB, {info['bytes'] / 2**30:.2f} GiB", flush=True)
    return out, info


# --------------------------------------------------------------------------- fresh processes

def run_plain(cmd: list[str]) -> dict:
    """Wall time of ``cmd`` timed here (for the imports: millisecond resolution)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{proc.stderr[-3000:]}")
    return {"wall_s": round(wall, 3)}


def run_measured(cmd: list[str]) -> dict:
    """Wall time and peak RSS of ``cmd`` under :mod:`benchmarks.measure`."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks.measure", "--", *cmd], cwd=REPO,
                          env=child_env(), capture_output=True, text=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    if proc.returncode != 0 or out.get("returncode"):
        raise RuntimeError(f"{cmd} failed:\n{proc.stderr[-3000:]}")
    return {"wall_s": out["wall_s"], "peak_rss_mb": out["peak_rss_mb"]}


def mcp_initialize(index: Path, timeout: float = 120.0) -> dict:
    """``strata mcp --index`` over stdio: seconds from starting the process to
    its answer to ``initialize`` (JSON-RPC, one message a line)."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "benchmarks.cold_start", "version": "1"}}}
    t0 = time.perf_counter()
    proc = subprocess.Popen([*strata_cmd(), "mcp", "--index", str(index)], cwd=REPO,
                            env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        while True:
            left = timeout - (time.perf_counter() - t0)
            if left <= 0 or not sel.select(left):
                raise RuntimeError("strata mcp did not answer initialize")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"strata mcp exited ({proc.wait()}) before answering")
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("id") == 1:
                    wall = time.perf_counter() - t0
                    if "result" not in msg:
                        raise RuntimeError(f"initialize failed: {msg}")
                    return {"wall_s": round(wall, 3),
                            "server": msg["result"].get("serverInfo", {}).get("name")}
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_health(index: Path, timeout: float = 120.0) -> dict:
    """``strata serve --index``: seconds from starting the process to the first
    200 answer of ``GET /health`` (polled every 5 ms)."""
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([*strata_cmd(), "serve", "--index", str(index), "--port", str(port),
                             "-q"], cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"strata serve exited ({proc.returncode}) before /health")
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError("strata serve did not answer /health")
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return {"wall_s": round(time.perf_counter() - t0, 3)}
            except OSError:
                pass
            finally:
                conn.close()
            time.sleep(0.005)
    finally:
        stop_server(proc)


def run_child(*args: str) -> dict:
    """``python -m benchmarks.cold_start --child ...`` in a fresh process; its
    last line of output, JSON."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks.cold_start", "--child", *args],
                          cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- children

def _peak_rss_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _rss_split() -> dict:
    """Resident memory now, split into anonymous and mapped-file pages (Linux):
    pages of a memory-mapped file count in RSS once touched, and a kernel that
    caches files in large folios maps a whole folio for one row read."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in lines if ln.startswith("Rss")}
    return {"rss_anon_mb": round(kb.get("RssAnon", 0) / 1024),
            "rss_file_mb": round(kb.get("RssFile", 0) / 1024)}


def child_modules(index: str, question: str) -> dict:
    """A fresh process: open, one search in the default mode, then what it imported."""
    t0 = time.perf_counter()
    from strata.retrieval import Index

    res = Index.open(index).search(question, k=5)
    wall = time.perf_counter() - t0
    top = {m.split(".")[0] for m in sys.modules}
    return {"heavy": [m for m in HEAVY if m in top], "noted": [m for m in NOTED if m in top],
            "results": len(res), "import_open_first_query_s": round(wall, 3),
            "peak_rss_mb": _peak_rss_mb(), **_rss_split()}


def child_warm(index: str, questions_file: str, modes: str) -> dict:
    """One process: per mode, a warm-up, then 100 queries, each embedded anew."""
    from strata.retrieval import Index

    questions = json.loads(Path(questions_file).read_text())
    idx = Index.open(index)
    out = {}
    for mode in modes.split(","):
        for q in questions[:5]:
            idx.search(q, mode=mode, k=10)
        ms, stages = [], {}
        for i in range(WARM_QUERIES):
            q = questions[i % len(questions)]
            idx._query_cache.clear()  # the query embedding is part of every timing
            t0 = time.perf_counter()
            res = idx.search(q, mode=mode, k=10)
            ms.append((time.perf_counter() - t0) * 1000)
            for stage, t in res.trace.timings_ms.items():
                stages.setdefault(stage, []).append(t)
        out[mode] = {**latency(ms), "queries": len(ms),
                     "distinct": min(len(questions), WARM_QUERIES),
                     "stages_p50_ms": {k: round(statistics.median(v), 2)
                                       for k, v in stages.items()}}
    out["loadavg"] = load()
    return out


def child_synthetic(index: str) -> dict:
    """A fresh process on the synthetic index: open (the manifest, the mapped
    arrays, the approximate index), the first flat text query, 100 warm ones."""
    t0 = time.perf_counter()
    from strata.retrieval import Index

    t1 = time.perf_counter()
    idx = Index.open(index)
    idx.graph  # noqa: B018 - the arrays mapped: what any query needs first
    ann = idx._ann
    t2 = time.perf_counter()
    from benchmarks.synthetic_index import query_texts

    texts = query_texts(WARM_QUERIES + 1)
    res = idx.search(texts[0], mode="flat", k=10)
    t3 = time.perf_counter()
    ms = []
    for q in texts[1:]:
        a = time.perf_counter()
        idx.search(q, mode="flat", k=10)
        ms.append((time.perf_counter() - a) * 1000)
    top = {m.split(".")[0] for m in sys.modules}
    return {"import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3),
            "first_flat_s": round(t3 - t2, 3), "ann": ann is not None, "results": len(res),
            "first_stages_ms": dict(res.trace.timings_ms), "warm_ms": [round(x, 2) for x in ms],
            "peak_rss_mb": _peak_rss_mb(), **_rss_split(), "heavy": [m for m in HEAVY if m in top],
            "noted": [m for m in NOTED if m in top]}


def child_recall(index: str) -> dict:
    """Recall@10 of ``Index.dense`` (the approximate index, re-scored exactly)
    against an exact scan of every stored vector, for perturbed copies of
    random stored vectors."""
    import numpy as np

    from benchmarks.synthetic_index import query_vectors
    from strata.retrieval import Index

    idx = Index.open(index)
    vectors = idx.node_vectors
    _, queries = query_vectors(vectors, RECALL_QUERIES)
    index_of = idx.graph.index
    idx.dense(queries[0], 10)
    approx, ms = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = idx.dense(q, 10)
        ms.append((time.perf_counter() - t0) * 1000)
        approx.append({index_of[nid] for nid, _ in hits})
    k = 10
    best = np.full((len(queries), k), -np.inf, np.float32)
    rows = np.zeros((len(queries), k), np.int64)
    for a in range(0, len(vectors), 65536):
        s = np.asarray(vectors[a:a + 65536], np.float32) @ queries.T  # (rows, queries)
        take = min(k, len(s))
        part = np.argpartition(-s, take - 1, axis=0)[:take].T  # (queries, take)
        cand_s = np.concatenate([best, np.take_along_axis(s.T, part, axis=1)], axis=1)
        cand_r = np.concatenate([rows, part + a], axis=1)
        top = np.argsort(-cand_s, axis=1)[:, :k]
        best = np.take_along_axis(cand_s, top, axis=1)
        rows = np.take_along_axis(cand_r, top, axis=1)
    recall = [len(got & set(exact.tolist())) / k for got, exact in zip(approx, rows)]
    scan = []
    for q in queries[:10]:  # the exact scan a query would otherwise do, vectors now resident
        t0 = time.perf_counter()
        np.argpartition(-(vectors @ q), k)[:k]
        scan.append((time.perf_counter() - t0) * 1000)
    return {"recall_at_10": round(float(np.mean(recall)), 4),
            "worst_query_recall": round(float(np.min(recall)), 2), "ann": idx._ann is not None,
            "dense_ms": latency(ms), "exact_scan_ms": latency(scan), "queries": len(queries)}


CHILDREN = {"modules": child_modules, "warm": child_warm, "synthetic": child_synthetic,
            "recall": child_recall}


# --------------------------------------------------------------------------- the run

def median_of(runs: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 3)


def rounds(figures: dict, reps: int) -> dict:
    """Every figure once per round, ``reps`` rounds, after one uncounted run of
    each; per figure its runs, each with the load average at its start."""
    out = {name: {"first": fn(), "runs": []} for name, fn in figures.items()}
    for r in range(reps):
        for name, fn in figures.items():
            before = load()
            out[name]["runs"].append({**fn(), "loadavg": before})
        print(f"  round {r + 1}/{reps} done (load {load()})", flush=True)
    for name, f in out.items():
        runs = f["runs"]
        f["wall_s"] = median_of(runs, "wall_s")
        f["wall_s_range"] = [min(x["wall_s"] for x in runs), max(x["wall_s"] for x in runs)]
        f["loadavg_range"] = [min(x["loadavg"] for x in runs), max(x["loadavg"] for x in runs)]
        if "peak_rss_mb" in runs[0]:
            f["peak_rss_mb"] = median_of(runs, "peak_rss_mb")
        print(f"  {name}: {f['wall_s']} s" + (f", {f['peak_rss_mb']} MB"
                                              if "peak_rss_mb" in f else ""), flush=True)
    return out


def search_ratio(fresh: dict) -> float | None:
    """A cold ``strata search`` on the sample over ``import numpy``: the median of
    the rounds' ratios (each round runs both, so a busy spell falls on both)."""
    search, floor = fresh.get("strata search (sample)"), fresh.get("import numpy")
    if not search or not floor:
        return None
    return round(statistics.median(s["wall_s"] / n["wall_s"]
                                   for s, n in zip(search["runs"], floor["runs"])), 2)


def questions_of(name: str) -> list[str]:
    if name == "sample":
        return [SAMPLE_QUESTION]
    if name == "openharmony":
        from benchmarks.openharmony_dev import dev_questions

        return [q["question"] for q in dev_questions()]
    from benchmarks.musique_recall import gold_sets

    return gold_sets()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reuse-build", action="store_true",
                    help="keep indexes already in the scratch folder (this benchmark's, or "
                         "those of service_load, musique_recall and openharmony_dev)")
    ap.add_argument("--quick", action="store_true",
                    help="the sample index, 2 rounds, a 20,000-node synthetic index")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child[0]](*args.child[1:])), flush=True)
        return
    from benchmarks.musique_corpus import OPENIE_FILE, write_corpus
    from benchmarks.openharmony_dev import OH_DIR, oh_docs

    reps = size(2, 1) if args.quick else REPS
    reuse_build = args.reuse_build or smoke()  # a smoke run: the dev indexes of the run
    mine = SCRATCH / "cold_start"
    mine.mkdir(parents=True, exist_ok=True)
    report: dict = {"machine": machine(), "quick": args.quick, "reps": reps,
                    "loadavg_start": load(), "indexes": {}}

    def reuse(name: str, other: str | None = None) -> list[Path]:
        if not reuse_build:
            return []
        return [mine / name / "index"] + ([SCRATCH / other / "index"] if other else [])

    indexes = {"sample": ensure_index("sample", sample_docs(), reuse("sample", "service_load"))}
    if not args.quick:
        if not OH_DIR.is_dir():
            raise SystemExit(f"{OH_DIR} not found: this benchmark needs ../shared/data")
        indexes["openharmony"] = ensure_index("openharmony", oh_docs(),
                                              reuse("openharmony", "openharmony"))
        indexes["musique"] = ensure_index("musique", Path(), reuse("musique", "musique"),
                                          ["--openie-import", str(OPENIE_FILE)],
                                          write_docs=write_corpus)
    paths = {name: p for name, (p, _) in indexes.items()}
    report["indexes"] = {name: {"path": shown(p), **b}
                         for name, (p, b) in indexes.items()}
    questions = {name: questions_of(name) for name in paths}

    print("fresh processes, interleaved rounds...", flush=True)
    py = sys.executable
    figures = {"import numpy": lambda: run_plain([py, "-c", "import numpy"]),
               "import strata.retrieval": lambda: run_plain([py, "-c", "import strata.retrieval"])}
    for name, p in paths.items():
        figures[f"strata search ({name})"] = (lambda p=p, q=questions[name][0]: run_measured(
            [*strata_cmd(), "search", "--index", str(p), "-k", "5", q]))
    figures["strata mcp: initialize answered"] = lambda: mcp_initialize(paths["sample"])
    figures["strata serve: /health 200"] = lambda: serve_health(paths["sample"])
    report["fresh"] = rounds(figures, reps)
    report["search_ratio"] = search_ratio(report["fresh"])
    print(f"  strata search (sample) / import numpy: {report['search_ratio']}×", flush=True)

    print("modules after a first Index.search (one fresh process per index)...", flush=True)
    report["modules"] = {name: run_child("modules", str(p), questions[name][0])
                         for name, p in paths.items()}
    for name, m in report["modules"].items():
        print(f"  {name}: heavy {m['heavy'] or 'none'}; {m['peak_rss_mb']} MB", flush=True)

    print("warm latency (one process per index)...", flush=True)
    report["warm"] = {}
    for name, p in paths.items():
        if name == "sample" and len(paths) > 1:
            continue  # one question: the dev sets are the ones to time
        qf = mine / f"questions_{name}.json"
        qf.write_text(json.dumps(questions[name]))
        report["warm"][name] = run_child("warm", str(p), str(qf), "flat,auto")
        print(f"  {name}: {report['warm'][name]}", flush=True)

    nodes = QUICK_NODES if args.quick else SYNTHETIC_NODES
    syn, info = synthetic(nodes, paths["sample"],
                          QUICK_ANN_MIN if args.quick or smoke() else None)
    report["synthetic"] = {"index": info}
    print(f"synthetic index: {reps} fresh processes, then recall...", flush=True)
    runs = []
    for _ in range(reps):
        before = load()
        runs.append({**run_child("synthetic", str(syn)), "loadavg": before})
        print(f"  open {runs[-1]['open_s']} s, first flat {runs[-1]['first_flat_s']} s, "
              f"{runs[-1]['peak_rss_mb']} MB", flush=True)
    warm = [x for r in runs for x in r.pop("warm_ms")]
    s = report["synthetic"]
    s["runs"] = runs
    s.update({"open_s": median_of(runs, "open_s"), "first_flat_s": median_of(runs, "first_flat_s"),
              "import_s": median_of(runs, "import_s"),
              "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "warm_flat": latency(warm),
              "loadavg_range": [min(r["loadavg"] for r in runs), max(r["loadavg"] for r in runs)]})
    s["recall"] = run_child("recall", str(syn))
    print(f"  recall@10 {s['recall']['recall_at_10']}", flush=True)
    report["loadavg_end"] = load()

    report["rows"], report["targets"] = rows_and_targets(report)
    results = mine / "quick_results" if args.quick else None
    kw = {"results": results} if results else {}
    write_result("cold_start", report, markdown(report), **kw)


# --------------------------------------------------------------------------- report

def _load(rng: list[float]) -> str:
    lo, hi = f"{rng[0]:.1f}", f"{rng[1]:.1f}"
    return lo if lo == hi else f"{lo}–{hi}"


def _split(m: dict) -> str:
    if "rss_anon_mb" not in m:
        return ""
    return f"at the end: {m['rss_anon_mb']} MB anonymous, {m['rss_file_mb']} MB mapped files"


def rows_and_targets(report: dict) -> tuple[list[dict], list[dict]]:
    """One row per figure: measured, its spread and load, and its target where it has one."""
    rows, targets = [], []

    def row(figure, measured, spread="", loadavg="", goal=None, met=None, short=None):
        rows.append({"figure": figure, "measured": measured, "spread": spread, "load": loadavg,
                     "target": goal, "met": met})
        if goal is not None:
            targets.append(target(f"{short or figure}: {goal}", measured, met))

    fresh, reps = report["fresh"], report["reps"]
    for name, f in fresh.items():
        lo, hi = f["wall_s_range"]
        spread, ld = f"{lo:.2f}–{hi:.2f} s", _load(f["loadavg_range"])
        label = f"{name}: wall s (median of {reps})"
        if name.startswith("strata mcp"):
            row(label, f["wall_s"], spread, ld, f"≤ {MCP_INIT_S:g} s", f["wall_s"] <= MCP_INIT_S,
                name)
        elif name.startswith("strata serve"):
            row(label, f["wall_s"], spread, ld, f"≤ {SERVE_HEALTH_S:g} s",
                f["wall_s"] <= SERVE_HEALTH_S, name)
        else:
            row(label, f["wall_s"], spread, ld)
        if "peak_rss_mb" in f:
            row(f"{name}: peak RSS MB (median)", round(f["peak_rss_mb"]), "", ld)
    ratio = report.get("search_ratio")
    if ratio is not None:
        row(f"strata search (sample) / import numpy: wall ratio (median of {reps} rounds)",
            ratio, "", "", f"≤ {SEARCH_RATIO:g}×", ratio <= SEARCH_RATIO,
            "cold strata search over import numpy")
    for name, m in report["modules"].items():
        row(f"{name}: heavy modules after a first Index.search", ", ".join(m["heavy"]) or "none",
            "", "", "none", not m["heavy"])
        goal = (f"≤ {MUSIQUE_RSS_MB} MB", m["peak_rss_mb"] <= MUSIQUE_RSS_MB) \
            if name == "musique" else (None, None)
        row(f"{name}: peak RSS MB after a first Index.search (import, open, query)",
            round(m["peak_rss_mb"]), _split(m), "", *goal, f"{name}: peak RSS after a first query")
    for name, w in report["warm"].items():
        for mode in ("flat", "auto"):
            x = w[mode]
            goal = (None, None)
            if (name, mode) == ("musique", "flat"):
                goal = (f"p50 ≤ {MUSIQUE_FLAT_P50_MS:g} ms", x["p50_ms"] <= MUSIQUE_FLAT_P50_MS)
            if (name, mode) == ("openharmony", "auto"):
                goal = (f"p50 ≤ {OH_AUTO_P50_MS:g} ms", x["p50_ms"] <= OH_AUTO_P50_MS)
            stages = ", ".join(f"{k} {v}" for k, v in x.get("stages_p50_ms", {}).items())
            row(f"{name}: warm {mode} p50 / p95 ms ({x['queries']} queries)",
                f"{x['p50_ms']} / {x['p95_ms']}", f"max {x['max_ms']}; stages p50: {stages}",
                _load([w["loadavg"]] * 2),
                *goal, f"{name}: warm {mode}")
    s = report["synthetic"]
    info, ld = s["index"], _load(s["loadavg_range"])
    n = f"synthetic {info['nodes']:,} nodes"
    row(f"{n}: written (s; arrays in memory + save)", info["seconds"]["total"],
        f"{info['seconds']['arrays_in_memory']} + {info['seconds']['save']}"
        + (" (cached from an earlier run)" if info.get("reused") else ""))
    row(f"{n}: Index.open + arrays mapped + ANN opened, s (median of {reps})", s["open_s"],
        f"import strata.retrieval before it: {s['import_s']} s", ld,
        f"≤ {SYN_OPEN_S:g} s", s["open_s"] <= SYN_OPEN_S, f"{n}: open")
    row(f"{n}: first flat query, query embedding included, s (median)", s["first_flat_s"], "",
        ld, f"≤ {SYN_FIRST_S:g} s", s["first_flat_s"] <= SYN_FIRST_S, f"{n}: first flat query")
    w = s["warm_flat"]
    row(f"{n}: warm flat p50 / p95 ms", f"{w['p50_ms']} / {w['p95_ms']}", f"max {w['max_ms']}",
        ld, f"p95 ≤ {SYN_WARM_MS:g} ms", w["p95_ms"] <= SYN_WARM_MS, f"{n}: warm flat")
    last = s["runs"][-1]
    row(f"{n}: peak RSS MB (highest of {reps})", round(s["peak_rss_mb"]), _split(last), ld,
        f"≤ {SYN_RSS_MB} MB", s["peak_rss_mb"] <= SYN_RSS_MB, f"{n}: peak RSS")
    heavy = sorted({m for r in s["runs"] for m in r["heavy"]})
    row(f"{n}: heavy modules after flat queries", ", ".join(heavy) or "none", "", "", "none",
        not heavy)
    r = s["recall"]
    row(f"{n}: recall@10, approximate vs exact ({r['queries']} queries)", r["recall_at_10"],
        f"worst query {r['worst_query_recall']}; ANN {'on' if r['ann'] else 'off'}", "",
        f"≥ {SYN_RECALL:g}", r["ann"] and r["recall_at_10"] >= SYN_RECALL,
        f"{n}: recall@10 of the approximate index")
    row(f"{n}: dense search (vector given) p50 ms: approximate / exact scan",
        f"{r['dense_ms']['p50_ms']} / {r['exact_scan_ms']['p50_ms']}")
    return rows, targets


def markdown(report: dict) -> str:
    lines = ["| figure | measured | spread | load | target | met |",
             "|---|---|---|---|---|---|"]
    for r in report["rows"]:
        met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
        lines.append(f"| {r['figure']} | {r['measured']} | {r['spread']} | {r['load']} | "
                     f"{r['target'] or ''} | {met} |")
    noted = sorted({m for x in report["modules"].values() for m in x["noted"]})
    lines += ["", f"Also imported by a first query (not targets): {', '.join(noted) or 'none'}."]
    built = {n: i for n, i in report["indexes"].items() if "built" in i}
    if built:
        lines += ["Built for this run: " + "; ".join(
            f"{n} {i['built']['wall_s']:.0f} s, {i['built']['peak_rss_mb']:.0f} MB"
            for n, i in built.items()) + "."]
    lines += targets_md(report["targets"])
    return "\n".join(lines)


if __name__ == "__main__":
    main()
