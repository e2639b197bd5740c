"""What every benchmark shares: building a corpus through the real CLI (with
wall time and peak RSS of the build process), the baselines (BM25 from bm25s,
dense kNN, their RRF) on the index's own units and encoder, ranking metrics
and latency statistics, and the Markdown tables.

Benchmarks import :mod:`retrieval` (the query side) and drive the pipeline only
through ``python -m pipelines.cli`` in a subprocess — as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RRF_K = 60  # the usual reciprocal-rank-fusion constant


# --------------------------------------------------------------------------- smoke runs

def smoke() -> bool:
    """Whether this is a smoke run (``STRATA_BENCH_SMOKE=1``, as ``python -m
    benchmarks.smoke`` runs every benchmark): every size tiny, every result in a
    temporary folder. It checks that a benchmark runs end to end, not its figures."""
    return os.environ.get("STRATA_BENCH_SMOKE", "") not in ("", "0")


def size(full, tiny):
    """``tiny`` in a smoke run, else ``full``: a corpus's files, questions, trials."""
    return tiny if smoke() else full


def _out() -> Path:
    """Where results and scratch folders go: ``$STRATA_BENCH_OUT``; else, in a smoke
    run, a new temporary folder (set in the environment, so the benchmark's child
    processes share it); else ``benchmarks/``."""
    if os.environ.get("STRATA_BENCH_OUT"):
        return Path(os.environ["STRATA_BENCH_OUT"]).resolve()
    if smoke():
        os.environ["STRATA_BENCH_OUT"] = tempfile.mkdtemp(prefix="strata-bench-smoke-")
        print(f"smoke run: results and scratch in {os.environ['STRATA_BENCH_OUT']}",
              file=sys.stderr)
        return Path(os.environ["STRATA_BENCH_OUT"])
    return Path(__file__).resolve().parent


OUT = _out()
RESULTS = OUT / "results"
SCRATCH = OUT / "scratch"


def copy_once(src: Path, names: list[str], out: Path) -> Path:
    """``out`` holding the files ``names`` (relative to ``src``) copied from ``src``,
    made once and whole: written beside it and renamed into place, so that
    benchmarks running side by side find it complete or absent."""
    if not out.is_dir():
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        for name in names:
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, tmp / name)
        try:
            tmp.rename(out)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def sample_docs() -> Path:
    """The bundled sample corpus; in a smoke run a few of its pages, copied once
    into the scratch folder."""
    sample = REPO / "data" / "sample"
    if not smoke():
        return sample
    pages = sorted(str(p.relative_to(sample)) for p in (sample / "docs").rglob("*.md"))[:3]
    return copy_once(sample, pages, SCRATCH / "sample_docs")


# --------------------------------------------------------------------------- builds

def cli_env(work: Path) -> dict:
    """The environment of a ``strata`` command a benchmark runs: its Dagster home and
    corpora file in ``work`` (the home made), never the project's.

    ``PYTHONDONTWRITEBYTECODE`` is left out: a sandbox or CI image may set it for
    its own reasons, and then every command compiles each of Strata's modules it
    imports from source, every time. A user's install has them compiled (pip
    compiles at install; an editable install caches them on first import), so a
    build measured with it set would be timed with a cost no user pays."""
    (work / "dagster_home").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "DAGSTER_HOME": str(work / "dagster_home"),
            "STRATA_CORPORA": str(work / "corpora.yaml")}


def build_with_cli(docs: Path, out: Path, corpus: str, work: Path,
                   extra: list[str] = (), trace: list[tuple[float, float]] | None = None,
                   env: dict | None = None) -> dict:
    """``strata index docs --corpus corpus --out out`` in a child process under
    :mod:`benchmarks.measure`; returns wall seconds, the build's peak RSS, and
    what the stages recorded (embeddings computed/reused, LLM calls, ...).
    ``trace``: filled with the build's resident set over time (:func:`sample_rss`,
    the measuring process itself left out), for cutting into its steps; ``env``:
    variables set for the build beside :func:`cli_env`'s."""
    env = {**cli_env(work), **(env or {})}
    cmd = [sys.executable, "-m", "benchmarks.measure", "--", sys.executable, "-m",
           "strata.pipelines.cli", "index", str(docs), "--corpus", corpus, "--out", str(out), "-q",
           *extra]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stdout, stderr = (proc.communicate() if trace is None
                      else communicate_sampled(proc, trace, skip_root=True))
    if proc.returncode != 0:
        raise RuntimeError(f"build of {corpus} failed:\n{stderr[-4000:]}")
    measured = json.loads(stdout.strip().splitlines()[-1])
    report = json.loads((out / "build" / "build_report.json").read_text())
    llm_calls = sum(int(v.get("calls", 0)) for v in report.values() if isinstance(v, dict))
    return {"wall_s": measured["wall_s"], "peak_rss_mb": measured["peak_rss_mb"],
            "embeddings_computed": int(report.get("embed", {}).get("computed", 0)),
            "embeddings_reused": int(report.get("embed", {}).get("reused", 0)),
            "files_parsed": int(report.get("parse", {}).get("parsed", 0)),
            "llm_calls": llm_calls, "stages": report}


