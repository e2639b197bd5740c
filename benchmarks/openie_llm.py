"""What a small local model buys over the offline heuristic: OpenIE by SmolLM2-135M
(llama.cpp's server on loopback, :mod:`benchmarks.llama_server`) on the first 200
MuSiQue passages, scored against the imported GPT-3.5 triples, and what each
extraction does to diffusion recall.

1. **Extraction.** The passages go through the OpenIE stage's own code, as a
   build sends them: :func:`stages.enrich.openie.openie_request` (the same
   prompt, JSON mode), :meth:`strata.core.llm.LLM.run` (the same retries, parse
   retries, cache and failure isolation), :func:`~stages.enrich.openie.parse_openie`
   and :func:`~stages.enrich.openie.validate`. A passage whose answer could not be
   used after the retries counts as an empty extraction (a build records it in
   ``failures.parquet``). Answers are cached in ``benchmarks/scratch/openie_llm/``,
   so a rerun costs nothing.
2. **Quality.** The kept output is written as a HippoRAG-format file and scored
   by :mod:`benchmarks.openie_quality` (its own row in ``openie_quality.json``,
   beside the offline heuristic's row, on the same first 200 passages).
3. **Diffusion recall.** The first 200 passages are the full candidate sets
   (20 passages each) of 10 of the 100 questions. The 200 passages are built
   three times through ``strata index``: facts from the offline heuristic (no
   import), from SmolLM2 (``--openie-import`` of its file) and from GPT-3.5
   (``--openie-import`` of the published file); diffusion and the default mode
   then answer those 10 questions (Recall@k as in :mod:`benchmarks.musique_recall`).

The build takes no LLM for summaries (offline), so the three indexes differ in
their facts only.

Usage: ``python -m benchmarks.openie_llm [--passages 200]`` (needs the
``llm-server`` extra: ``make llm-server``; without it, says so and exits 0 so
that ``make bench`` goes on).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from benchmarks.common import (RESULTS, SCRATCH, build_with_cli, machine, mean_pct, recall_at,
                               run_systems, size, write_result)
from benchmarks.llama_server import MODEL_FILE, MODEL_NAME, LlamaServer, missing
from benchmarks.musique_corpus import MUSIQUE_DIR, OPENIE_FILE, passage_file
from benchmarks import openie_quality as quality

NAME = "openie_llm"
LABEL = "SmolLM2-135M-Instruct Q4_1 (llama.cpp, JSON mode)"
MODES = ("diffusion", "auto")
KS = (2, 5, 10)
# what the run taught (README: "Against Ollama, vLLM or llama.cpp"): one request at a time
# (llama.cpp's server answers one at a time; more only queue and eat into the timeout), a
# timeout that covers a whole answer on a loaded CPU, the build's own answer length
CONCURRENCY = 1
TIMEOUT_S = 120.0


def extract(passages, base_url: str, cache: Path, progress_every: int = 20) -> dict:
    """SmolLM2's OpenIE of ``passages`` through the stage's code; returns the
    validated outputs, failures and the stage's stats."""
    from strata.stages.enrich.openie import (OpenIEOut, grounded_entities, openie_request, parse_openie,
                                      unit_context, validate)
    from strata.core.llm import LLM, LLMConfig

    units = [{"node_id": passage_file(i), "text": p.unit_text, "title": p.title,
              "breadcrumb": p.title} for i, p in enumerate(passages)]
    config = LLMConfig(backend="openai", base_url=base_url, model=MODEL_NAME,
                       concurrency=CONCURRENCY, timeout_s=TIMEOUT_S)
    t0 = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done % progress_every == 0 or done == total:
            print(f"  SmolLM2 OpenIE: {done}/{total} passages, {time.monotonic() - t0:.0f}s",
                  flush=True)

    with LLM(config, cache_path=cache) as llm:
        results = llm.run([openie_request(u) for u in units], stage="openie",
                          parse=parse_openie, progress=progress)
        stats = llm.stats("openie")
    outs, failures, dropped, dropped_entities = [], [], 0, 0
    for u, r in zip(units, results):
        if not r.ok:
            failures.append({"passage": u["node_id"], "error": r.error})
            outs.append(OpenIEOut())
            continue
        ctx = unit_context(u["text"], u["title"])
        clean, n = validate(r.value, ctx)
        clean, invented = grounded_entities(clean, ctx)  # as run_openie does for a model
        dropped += n
        dropped_entities += invented
        outs.append(clean)
    return {"outs": outs, "failures": failures, "dropped_triples": dropped,
            "dropped_entities": dropped_entities,
            "seconds": round(time.monotonic() - t0, 1),
            "stats": {"calls": stats.calls, "cache_hits": stats.cache_hits,
                      "retries": stats.retries, "prompt_tokens": stats.prompt_tokens,
                      "completion_tokens": stats.completion_tokens}}


def covered_questions(n: int) -> tuple[list[str], list[set[str]]]:
    """The questions all of whose supporting passages are among the first ``n``."""
    corpus = json.loads((MUSIQUE_DIR / "corpus.json").read_text())
    key = {(c["title"], c["text"]): i for i, c in enumerate(corpus)}
    questions, gold = [], []
    for q in json.loads((MUSIQUE_DIR / "questions.json").read_text()):
        sup = [key[(p["title"], p["paragraph_text"])] for p in q["paragraphs"] if p["is_supporting"]]
        if sup and all(i < n for i in sup):
            questions.append(q["question"])
            gold.append({passage_file(i) for i in sup})
    return questions, gold


