"""The ONNX Runtime runtimes of all-MiniLM-L6-v2 against torch (issue 21).

For torch, onnx (float32) and onnx-int8 (dynamic quantisation, per-channel
weight scales), all exported here from the packaged weights:

* agreement: cosine between each runtime's vectors and torch's, on a sample of
  the MuSiQue build's own texts (passages, entities, facts);
* bare speed: texts/s on those texts (sorted, one call), and one query's
  encoding time, p50 over 200 distinct queries, warm;
* builds: the first MuSiQue build (with the imported triples) and the
  OpenHarmony build, each with ``strata index --embed-runtime R``;
* retrieval: recall on MuSiQue-100 and the OpenHarmony dev set, each index
  queried with the runtime that built it, latencies warm with the query
  embedding included (the same evaluation as ``benchmarks.musique_recall`` and
  ``benchmarks.openharmony_dev``).

The load average is recorded with every figure: the 2 cores are shared.

Usage: ``python -m benchmarks.onnx_runtime [--runtimes torch,onnx,onnx-int8]
[--reuse-torch DIR]`` (``--reuse-torch``: ``benchmarks.throughput``'s plain MuSiQue
build folder, whose index and first-build figures stand for torch's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.common import REPO, RESULTS, SCRATCH, build_with_cli, machine, write_result

RUNTIMES = ("torch", "onnx", "onnx-int8")
MUSIQUE_MODES = ("flat", "hybrid", "hierarchical", "auto", "diffusion")
OH_MODES = ("flat", "hybrid", "hierarchical", "auto")
SAMPLE = 2000
TARGET_P50_MS = 6.0  # flat and hierarchical, warm, query embedding included
RECALL_NOISE = 1.0  # points: "within 1 point of torch"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def encoder_child(texts_file: Path, runtime: str, out: Path) -> None:
    """Vectors of the sample, texts/s, and one query's p50 for one runtime."""
    import numpy as np

    from strata.embedding import EncoderSpec, load_encoder

    texts = json.loads(texts_file.read_text())
    enc = load_encoder(EncoderSpec(runtime=runtime))
    enc.model.encode(texts[:64], batch_size=64)
    t0 = time.perf_counter()
    vectors = enc.model.encode(texts, batch_size=64)
    rate = len(texts) / (time.perf_counter() - t0)
    rng = random.Random(5)
    queries = [" ".join(rng.sample(texts[i].split(), min(8, len(texts[i].split()))))
               + f" {i}" for i in range(200)]
    enc.encode(["warm the query path"])
    ms = []
    for q in queries:
        t0 = time.perf_counter()
        enc.encode([q])
        ms.append((time.perf_counter() - t0) * 1000)
    np.save(out, np.asarray(vectors, dtype=np.float32))
    print(json.dumps({"texts_per_s": round(rate, 1), "query_p50_ms": round(statistics.median(ms), 2),
                      "loadavg": load()}))


def bare(texts: list[str], runtime: str, work: Path) -> tuple[dict, object]:
    import numpy as np

    f, out = work / "sample.json", work / f"vectors_{runtime}.npy"
    f.write_text(json.dumps(texts))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.onnx_runtime", "--child", str(f),
                           "--runtime", runtime, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{runtime} encoder failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out)


def index_texts(index: Path) -> list[str]:
    import lancedb

    db = lancedb.connect(str(index / "build" / "lance"))
    names = db.list_tables()
    texts: list[str] = []
    for name in getattr(names, "tables", names):
        texts += db.open_table(name).to_arrow().column("text").to_pylist()
    return texts