SAMPLE_S = 0.02  # seconds between two samples of a build's resident set
# A child this young is taken to be between fork and exec (Dagster's log mirror starts
# a `tail` per step): its resident set is its parent's pages counted a second time.
FORK_S = 0.1


def sample_rss(proc: subprocess.Popen, trace: list[tuple[float, float]],
               largest: list[float] | None = None, skip_root: bool = False) -> None:
    """Append (time, MB) of the build process and its children until it ends; with
    ``largest``, also the largest single process's MB at each sample (with
    ``--workers`` every step is a process: what one worker, or one pod, must hold).
    ``skip_root``: ``proc`` only measures the build (:mod:`benchmarks.measure`):
    its children alone are counted."""
    import psutil

    try:
        root = psutil.Process(proc.pid)
    except psutil.NoSuchProcess:
        return
    while proc.poll() is None:
        sizes = []
        try:
            now = time.time()
            children = root.children(recursive=True)
            for p in children if skip_root else [root, *children]:
                if p is root or now - p.create_time() >= FORK_S:
                    sizes.append(p.memory_info().rss)
        except psutil.Error:
            pass
        if sizes:
            trace.append((time.time(), sum(sizes) / 2**20))
            if largest is not None:
                largest.append(max(sizes) / 2**20)
        time.sleep(SAMPLE_S)


def communicate_sampled(proc: subprocess.Popen, trace: list[tuple[float, float]],
                        largest: list[float] | None = None,
                        skip_root: bool = False) -> tuple[str | None, str | None]:
    """``proc.communicate()`` while :func:`sample_rss` fills ``trace`` (and
    ``largest``) in a thread of its own, which has ended when this returns."""
    sampler = threading.Thread(target=sample_rss, args=(proc, trace, largest, skip_root),
                               daemon=True)
    sampler.start()
    try:
        return proc.communicate()
    finally:
        sampler.join()


def build_stats_row(name: str, b: dict) -> str:
    return (f"| {name} | {b['wall_s']:.1f} | {b['peak_rss_mb']:.0f} | {b['files_parsed']} | "
            f"{b['embeddings_computed']} | {b['embeddings_reused']} | {b['llm_calls']} |")


BUILD_HEADER = ("| build | wall s | peak RSS MB | files parsed | embeddings computed | "
                "embeddings reused | LLM calls |\n|---|---|---|---|---|---|---|")


# --------------------------------------------------------------------------- metrics

def first_occurrence(items) -> list:
    """Distinct items in order of first appearance (None dropped)."""
    out, seen = [], set()
    for x in items:
        if x is not None and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def recall_at(ranked: list, gold: set, k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def latency(ms: list[float]) -> dict:
    s = sorted(ms)
    return {"p50_ms": round(statistics.median(s), 1),
            "p95_ms": round(s[max(0, int(round(0.95 * len(s))) - 1)], 1),
            "max_ms": round(s[-1], 1)}


def mean_pct(values: list[float]) -> float:
    return round(100 * statistics.mean(values), 1) if values else 0.0


# --------------------------------------------------------------------------- baselines

@dataclass
class Baselines:
    """BM25 (bm25s), dense kNN and their RRF over one index's text units (the
    nodes the index embeds: files, sections, chunks, code, tables), with the
    index's own encoder; each returns node ids, best first."""

    index: object
    units: list[str] = field(default_factory=list)
    _bm25: object = None

    def __post_init__(self):
        import bm25s
        import polars as pl

        nodes = self.index.nodes().filter(pl.col("embedded") & (pl.col("kind") != "entity"))
        self.units = nodes["node_id"].to_list()
        texts = [f"{b or ''}\n{t or ''}" for b, t in zip(nodes["breadcrumb"].to_list(),
                                                        nodes["text"].to_list())]
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                         show_progress=False)

    def bm25(self, query: str, k: int) -> list[str]:
        import bm25s

        k = min(k, len(self.units))
        ids, _ = self._bm25.retrieve(bm25s.tokenize([query], stopwords="en", show_progress=False),
                                     k=k, show_progress=False)
        return [self.units[i] for i in ids[0]]

    def dense(self, query: str, k: int) -> list[str]:
        return [nid for nid, _ in self.index.dense(self.index.embed_query(query), k)]

    def rrf(self, query: str, k: int, depth: int = 100) -> list[str]:
        score: dict[str, float] = {}
        for ranked in (self.dense(query, depth), self.bm25(query, depth)):
            for r, nid in enumerate(ranked):
                score[nid] = score.get(nid, 0.0) + 1.0 / (RRF_K + r + 1)
        return sorted(score, key=lambda n: -score[n])[:k]


