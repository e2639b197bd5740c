"""Put the latest benchmark tables into the documentation.

Reads ``benchmarks/results/*.json|md`` (written by the benchmarks ``make bench``
runs) and replaces the block between ``<!-- bench:start -->`` and
``<!-- bench:end -->`` in docs/benchmarks.md, and the calibration summary between
``<!-- calibration:start -->`` and ``<!-- calibration:end -->`` in
docs/concepts/modes.md (the page on relevance), so the numbers a reader sees are the
ones the last ``make bench`` produced — never typed by hand.

Usage: ``python -m benchmarks.report [--docs docs/benchmarks.md] [--modes docs/concepts/modes.md]``
(a smoke run writes into copies of the two pages beside its results)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import REPO, RESULTS, smoke
from strata.core.config.schema_doc import splice as splice_block

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
SECTIONS = (
    ("musique", "MuSiQue-100 multi-hop passage recall (HippoRAG's protocol)",
     "Gold = the supporting passages; Recall@k = |gold ∩ top-k passages| / |gold|, in percent. "
     "Latency is warm and includes the query embedding. Diffusion uses the GPT-3.5 triples "
     "shipped with the data (`--openie-import`)."),
    ("musique_sweep", "MuSiQue-100: the entity-walk parameters, one at a time",
     "Each row changes one diffusion parameter from its default (`benchmarks.musique_sweep`); "
     "reported so the choice is visible, see `docs/benchmarks.md`."),
    ("stdlib_code", "Code questions: the default mode against the flat baselines (stdlib subset)",
     "`benchmarks.stdlib_code`: 45 hand-labeled questions over 85 files of CPython 3.11's "
     "standard library (the peer benchmark's index: same units, same encoder). Gold = the 1-3 "
     "most specific definitions (dotted node paths); R@k = |gold ∩ top-k| / |gold|, in percent. "
     "Latency is warm and includes the query embedding."),
    ("context_budget", "Context under a token budget: the default mode vs flat top-k",
     "`benchmarks.context_budget`: the share of gold units the context holds when it must fit "
     "B estimated tokens (4 characters a token). Default: `budget_tokens=B` (units by fused "
     "rank, siblings merged into their parent where that costs about as much); flat: dense "
     "top-k taken in rank order while it fits. A gold section is held by itself, its chunks or a "
     "merged ancestor; a gold definition by itself or a merged ancestor."),
    ("fusion_sweep", "The fusion weight, swept on the three dev sets",
     "`benchmarks.fusion_sweep`: the default mode with the entity walk off, for several "
     "`alpha` (the dense signal's weight; 1 = dense alone). The headline metric of each set."),
    ("openie_quality", "OpenIE quality: the offline heuristic against GPT-3.5 on the MuSiQue passages",
     "`benchmarks.openie_quality`: each passage as its section unit (`# title` + text), the "
     "extractor's validated output against HippoRAG's GPT-3.5-turbo-1106 extraction. Names are "
     "compared after normalisation (case, punctuation, a leading article). Exact: equal names; "
     "equal head, relation and tail. Lenient: names sharing at least half of the longer one's "
     "words, and relations at least half of their content words (one-to-one matching). Pair: "
     "head and tail match leniently in either order, relation ignored. P / R / F1 in percent, "
     "summed over passages. The v1 row is the heuristic before this change, measured once from "
     "its commit (`--extractor FILE.py:offline_openie`)."),
    ("openie_llm", "A local small model's OpenIE: SmolLM2-135M against the offline heuristic",
     "`benchmarks.openie_llm` (needs `make llm-server`): the first MuSiQue passages through the "
     "OpenIE stage's own prompt, JSON mode, retries and validation, sent to SmolLM2-135M-Instruct "
     "(Q4_1) on llama.cpp's server on loopback, one request at a time; its quality row is in the "
     "OpenIE quality table above. Then the same passages built three times, the facts from the "
     "heuristic, from SmolLM2 (imported) and from GPT-3.5 (imported), summaries offline in all "
     "three, and Recall@k on the questions whose candidate passages they are."),
    ("openharmony", "OpenHarmony dev set: the right page and the right section",
     "Labeled developer questions (`benchmarks/data/openharmony_dev.yaml`, written from the pages "
     "before any retrieval ran). File Hit@k: the gold page among the first k distinct pages; "
     "section R@k: the gold section among the first k distinct sections holding a result. "
     "Facts here come from the offline heuristic, so diffusion runs without the entity walk."),
    ("calibration", "Relevance: calibration, out-of-corpus questions and the floor",
     "`benchmarks.calibration`: each dev index's own questions are in-corpus, the other two "
     "sets' questions out-of-corpus; every question's top 10 default-mode results are labelled "
     "(relevant: the gold definition or supporting passage, or on the gold section's page) and "
     "the weights of `retrieval.relevance` are fitted on them. AUROC: the top result's relevance, "
     "in-corpus against out-of-corpus questions; \"left out\": weights fitted on the other two "
     "sets only (a corpus the fit never saw). Brier and the reliability bins: every top-10 "
     "result. Floor rows: out-of-corpus questions left with no result / in-corpus questions "
     "whose gold leaves the top 5, in percent."),
    ("offline_answer", "Offline `ask`: the answer quoted from the sources",
     "`benchmarks.offline_answer`: `ask` with no LLM on the OpenHarmony dev questions and on "
     "the stdlib code questions (default mode, floor 0). Key sentence: the answer holds a whole "
     "sentence of the gold section; top source: it quotes the first result; headings/code: "
     "quoted lines that are a heading or come from code other than its docstring or comments "
     "(there must be none). Code: the answer holds a whole sentence of a gold unit's docstring "
     "(over the questions whose gold has one); code lines: lines of a retrieved unit's code "
     "found in the answer."),
    ("scale_out", "Build throughput and incremental cost: a generated 2,000-file corpus",
     "`benchmarks.scale_out`: Markdown pages and Python modules from `benchmarks.synthetic_corpus` "
     "(fixed seed). Every build is `strata index` in a child process; 2 workers = "
     "`--workers 2` (Dagster's multiprocess executor, one process per step, forkserver; the peak "
     "RSS of forked step processes is not visible to the parent and is not shown). The edit "
     "appends a section or a function to 1% of the files."),
    ("scale_curve", "How a build grows: 1k, 4k and 16k synthetic files",
     "`benchmarks.scale_curve`: corpora from `benchmarks.synthetic_corpus` (fixed seed), each "
     "built fresh, rebuilt unchanged and rebuilt with 1% of its files edited, by `strata index` "
     "in a child process; peak RSS = the build process's high-water mark, and without the "
     "encoders from the first build's processes sampled every 20 ms and cut into its steps; "
     "growth exponents fitted in log-log; the plot is in "
     "[Run it on a cluster](guides/cluster.md)."),
    ("incremental", "Incremental builds on MuSiQue: cost, and equality with a fresh build",
     "`benchmarks.incremental`: the 1,890 passages with the offline OpenIE; first build, "
     "no-change rebuild, 1% of the passages edited (a new `strata index`, then three times "
     "under `strata index --watch`, timed from the edit to the index serving it), then a fresh "
     "build of the edited folder compared with the incremental index with no tolerance at all."),
    ("store_build", "The build on an object store: what `shared: store` costs",
     "`benchmarks.store_build`: a synthetic corpus built by `strata index` with its build in a "
     "local folder, then with `shared: store` against moto's S3 server on loopback (no network "
     "latency; the server shares the cores with the build), each rebuilt with nothing changed; "
     "then a rebuild from an empty folder, as a new worker or pod does."),
    ("throughput", "Build throughput against the encoder's own: MuSiQue and the 2,000-file corpus",
     "`benchmarks.throughput`: each corpus built by `strata index` in a child process, then the "
     "bare model (one process, the texts sorted by length, one call, with the OpenMP wait policy "
     "a build process gets: threads sleep when out of work) on the very texts the build "
     "encoded, in the same run: the ratio of the two is the figure that holds on a shared "
     "machine; beside it the bare model with libgomp's default policy (threads spin), what the "
     "model reaches with the machine to itself (the settings page says what the policy costs). "
     "Build texts/s = embeddings computed / the plain build's embedding shards' own time "
     "(model load and cache writes included); in brackets the profiled build's (the bare model "
     "runs without cProfile). Load = the 1-minute load average before the build and after the "
     "bare model (2 cores: above 2, other work shared them). The profiled build runs "
     "every step under cProfile (`STRATA_PROFILE`); CPU % = the process's CPU seconds, every "
     "thread, over wall × cores: near 100 is bound by the cores, well below is waiting."),
    ("throughput_torch", "Build throughput with torch in float32 (the runtime before `auto`)",
     "`benchmarks.throughput --runtime torch`: as above, with float32 torch in the build and in "
     "the bare model."),
    ("onnx_runtime", "Embedding runtimes: torch float32 and bfloat16, ONNX Runtime, ONNX Runtime int8",
     "`benchmarks.onnx_runtime`: all-MiniLM-L6-v2 on each runtime, the ONNX graphs exported here "
     "from the packaged weights (int8: dynamic quantisation, per-channel weight scales). Cosine "
     "to torch (float32) over the 1,890 MuSiQue passages, each runtime's vectors as its encoder "
     "returns them; texts/s on them (sorted, batches of 64); "
     "one query's encoding p50 over the 100 MuSiQue questions, warm; MuSiQue dense R@k = the "
     "questions against the passage vectors (the part of retrieval a runtime changes). The "
     "OpenHarmony pages are built with `strata index --embed-runtime` and each index is queried "
     "with the runtime that built it (latency warm, query embedding included). Load = the "
     "1-minute load average after the encoder run → after the evaluation (2 shared cores)."),
    ("service_load", "HTTP service under load: N concurrent clients on loopback",
     "`benchmarks.service_load`: `strata serve` on the sample index in a child process; per mode, "
     "N client threads (each its own `httpx.Client`) send distinct questions (12 about the "
     "sample, numbered per request, so every query is embedded) for a fixed time after a short "
     "warm-up; clients and server share the machine's cores. Latency is client-side wall time; "
     "server ms is the service's own `took_ms`. An error is a non-200 answer or a failed "
     "request; there must be none."),
    ("cold_start", "Cold start: a fresh querying process, from 528 nodes to a million",
     "`benchmarks.cold_start`: each wall time is the median of fresh processes run in "
     "interleaved rounds after one uncounted run (the page cache is warm); load = the 1-minute "
     "load average at the start of the runs (2 shared cores). `strata search` under "
     "`benchmarks.measure` (peak RSS of the process). MCP: from starting `strata mcp` to its "
     "answer to `initialize` over stdio; serve: to the first 200 of `/health`. Warm latency: "
     "one process, 100 queries after a warm-up, each query embedded anew. The synthetic index "
     "(`benchmarks.synthetic_index`) is written without a build: files, sections and chunks, "
     "vectors drawn around a few thousand centres on the sphere; recall@10 = its approximate "
     "dense search against an exact scan, for perturbed copies of stored vectors."),
    ("hardening", "Stopping a build, endpoints that are down, hostile files",
     "`benchmarks.hardening`: every figure is a `strata index` child process measured from "
     "outside. Stop time: from the signal to the process's exit, on a 12-page corpus, while the "
     "LLM server holds a request open or while the encoder runs; Ctrl-C is typed on a "
     "pseudo-terminal (the kernel signals the whole process group). Endpoint down: the whole "
     "command, interpreter start-up included, against a port where nothing listens. Hostile "
     "corpus: `tests/reliability/hostile.py` (a 2 GiB sparse image, a 200 MiB text file, a DOCX "
     "whose XML part inflates to 64 MiB, a FIFO, a character device, ...); peak RSS of the "
     "process."),
    ("ui_launch", "An unchanged rebuild from the Dagster UI's launch path vs `strata index`",
     "`benchmarks.ui_launch`: the sample corpus, built once, then rebuilt with nothing changed. "
     "UI path: a GraphQL `launchPipelineExecution` of `index_corpus` against `dagster dev` (what "
     "the UI's launchpad and *Materialize* send), through Dagster's run queue, daemon and run "
     "launcher into a run worker; timed from the launch to the run's end as the UI reports it. "
     "CLI: `strata index` in a child process, interpreter start-up included. Trials "
     "interleaved. `workers: 2` is the launch asking for the multiprocess executor, which every "
     "run used before builds ran in one process by default."),
    ("hyprag", "Code: Strata hierarchical vs HypRAG 0.7.2 on the same stdlib subset",
     "Same chunks, same hierarchy, same MiniLM encoder; HypRAG runs from PyPI in its own venv. "
     "Gold = dotted node paths (`benchmarks/data/stdlib_code_questions.yaml`)."),
)


def block() -> str:
    parts = [START, "", "Produced by `make bench` (the tables below are copied from "
             "`benchmarks/results/`; do not edit by hand)."]
    for name, title, about in SECTIONS:
        md, js = RESULTS / f"{name}.md", RESULTS / f"{name}.json"
        if not md.exists():
            parts += ["", f"#### {title}", "", f"_not run yet: `make bench` writes "
                      f"`benchmarks/results/{name}.md`_"]
            continue
        meta = json.loads(js.read_text()) if js.exists() else {}
        m = meta.get("machine", {})
        cpu = f" ({m['cpu']}{', native bfloat16' if m.get('native_bf16') else ''})" \
            if m.get("cpu") else ""
        when = f" — {m.get('date')}, {m.get('cpus')} CPUs{cpu}" if m else ""
        parts += ["", f"#### {title}{when}", "", about, "", md.read_text().strip()]
    parts += ["", END]
    return "\n".join(parts)


def splice(readme: str, new_block: str) -> str:
    """The page with its benchmark block replaced (the one splicer of that block)."""
    return splice_block(readme, START, END, new_block)


CAL_START, CAL_END = "<!-- calibration:start -->", "<!-- calibration:end -->"


def calibration_block() -> str:
    """The calibration summary (its first table and the floor sweep) for the
    docs' page on relevance (docs/concepts/modes.md)."""
    md = RESULTS / "calibration.md"
    body = md.read_text().split("\n\nThe same, each set scored")[0].strip() if md.exists() \
        else "_not run yet: `python -m benchmarks.calibration`_"
    return "\n".join([CAL_START, "", body, "", CAL_END])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", default=str(REPO / "docs" / "benchmarks.md"),
                    help="the page with the benchmark block")
    ap.add_argument("--modes", default=str(REPO / "docs" / "concepts" / "modes.md"),
                    help="the page with the calibration block")
    args = ap.parse_args()
    pages = [Path(args.docs), Path(args.modes)]
    if smoke():  # the documentation stays as it is: the pages are copied first
        copies = [RESULTS / "report" / p.name for p in pages]
        for page, copy in zip(pages, copies):
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(page.read_text())
        pages = copies
    for path in pages:
        text = path.read_text()
        out = splice(text, block()) if START in text else text
        if CAL_START in out:
            out = splice_block(out, CAL_START, CAL_END, calibration_block())
        path.write_text(out)
        print(f"benchmark tables written into {path}")


if __name__ == "__main__":
    main()
