"""Build throughput against the encoder's own.

On a 2-core machine without a GPU a first build is mostly the embedding model,
so the limit to measure a build against is the model itself, fed well: one
process, the texts sorted by length, large calls. For the MuSiQue corpus (with
the imported GPT-3.5 triples) and the generated 2,000-file corpus this
benchmark, in one run:

1. builds the corpus with ``strata index`` in a child process, twice: once
   plain, for the first-build time and the encoding rate, once under
   ``STRATA_PROFILE`` for the per-step profile;
2. encodes the very texts the build encoded (read back from its vector tables)
   with the bare model in a fresh child process: a batch-size sweep on a sample
   (ONNX only: torch's forward passes have a fixed shape), then every text in one
   call at the best batch size; twice, in two children: with the OpenMP wait
   policy a build process gets (:func:`strata.core.encoders.embedding.passive_waits`:
   threads sleep when out of work), the rate the build is compared with, and
   with libgomp's default (threads spin), what the model reaches on a machine
   with nothing else to run, reported beside it (the policy's own cost);
3. reports texts/s of the plain build's embedding shards against the bare
   model's (the ratio is what matters on a shared machine: both ran in the same
   minutes; the profiled build's rate beside it), and
   the per-step profile: wall, CPU seconds of the process (all threads), CPU
   utilisation of the cores it may use, and the top costs by own time.

The load average is recorded with every figure: the machine is shared.

Usage: ``python -m benchmarks.throughput [--files 2000] [--passages N] [--no-plain]
[--only musique|corpus] [--runtime torch|torch-bf16|onnx|onnx-int8]`` (default: what
``auto`` takes on this machine; results in ``throughput.md``, another runtime's in
``throughput_<runtime>.md``)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, SCRATCH, build_with_cli, machine, size, write_result
from strata.core.encoders.embedding import AUTO, resolve_runtime
from strata.core.config.settings import RUNTIMES

TARGET_RATIO = 0.85  # the build's texts/s against the bare model's
TARGET_FIRST_BUILD_S = 100.0  # MuSiQue with the imported triples, torch
SWEEP = (16, 32, 64, 128, 256)
SWEEP_SAMPLE = size(2000, 64)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def encoded_texts(index: Path) -> list[str]:
    """Every text the build encoded, from its vector tables."""
    import lancedb

    db = lancedb.connect(str(index / "build" / "lance"))
    names = db.list_tables()
    texts: list[str] = []
    for name in getattr(names, "tables", names):
        texts += db.open_table(name).to_arrow().column("text").to_pylist()
    return texts


def bare_child(texts_file: Path, runtime: str, policy: str) -> None:
    """In a fresh process (torch's threads as a build process gets them, and its
    OpenMP wait policy when ``policy`` is ``build``; else the environment's, which
    :func:`bare_model` leaves without one): the batch-size sweep on a sample, then
    every text in one call."""
    from strata.stages.embed import ENCODE_BATCH
    from strata.core.encoders.embedding import (TORCH_RUNTIMES, EncoderSpec, encoder_threads,
                                       load_encoder, passive_waits)

    if policy == "build":
        passive_waits()  # before torch is imported: OpenMP reads it when it loads
    texts = json.loads(texts_file.read_text())
    encoder = load_encoder(EncoderSpec(runtime=runtime))
    encoder.set_threads(encoder_threads())
    model = encoder.model
    model.encode(texts[:64], batch_size=64)  # warm
    sample = random.Random(0).sample(texts, min(SWEEP_SAMPLE, len(texts)))
    sweep = {}
    # torch runs fixed passes whatever the batch size (strata.core.torch_trace.shape_batches)
    for bs in () if runtime in TORCH_RUNTIMES else SWEEP:
        t0 = time.perf_counter()
        model.encode(sample, batch_size=bs)
        sweep[bs] = round(len(sample) / (time.perf_counter() - t0), 1)
    best = max(sweep, key=sweep.get) if sweep else ENCODE_BATCH
    t0, c0 = time.perf_counter(), time.process_time()
    model.encode(texts, batch_size=best)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"texts": len(texts), "sweep_texts_per_s": sweep, "best_batch": best,
                      "build_batch": ENCODE_BATCH, "seconds": round(wall, 2),
                      "texts_per_s": round(len(texts) / wall, 1),
                      "cpu_util_pct": round(100 * cpu / wall / len(os.sched_getaffinity(0)), 1),
                      "threads": encoder_threads(), "loadavg": load(),
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default")}))


def bare_model(texts_file: Path, runtime: str, policy: str = "build") -> dict:
    """The bare model's rate on the texts of ``texts_file`` (a JSON list) in a child
    process, with the wait policy of a build process (``build``) or libgomp's
    default (``default``)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY" or policy == "build"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.throughput", "--bare", str(texts_file),
                           "--runtime", runtime, "--policy", policy], cwd=REPO, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bare model failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build(docs: Path, work: Path, name: str, extra: list[str], profile: Path | None,
          runtime: str) -> dict:
    env = {"STRATA_EMBED_RUNTIME": runtime}
    if profile is not None:
        env["STRATA_PROFILE"] = str(profile)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        before = load()
        b = build_with_cli(docs, work / "index", name, work, extra)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    b["loadavg_before"], b["loadavg_after"] = before, load()
    return b