def run_systems(index, questions: list[str], modes: list[str], k: int, to_unit,
                baselines: bool = True, mode_params: dict | None = None) -> dict:
    """Every baseline and mode on every question, in one process, warm: returns
    ``{system: {"ranked": [[unit, ...] per question], "ms": [...]}}`` where a
    unit is what ``to_unit(node_id)`` maps a result to (a passage, a file, a
    section; None drops it), deduplicated by first occurrence. The modes run
    with ``min_relevance=0``: these figures measure the ranking; what the
    relevance floor costs is measured by :mod:`benchmarks.calibration`."""
    systems: dict[str, callable] = {}
    if baselines:
        base = Baselines(index)
        systems.update({"BM25 (bm25s)": lambda q: base.bm25(q, k),
                        "dense kNN": lambda q: base.dense(q, k),
                        "dense+BM25 RRF": lambda q: base.rrf(q, k)})
    params = mode_params or {}
    stage_ms: dict[str, list[dict]] = {}

    def run_mode(mode: str, q: str) -> list[str]:
        res = index.search(q, mode=mode, k=k, min_relevance=0, **params.get(mode, {}))
        stage_ms.setdefault(mode, []).append(dict(res.trace.timings_ms))
        return [r.node_id for r in res]

    for mode in modes:
        systems[f"strata {mode}"] = (lambda m: lambda q: run_mode(m, q))(mode)
    index.search(questions[0], mode="diffusion")  # warm: tables, graph, vectors, model
    out = {}
    for name, fn in systems.items():
        index._query_cache.clear()  # the query embedding is part of every timing
        ranked, ms = [], []
        for q in questions:
            t0 = time.perf_counter()
            ids = fn(q)
            ms.append((time.perf_counter() - t0) * 1000)
            ranked.append(first_occurrence(to_unit(i) for i in ids))
        out[name] = {"ranked": ranked, "ms": ms}
        if name.startswith("strata "):
            out[name]["stages_ms"] = stage_ms.get(name.removeprefix("strata "), [])
        print(f"  {name}: {statistics.median(ms):.1f} ms p50", flush=True)
    return out


# --------------------------------------------------------------------------- targets

DEFAULT = "strata auto"  # the default mode's row in every benchmark
FLAT_BASELINES = ("dense+BM25 RRF", "strata hybrid")  # "the best flat baseline" of the targets
P50_MS, P95_MS = 30.0, 80.0  # the default mode's latency budget (query embedding included)


def target(name: str, measured, met: bool) -> dict:
    return {"target": name, "measured": measured, "met": bool(met)}


def default_targets(retrieval: dict, metrics: tuple[str, ...]) -> list[dict]:
    """The default mode against the best flat baseline of the same run, metric by
    metric, and its latency budget."""
    d = retrieval.get(DEFAULT, {})
    out = []
    for m in metrics:
        best_name = max(FLAT_BASELINES, key=lambda n: retrieval.get(n, {}).get(m, -1))
        best = retrieval.get(best_name, {}).get(m)
        if best is None or m not in d:
            continue
        out.append(target(f"default {m} ≥ best flat baseline ({best_name})",
                          f"{d[m]} vs {best}", d[m] >= best))
    if "p50_ms" in d:
        out += [target(f"default p50 ≤ {P50_MS:.0f} ms", d["p50_ms"], d["p50_ms"] <= P50_MS),
                target(f"default p95 ≤ {P95_MS:.0f} ms", d["p95_ms"], d["p95_ms"] <= P95_MS)]
    return out


def targets_md(targets: list[dict]) -> list[str]:
    return ["", "| target | measured | met |", "|---|---|---|"] + [
        f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |"
        for t in targets]


def write_result(name: str, report: dict, table: str, results: Path = RESULTS) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (results / f"{name}.md").write_text(table + "\n")
    print(table, flush=True)


def machine() -> dict:
    """What a figure was measured on: cores, Python, date, the CPU's model and
    whether it computes bfloat16 natively (which decides the default embedding
    runtime, and so how long a first build takes against a rebuild)."""
    import platform

    from strata.core.encoders.embedding import native_bf16

    model = ""
    try:
        model = next((line.partition(":")[2].strip()
                      for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.partition(":")[0].strip() == "model name"), "")
    except OSError:  # not Linux: the platform's own name for the processor
        pass
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"), "cpu": model or platform.processor(),
            "native_bf16": native_bf16()}
