"""The runtimes of all-MiniLM-L6-v2 against torch in float32.

For torch (float32), torch-bf16 (bfloat16 weights and matmuls), onnx (float32)
and onnx-int8 (dynamic quantisation, per-channel weight scales), both ONNX
graphs exported here from the packaged weights:

* agreement: cosine between each runtime's vectors and torch's, for the 1,890
  MuSiQue passages;
* bare speed: texts/s on those passages (sorted, batches of 64), and one
  query's encoding time, p50 over the 100 MuSiQue questions, warm;
* MuSiQue dense recall: the 100 questions against the 1,890 passage vectors
  (exact cosine, a passage per vector: the part of retrieval a runtime
  changes), R@2/5/10 with HippoRAG's gold;
* OpenHarmony: the 51 pages built with ``strata index --embed-runtime R``
  (build time), then the dev set with every mode, each index queried with the
  runtime that built it (latency warm, query embedding included);
* with ``--musique-builds``: the full MuSiQue build (imported triples) per
  runtime and every mode's recall on it (about 10 minutes a build on 2 cores).

The load average is recorded with every figure: the 2 cores are shared.

Usage: ``python -m benchmarks.onnx_runtime [--runtimes torch,torch-bf16,onnx,onnx-int8]
[--musique-builds]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import (REPO, RESULTS, SCRATCH, build_with_cli, machine, mean_pct,
                               recall_at, size, write_result)
from strata.core.config.settings import RUNTIMES  # torch first: the reference

MUSIQUE_MODES = ("flat", "hybrid", "hierarchical", "auto", "diffusion")
OH_MODES = ("flat", "hybrid", "hierarchical", "auto")
TARGET_P50_MS = 6.0  # flat and hierarchical, warm, query embedding included
RECALL_NOISE = 1.0  # points: "within 1 point of torch"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def encoder_child(passages_file: Path, runtime: str, out: Path) -> None:
    """One runtime in a fresh process: the passages' vectors (and texts/s), the
    questions' vectors, one query's p50."""
    import numpy as np

    from benchmarks.musique_recall import gold_sets
    from strata.core.encoders.embedding import EncoderSpec, load_encoder

    texts = json.loads(passages_file.read_text())
    questions, _ = gold_sets()
    enc = load_encoder(EncoderSpec(runtime=runtime), batch_size=64)
    enc.encode(texts[:64])
    t0 = time.perf_counter()
    vectors = enc.encode(texts)  # the encoder's own path: bf16's vectors normalised in float32
    rate = len(texts) / (time.perf_counter() - t0)
    enc.encode(["warm the query path"])
    ms, qv = [], []
    for q in questions:
        t0 = time.perf_counter()
        qv.append(enc.encode([q])[0])
        ms.append((time.perf_counter() - t0) * 1000)
    np.savez(out, passages=np.asarray(vectors, np.float32), questions=np.asarray(qv, np.float32))
    print(json.dumps({"texts_per_s": round(rate, 1),
                      "query_p50_ms": round(statistics.median(ms), 2), "loadavg": load()}))


def bare(texts: list[str], runtime: str, work: Path) -> tuple[dict, dict]:
    import numpy as np

    f, out = work / "passages.json", work / f"vectors_{runtime}.npz"
    f.write_text(json.dumps(texts))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.onnx_runtime", "--child", str(f),
                           "--runtime", runtime, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{runtime} encoder failed:\n{proc.stderr[-3000:]}")
    data = np.load(out)
    return json.loads(proc.stdout.strip().splitlines()[-1]), {k: data[k] for k in data.files}


def dense_recall(vectors: dict, files: list[str]) -> dict:
    """R@k of the questions against the passage vectors (exact cosine)."""
    from benchmarks.musique_recall import KS, gold_sets

    _, gold = gold_sets()
    scores = vectors["questions"] @ vectors["passages"].T
    ranked = [[files[i] for i in row.argsort()[::-1][:max(KS)]] for row in scores]
    return {f"R@{k}": mean_pct([recall_at(r, g, k) for r, g in zip(ranked, gold)]) for k in KS}


def build(docs: Path, work: Path, name: str, runtime: str, extra: list[str]) -> dict:
    before = load()
    b = build_with_cli(docs, work / "index", name, work, [*extra, "--embed-runtime", runtime])
    b.pop("stages", None)
    b["loadavg_before"], b["loadavg_after"] = before, load()
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # a smoke run: the reference and the runtime furthest from it
    ap.add_argument("--runtimes", default=",".join(size(RUNTIMES, (RUNTIMES[0], RUNTIMES[-1]))),
                    help="the runtimes to measure; the others keep their rows from the last "
                         "report (cosines against the last torch vectors)")
    ap.add_argument("--musique-builds", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--runtime", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        encoder_child(Path(args.child), args.runtime, Path(args.out))
        return
    from benchmarks import musique_recall, openharmony_dev
    from benchmarks.musique_corpus import (CORPUS_FILE, OPENIE_FILE, passage_count, passage_file,
                                          write_corpus)

    root = SCRATCH / "onnx_runtime"
    root.mkdir(parents=True, exist_ok=True)
    corpus = json.loads(CORPUS_FILE.read_text())[:passage_count()]
    passages = [f"{c['title']}\n{c['text']}" for c in corpus]
    files = [passage_file(i) for i in range(len(corpus))]
    questions = openharmony_dev.dev_questions()
    report: dict = {"machine": machine(), "runtimes": {}}
    wanted = args.runtimes.split(",")
    last = RESULTS / "onnx_runtime.json"
    kept = {k: v for k, v in (json.loads(last.read_text())["runtimes"].items()
                              if last.exists() else ()) if k not in wanted}
    reference = None
    if "torch" not in wanted and (root / "vectors_torch.npz").exists():
        import numpy as np

        reference = dict(np.load(root / "vectors_torch.npz"))
    for runtime in sorted(wanted, key=RUNTIMES.index):
        r: dict = {}
        print(f"{runtime}: encoder on the MuSiQue passages and questions...", flush=True)
        r["bare"], vectors = bare(passages, runtime, root)
        if reference is None:
            reference = vectors  # the first runtime (torch) is the reference
        cos = (vectors["passages"] * reference["passages"]).sum(1)
        r["agreement"] = {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5),
                          "p1": round(float(sorted(cos)[len(cos) // 100]), 5)}
        r["musique_dense"] = dense_recall(vectors, files)
        print(f"  {r['bare']}, agreement {r['agreement']}, {r['musique_dense']}", flush=True)
        oh = root / runtime / "openharmony"
        shutil.rmtree(oh, ignore_errors=True)
        print(f"{runtime}: OpenHarmony build and dev set...", flush=True)
        r["openharmony_build"] = build(openharmony_dev.oh_docs(), oh, "openharmony", runtime, [])
        os.environ.pop("STRATA_EMBED_RUNTIME", None)  # each index embeds with its own runtime
        r["openharmony"] = openharmony_dev.evaluate(oh / "index", questions, OH_MODES)
        if args.musique_builds:
            docs = root / "musique_docs"
            if not docs.exists():
                write_corpus(docs)
            mq = root / runtime / "musique"
            shutil.rmtree(mq, ignore_errors=True)
            print(f"{runtime}: MuSiQue first build...", flush=True)
            r["musique_build"] = build(docs, mq, "musique", runtime,
                                       ["--openie-import", str(OPENIE_FILE)])
            r["musique"] = musique_recall.evaluate(mq / "index", MUSIQUE_MODES)
        r["loadavg_end"] = load()
        report["runtimes"][runtime] = r
        (RESULTS / "onnx_runtime.partial.json").write_text(json.dumps(report, indent=1))
    if kept:  # the runtimes not measured this time, as they were, in the registry's order
        report["kept_from_earlier_run"] = sorted(kept)
        report["runtimes"] = {k: {**report["runtimes"], **kept}[k] for k in RUNTIMES
                              if k in report["runtimes"] or k in kept}
    write_result("onnx_runtime", report, markdown(report))
    (RESULTS / "onnx_runtime.partial.json").unlink(missing_ok=True)


def markdown(report: dict) -> str:
    rts = report["runtimes"]
    torch = rts.get("torch")
    lines = ["| runtime | cosine to torch: mean / lowest | bare texts/s | one query ms (p50) | "
             "MuSiQue dense R@2 | R@5 | R@10 | OpenHarmony build s | load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rts.items():
        a, b, d = r["agreement"], r["bare"], r["musique_dense"]
        lines.append(f"| {name} | {a['mean']:.4f} / {a['min']:.4f} | {b['texts_per_s']} | "
                     f"{b['query_p50_ms']} | {d['R@2']} | {d['R@5']} | {d['R@10']} | "
                     f"{r['openharmony_build']['wall_s']:.1f} | "
                     f"{b['loadavg']}→{r['loadavg_end']} |")
    lines += ["", "| runtime | OpenHarmony system | file Hit@1 | file Hit@3 | section R@1 | "
              "section R@5 | p50 ms | p95 ms |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rts.items():
        for mode, o in r["openharmony"].items():
            lines.append(f"| {name} | {mode} | {o['file Hit@1']} | {o['file Hit@3']} | "
                         f"{o['section R@1']} | {o['section R@5']} | {o['p50_ms']} | "
                         f"{o['p95_ms']} |")
    if any("musique" in r for r in rts.values()):
        lines += ["", "| runtime | MuSiQue build s | system | R@2 | R@5 | R@10 | p50 ms |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in rts.items():
            for mode, m in r.get("musique", {}).items():
                lines.append(f"| {name} | {r['musique_build']['wall_s']:.1f} | {mode} | "
                             f"{m['R@2']} | {m['R@5']} | {m['R@10']} | {m['p50_ms']} |")
    targets = []
    for name, r in rts.items():
        if name == "torch" or torch is None:
            continue
        for mode in ("strata flat", "strata hierarchical"):
            p50 = r["openharmony"].get(mode, {}).get("p50_ms")
            if p50 is not None:
                targets.append((f"{name}: OpenHarmony {mode} p50 ≤ {TARGET_P50_MS:.0f} ms "
                                "(query embedding included)", p50, p50 <= TARGET_P50_MS))
        for k in ("R@2", "R@5", "R@10"):
            diff = r["musique_dense"][k] - torch["musique_dense"][k]
            targets.append((f"{name}: MuSiQue dense {k} within {RECALL_NOISE:.0f} point of torch",
                            f"{diff:+.1f}", diff >= -RECALL_NOISE))
        for metric in ("file Hit@1", "section R@5"):
            worst = min((r["openharmony"][m][metric] - torch["openharmony"][m][metric], m)
                        for m in r["openharmony"] if m in torch["openharmony"])
            targets.append((f"{name}: OpenHarmony {metric} within {RECALL_NOISE:.0f} point of "
                            "torch (every system)", f"{worst[0]:+.1f} ({worst[1]})",
                            worst[0] >= -RECALL_NOISE))
        if "musique_build" in r and "musique_build" in torch:
            speed = torch["musique_build"]["wall_s"] / r["musique_build"]["wall_s"]
            targets.append((f"{name}: MuSiQue first build ≥ 2× faster than torch",
                            f"{speed:.2f}×", speed >= 2))
    lines += ["", "| target | measured | met |", "|---|---|---|"] + [
        f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets]
    if report.get("kept_from_earlier_run"):
        lines += ["", f"Rows of {', '.join(report['kept_from_earlier_run'])}: from the previous "
                      "run of this benchmark (not measured again this time)."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