def profile_rows(folder: Path) -> list[dict]:
    """One row per step (shards of a stage summed), in the order they started."""
    from strata.core.profiling import top_costs

    steps: dict[str, dict] = {}
    for js in sorted(folder.glob("*.json")):
        d = json.loads(js.read_text())
        row = steps.setdefault(d["step"], {"step": d["step"], "wall_s": 0.0, "cpu_s": 0.0,
                                           "cores": d["cores"], "started": d["started"],
                                           "top": []})
        row["wall_s"] += d["wall_s"]
        row["cpu_s"] += d["cpu_s"]
        row["started"] = min(row["started"], d["started"])
        prof = js.with_suffix(".prof")
        if prof.exists():
            row["top"] += top_costs(prof)
    for row in steps.values():
        row["top"] = sorted(row["top"], key=lambda r: -r["self_s"])[:3]
        row["cpu_util_pct"] = round(100 * row["cpu_s"] / max(row["wall_s"], 1e-9)
                                    / row["cores"], 1)
        row["wall_s"], row["cpu_s"] = round(row["wall_s"], 2), round(row["cpu_s"], 2)
    return sorted(steps.values(), key=lambda r: r["started"])


def encode_rate(b: dict, prof: list[dict] | None = None) -> tuple[float, float]:
    """(seconds, texts/s) of the build's embedding shards: with ``prof``, the
    profiled steps' own wall clock; else the shards' own time as the build
    recorded it (the busiest shard, from its texts read to its last vectors
    written: model load and cache writes included)."""
    st = b["stages"]
    seconds = float(st.get("embedding_shards", {}).get("seconds", 0.0))
    if prof:
        seconds = sum(r["wall_s"] for r in prof if r["step"] == "embed_shard") or seconds
    computed = b["embeddings_computed"]
    return seconds, computed / seconds if seconds else 0.0


def measure(name: str, docs: Path, work: Path, extra: list[str], runtime: str,
            plain_first: bool) -> dict:
    out: dict = {}
    if plain_first:
        print(f"{name}: first build ({runtime})...", flush=True)
        out["first_build"] = build(docs, work / "plain", name, extra, None, runtime)
        print(f"  {out['first_build']['wall_s']:.1f} s", flush=True)
    print(f"{name}: profiled first build...", flush=True)
    prof_dir = work / "profile" / "steps"
    b = build(docs, work / "profile", name, extra, prof_dir, runtime)
    rows = profile_rows(prof_dir)
    out["profiled_build"], out["profile"] = b, rows
    texts = encoded_texts(work / "profile" / "index")
    print(f"{name}: bare model on the same {len(texts)} texts...", flush=True)
    texts_file = work / "texts.json"  # written once, read by both children
    texts_file.write_text(json.dumps(texts))
    bare = bare_model(texts_file, runtime)
    out["bare_default_policy"] = bare_model(texts_file, runtime, "default")
    # the rate compared with the bare model's is the plain build's: the bare model
    # runs without cProfile, which adds to the Python around every forward pass
    profiled = encode_rate(b, rows)
    seconds, rate = encode_rate(out["first_build"]) if plain_first else profiled
    out["profiled_texts_per_s"] = round(profiled[1], 1)
    out["bare"] = bare
    out["build_encode_s"], out["build_texts_per_s"] = round(seconds, 2), round(rate, 1)
    out["ratio"] = round(rate / bare["texts_per_s"], 3) if bare["texts_per_s"] else 0.0
    wall = b["wall_s"]
    cpu = sum(r["cpu_s"] for r in rows)
    out["build_cpu_util_pct"] = round(100 * cpu / wall / (os.cpu_count() or 1), 1)
    print(f"  build {rate:.1f} texts/s, bare {bare['texts_per_s']} texts/s: "
          f"ratio {out['ratio']:.2f}", flush=True)
    return out