def recall(index_dir: Path, questions: list[str], gold: list[set[str]]) -> dict:
    from strata.retrieval import Index

    idx = Index.open(index_dir)
    path_of = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["path"].to_list()))
    runs = run_systems(idx, questions, list(MODES), k=30, to_unit=lambda n: path_of.get(n) or None,
                       baselines=False)
    return {name: {f"R@{k}": mean_pct([recall_at(rk, g, k) for rk, g in zip(r["ranked"], gold)])
                   for k in KS} for name, r in runs.items()}


def markdown(report: dict) -> str:
    ex = report["extraction"]
    run = ex.get("asked_in") or {**ex, "machine": report["machine"]}
    when = (f"; answers from the cache of the run of {run['machine'].get('date', '?')}"
            if "asked_in" in ex else "")
    threads = f", {run['llama_threads']} llama.cpp thread(s)" if run.get("llama_threads") else ""
    lines = [f"SmolLM2 on {report['passages']} passages: {run['seconds']} s "
             f"({run['seconds_per_passage']} s a passage, one request at a time{threads}, "
             f"{run['machine'].get('cpus', '?')} CPUs{when}), {run['stats']['prompt_tokens']} "
             f"prompt and {run['stats']['completion_tokens']} completion tokens, "
             f"{run['stats']['retries']} parse retries, {len(ex['failures'])} passages unusable "
             f"after them, {ex['dropped_triples']} triples dropped by validation (ungrounded, "
             f"half, duplicate) and {ex.get('dropped_entities', 0)} entities not in the passage.",
             "",
             "| facts from | " + " | ".join(f"{m} R@{k}" for m in MODES for k in KS) + " |",
             "|---|" + "---|" * (len(MODES) * len(KS))]
    for label, row in report["recall"].items():
        lines.append(f"| {label} | " + " | ".join(
            str(row.get(f"strata {m}", {}).get(f"R@{k}", "—")) for m in MODES for k in KS) + " |")
    lines += ["", f"Recall on the {report['questions']} questions whose 20 candidate passages "
                  f"are all among the first {report['passages']} (so these figures move by "
                  f"{100 / max(report['questions'], 1) / 2:.0f} points per passage found)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=size(200, 3))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    why = missing()
    if why:
        print(f"benchmarks.openie_llm: skipped: {why}")
        return
    n = args.passages
    work = SCRATCH / NAME
    work.mkdir(parents=True, exist_ok=True)
    passages = quality.load_passages()[:n]

    print(f"SmolLM2 OpenIE of the first {n} MuSiQue passages (llama.cpp server, {MODEL_FILE})...",
          flush=True)
    with LlamaServer(log_path=work / "llama_server.log") as server:
        ex = extract(passages, server.base_url, work / "llm.sqlite")
        threads = server.threads
    ex["seconds_per_passage"] = round(ex["seconds"] / max(n, 1), 2)
    # what the model cost is the run that asked it: kept beside the cache, so a rerun
    # answered from the cache still reports it (not its own 0 tokens in 0 s)
    asked = work / f"asked_{n}.json"
    if ex["stats"]["calls"]:
        asked.write_text(json.dumps({
            "seconds": ex["seconds"], "seconds_per_passage": ex["seconds_per_passage"],
            "stats": ex["stats"], "llama_threads": threads, "machine": machine()}, indent=1))
    elif asked.exists():
        ex["asked_in"] = json.loads(asked.read_text())
    predictions = work / "smollm2_openie.json"
    quality.save_predictions(ex["outs"], passages, predictions)
    quality.main(["--label", LABEL, "--predictions", str(predictions), "--subsets", str(n),
                  "--out", args.out])
    offline_label = quality.DEFAULT_LABEL
    previous = json.loads((Path(args.out) / f"{quality.NAME}.json").read_text())
    offline_row = previous.get("rows", {}).get(offline_label, {})
    if f"first {n}" not in offline_row.get("subsets", {}):  # the heuristic on the same passages
        subsets = sorted({n, 200} | {int(k.split()[1]) for k in offline_row.get("subsets", {})
                                     if k.startswith("first ")})
        quality.main(["--subsets", ",".join(map(str, subsets)) + ",all", "--out", args.out])

    docs = work / "docs"
    shutil.rmtree(docs, ignore_errors=True)
    docs.mkdir()
    corpus = json.loads((MUSIQUE_DIR / "corpus.json").read_text())[:n]
    for i, c in enumerate(corpus):
        (docs / passage_file(i)).write_text(f"# {c['title']}\n\n{c['text']}\n", encoding="utf-8")
    questions, gold = covered_questions(n)
    if not questions:  # fewer passages than one question's 20 candidates
        print(f"no question has all its passages among the first {n}: no recall figures")
    builds = {"offline heuristic": [], "SmolLM2-135M": ["--openie-import", str(predictions)],
              "GPT-3.5 (imported)": ["--openie-import", str(OPENIE_FILE)]}
    rec, build_s = {}, {}
    for i, (label, extra) in enumerate(builds.items() if questions else ()):
        out = work / f"index_{i}"
        shutil.rmtree(out, ignore_errors=True)
        print(f"building the {n} passages with facts from {label}...", flush=True)
        b = build_with_cli(docs, out, f"openie_llm_{i}", work, extra)
        build_s[label] = round(b["wall_s"], 1)
        rec[label] = recall(out, questions, gold)
    ex_report = {k: v for k, v in ex.items() if k != "outs"}
    report = {"benchmark": NAME, "machine": machine(), "passages": n, "questions": len(questions),
              "model": MODEL_FILE, "concurrency": CONCURRENCY, "timeout_s": TIMEOUT_S,
              "extraction": ex_report, "recall": rec, "build_seconds": build_s}
    write_result(NAME, report, markdown(report), results=Path(args.out))


if __name__ == "__main__":
    main()