def build(docs: Path, work: Path, name: str, runtime: str, extra: list[str]) -> dict:
    before = load()
    b = build_with_cli(docs, work / "index", name, work, [*extra, "--embed-runtime", runtime])
    b.pop("stages", None)
    b["loadavg_before"], b["loadavg_after"] = before, load()
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--reuse-torch", default=None)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--runtime", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        encoder_child(Path(args.child), args.runtime, Path(args.out))
        return
    from benchmarks import musique_recall, openharmony_dev
    from benchmarks.musique_corpus import OPENIE_FILE, write_corpus

    root = SCRATCH / "onnx_runtime"
    root.mkdir(parents=True, exist_ok=True)
    docs = root / "musique_docs"
    if not docs.exists():
        write_corpus(docs)
    questions = yaml.safe_load(openharmony_dev.DEV_SET.read_text())
    report: dict = {"machine": machine(), "runtimes": {}}
    texts: list[str] | None = None
    reference = None
    for runtime in args.runtimes.split(","):
        r: dict = {}
        mq = root / runtime / "musique"
        reuse = Path(args.reuse_torch) if runtime == "torch" and args.reuse_torch else None
        if reuse is not None and (reuse / "index" / "CURRENT").exists():
            mq_index = reuse / "index"  # benchmarks.throughput's plain first build
            done = json.loads((RESULTS / "throughput.json").read_text())["results"]
            r["musique_build"] = {k: v for k, v in done["MuSiQue (imported triples)"]
                                  ["first_build"].items() if k != "stages"}
        else:
            shutil.rmtree(mq, ignore_errors=True)
            print(f"{runtime}: MuSiQue first build...", flush=True)
            r["musique_build"] = build(docs, mq, "musique", runtime,
                                       ["--openie-import", str(OPENIE_FILE)])
            mq_index = mq / "index"
        print(f"  {r['musique_build']['wall_s']:.1f} s", flush=True)
        oh = root / runtime / "openharmony"
        shutil.rmtree(oh, ignore_errors=True)
        print(f"{runtime}: OpenHarmony build...", flush=True)
        r["openharmony_build"] = build(openharmony_dev.OH_DIR, oh, "openharmony", runtime, [])
        if texts is None:
            everything = index_texts(mq_index)
            texts = random.Random(0).sample(everything, min(SAMPLE, len(everything)))
        print(f"{runtime}: bare encoder...", flush=True)
        r["bare"], vectors = bare(texts, runtime, root)
        if reference is None:
            reference = vectors  # the first runtime (torch) is the reference
        cos = (vectors * reference).sum(1)
        r["agreement"] = {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5),
                          "p1": round(float(sorted(cos)[len(cos) // 100]), 5)}
        print(f"{runtime}: retrieval...", flush=True)
        os.environ.pop("STRATA_EMBED_RUNTIME", None)  # each index embeds with its own runtime
        r["musique"] = musique_recall.evaluate(mq_index, MUSIQUE_MODES)
        r["openharmony"] = openharmony_dev.evaluate(oh / "index", questions, OH_MODES)
        r["loadavg_eval"] = load()
        report["runtimes"][runtime] = r
        (RESULTS / "onnx_runtime.partial.json").write_text(json.dumps(report, indent=1))
    write_result("onnx_runtime", report, markdown(report))
    (RESULTS / "onnx_runtime.partial.json").unlink(missing_ok=True)


def markdown(report: dict) -> str:
    rts = report["runtimes"]
    torch = rts.get("torch")
    lines = ["| runtime | cosine to torch: mean / lowest | bare texts/s | one query ms (p50) | "
             "MuSiQue first build s | OpenHarmony build s | load |",
             "|---|---|---|---|---|---|---|"]
    for name, r in rts.items():
        a, b = r["agreement"], r["bare"]
        lines.append(f"| {name} | {a['mean']:.4f} / {a['min']:.4f} | {b['texts_per_s']} | "
                     f"{b['query_p50_ms']} | {r['musique_build']['wall_s']:.1f} | "
                     f"{r['openharmony_build']['wall_s']:.1f} | "
                     f"{r['musique_build'].get('loadavg_before', '?')}→{r['loadavg_eval']} |")
    lines += ["", "| runtime | MuSiQue system | R@2 | R@5 | R@10 | p50 ms | OpenHarmony file Hit@1 | "
              "section R@5 | p50 ms |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rts.items():
        for mode in ("dense kNN",) + tuple(f"strata {m}" for m in MUSIQUE_MODES):
            m, o = r["musique"].get(mode, {}), r["openharmony"].get(mode, {})
            lines.append(f"| {name} | {mode} | {m.get('R@2', '—')} | {m.get('R@5', '—')} | "
                         f"{m.get('R@10', '—')} | {m.get('p50_ms', '—')} | "
                         f"{o.get('file Hit@1', '—')} | {o.get('section R@5', '—')} | "
                         f"{o.get('p50_ms', '—')} |")
    targets = []
    for name, r in rts.items():
        if name == "torch" or torch is None:
            continue
        for mode in ("strata flat", "strata hierarchical"):
            for bench in ("musique", "openharmony"):
                p50 = r[bench].get(mode, {}).get("p50_ms")
                if p50 is not None:
                    targets.append((f"{name}: {bench} {mode} p50 ≤ {TARGET_P50_MS:.0f} ms", p50,
                                    p50 <= TARGET_P50_MS))
        for bench, metric in (("musique", "R@5"), ("musique", "R@2"),
                              ("openharmony", "section R@5"), ("openharmony", "file Hit@1")):
            worst = min((r[bench][m][metric] - torch[bench][m][metric], m)
                        for m in r[bench] if m in torch[bench] and metric in r[bench][m])
            targets.append((f"{name}: {bench} {metric} within {RECALL_NOISE:.0f} point of torch "
                            "(every system)", f"{worst[0]:+.1f} ({worst[1]})",
                            worst[0] >= -RECALL_NOISE))
        speed = torch["musique_build"]["wall_s"] / r["musique_build"]["wall_s"]
        targets.append((f"{name}: MuSiQue first build ≥ 2× faster than torch", f"{speed:.2f}×",
                        speed >= 2))
    lines += ["", "| target | measured | met |", "|---|---|---|"] + [
        f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