def tables(results: dict, runtime: str) -> str:
    lines = ["| corpus | texts encoded | build texts/s (profiled) | bare model texts/s (batch) | "
             "ratio | bare model, libgomp's default wait policy | load (1 min) | build wall s | "
             "whole build CPU % |",
             "|---|---|---|---|---|---|---|---|---|"]
    targets = []
    for name, r in results.items():
        b, bare = r["profiled_build"], r["bare"]
        lines.append(f"| {name} | {b['embeddings_computed']} | {r['build_texts_per_s']} "
                     f"({r.get('profiled_texts_per_s', '–')}) | "
                     f"{bare['texts_per_s']} ({bare['best_batch']}) | {r['ratio']:.2f} | "
                     f"{r.get('bare_default_policy', {}).get('texts_per_s', '–')} | "
                     f"{b['loadavg_before'][0]}→{bare['loadavg'][0]} | {b['wall_s']:.1f} | "
                     f"{r['build_cpu_util_pct']} |")
        targets.append((f"{name}: build ≥ {TARGET_RATIO} × the bare model's texts/s",
                        f"{r['ratio']:.2f}", r["ratio"] >= TARGET_RATIO))
        if "first_build" in r and r.get("first_build_target_s"):
            fb, limit = r["first_build"]["wall_s"], r["first_build_target_s"]
            targets.append((f"{name}: first build ≤ {limit:.0f} s ({runtime})",
                            f"{fb:.1f} s (load {r['first_build']['loadavg_before'][0]})",
                            fb <= limit))
    sweep = ["", "Bare model, batch-size sweep on a sample of "
             f"{SWEEP_SAMPLE} of the texts (texts/s):", "",
             "| corpus | " + " | ".join(str(b) for b in SWEEP) + " |",
             "|---|" + "---|" * len(SWEEP)]
    for name, r in results.items():
        sw = r["bare"]["sweep_texts_per_s"]
        sweep.append(f"| {name} | " + " | ".join(str(sw.get(str(b), sw.get(b, "–"))) for b in SWEEP)
                     + " |")
    prof = ["", "Per-step profile of the profiled builds (cProfile on; CPU = the process's, "
            "every thread; CPU % of the cores the process may use; top costs by own time):", "",
            "| corpus | step | wall s | CPU s | CPU % | top costs (own s) |",
            "|---|---|---|---|---|---|"]
    for name, r in results.items():
        for row in r["profile"]:
            if row["wall_s"] < 0.5:
                continue
            top = "; ".join(f"`{t['function']}` {t['self_s']}" for t in row["top"])
            prof.append(f"| {name} | {row['step']} | {row['wall_s']} | {row['cpu_s']} | "
                        f"{row['cpu_util_pct']} | {top} |")
    tgt = ["", "| target | measured | met |", "|---|---|---|"] + [
        f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets]
    return "\n".join(lines + sweep + prof + tgt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=size(2000, 10))
    ap.add_argument("--passages", type=int, default=0,
                    help="the first N MuSiQue passages only (default all 1,890; the import "
                         "matches what it finds)")
    ap.add_argument("--no-plain", action="store_true",
                    help="skip the plain first builds (their time and encoding rate): the "
                         "profiled ones only")
    ap.add_argument("--only", choices=("musique", "corpus"), default=size(None, "corpus"))
    # a smoke run: ONNX Runtime, the quickest to load
    ap.add_argument("--runtime", default=size(resolve_runtime(AUTO), "onnx"), choices=RUNTIMES)
    ap.add_argument("--bare", help=argparse.SUPPRESS)
    ap.add_argument("--policy", choices=("build", "default"), default="build",
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare:
        bare_child(Path(args.bare), args.runtime, args.policy)
        return
    from benchmarks.musique_corpus import OPENIE_FILE, write_corpus
    from benchmarks.synthetic_corpus import generate

    root = SCRATCH / "throughput" / args.runtime
    results: dict = {}
    if args.only in (None, "musique"):
        work = root / "musique"
        import shutil

        shutil.rmtree(work, ignore_errors=True)
        write_corpus(work / "docs")
        label = "MuSiQue (imported triples)"
        if args.passages:
            for f in sorted((work / "docs").glob("p*.md"))[args.passages:]:
                f.unlink()
            label = f"MuSiQue, first {args.passages} passages (imported triples)"
        results[label] = measure(
            "musique", work / "docs", work, ["--openie-import", str(OPENIE_FILE)], args.runtime,
            plain_first=not args.no_plain)
        results[label]["first_build_target_s"] = TARGET_FIRST_BUILD_S
    if args.only in (None, "corpus"):
        work = root / "corpus"
        import shutil

        shutil.rmtree(work, ignore_errors=True)
        n = len(generate(work / "docs", args.files))
        results[f"{n}-file corpus"] = measure("syn", work / "docs", work, [], args.runtime,
                                              plain_first=not args.no_plain)
    report = {"machine": machine(), "runtime": args.runtime, "loadavg_end": load(),
              "results": results}
    report["args"] = {"files": args.files, "passages": args.passages or 1890,
                      "plain_build": not args.no_plain}
    name = "throughput" if args.runtime == resolve_runtime(AUTO) else f"throughput_{args.runtime}"
    write_result(name, report, tables(results, args.runtime))


if __name__ == "__main__":
    main()
