"""Where a build's memory goes, step by step: synthetic corpora (1k and 4k files by
default) built fresh by ``strata index`` in a child process whose resident set is
sampled every few milliseconds, cut into the Dagster steps of the run.

Why: ``record_stage``'s ``peak_rss_mb`` is the process's high-water mark when a
stage ended, so once one step has set the peak, every later stage shows the same
figure and says nothing of its own. The sampled trace gives each step its own
figures: the resident set when it started, its largest while it ran and when it
ended. A step whose own peak grows with the corpus holds a whole table where it
could stream; a step that ends far above where it started keeps objects alive (or
leaves freed heap that the allocator never returned to the system).

It also estimates the encoder's footprint (its runtime and the model): the resident
set of a process that loaded the encoder and encoded its longest inputs minus that of
one with the same imports, and what stays once the encoder is let go (the runtime's
code and threads). The build's embeddings step lets go of it, so the peak without
the encoder takes the first from the steps that hold it and the second from the
steps after them (:func:`peak_without_encoder`).

Usage: ``python -m benchmarks.memory_profile [--sizes 1000 4000] [--work DIR] [--workers N]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.common import REPO, RESULTS, SCRATCH, cli_env, communicate_sampled, size
from benchmarks.synthetic_corpus import generate


def model_cache_without_checks(work: Path) -> Path:
    """A model cache for one build: the user's exported models (linked, not copied)
    without the recorded query-runtime agreements.

    Why: the publish step checks that the query encoder agrees with the built
    vectors and records the result under the probe's key; building the same corpus
    again would find it recorded and skip encoding the probe, so a build measured
    after another would look lighter than a first build of a new corpus."""
    from strata.core.encoders.model_cache import model_cache

    cache = work / "model_cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    real = model_cache()
    for entry in sorted(real.iterdir()) if real.is_dir() else []:
        if entry.name != "agreements":
            (cache / entry.name).symlink_to(entry.resolve())
    return cache


def build(corpus: Path, out: Path, work: Path, workers: int = 1
          ) -> tuple[list[tuple[float, float]], list[float], dict]:
    """Run ``strata index`` on ``corpus`` in a child process (``--workers``: steps in
    processes of their own); the sampled trace, the largest process at each sample
    and what the stages recorded in build/build_report.json."""
    env = {**cli_env(work), "STRATA_MODEL_CACHE": str(model_cache_without_checks(work))}
    cmd = [sys.executable, "-m", "strata.pipelines.cli", "index", str(corpus), "--corpus",
           "mem", "--out", str(out), "-q", "--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    trace: list[tuple[float, float]] = []
    largest: list[float] = []
    _, err = communicate_sampled(proc, trace, largest)
    if proc.returncode != 0:
        raise RuntimeError(f"build failed:\n{err[-4000:]}")
    return trace, largest, json.loads((out / "build" / "build_report.json").read_text())


def step_windows(dagster_home: Path) -> list[tuple[str, float, float]]:
    """(step, start, end) of every step of the instance's latest run, from its event log."""
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    import dagster as dg

    instance = dg.DagsterInstance.get()
    run = instance.get_runs(limit=1)[0]
    starts: dict[str, float] = {}
    out: list[tuple[str, float, float]] = []
    for record in instance.all_logs(run.run_id):
        event = record.dagster_event
        if event is None or not record.step_key:
            continue
        if event.event_type_value == "STEP_START":
            starts[record.step_key] = record.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE", "STEP_SKIPPED") \
                and record.step_key in starts:
            out.append((record.step_key, starts[record.step_key], record.timestamp))
    return sorted(out, key=lambda w: w[1])


def per_step(trace: list[tuple[float, float]], windows: list[tuple[str, float, float]]) -> list[dict]:
    """Each step's resident set at its start, its largest while it ran, and at its end."""
    rows = []
    for step, t0, t1 in windows:
        inside = [mb for t, mb in trace if t0 <= t <= t1]
        before = [mb for t, mb in trace if t <= t0]
        after = [mb for t, mb in trace if t >= t1]
        start = before[-1] if before else (inside[0] if inside else 0.0)
        end = after[0] if after else (inside[-1] if inside else start)
        rows.append({"step": step, "seconds": round(t1 - t0, 2), "start_mb": round(start),
                     "peak_mb": round(max(inside, default=start)), "end_mb": round(end)})
    return rows


# What every child below starts with: the imports of a build process and the build's
# and the query's encoders as the settings pick them (STRATA_EMBED_RUNTIME), the
# query's being the one publish readies (none beyond the build's for an ONNX build).
ENCODERS = """
import resource, sys
import dagster, lancedb, polars, pyarrow  # what every build process imports
from strata.core.config import settings
from strata.core.encoders.embedding import EncoderSpec, load_encoder, resolve_runtime
from strata.core.encoders.query_runtime import query_spec
build_spec = EncoderSpec(runtime=resolve_runtime(settings.load(settings.EmbedSettings).runtime))
query = query_spec(build_spec)
query = None if query.same_runtime(build_spec) else query
"""

# Exports (and traces) the encoders into the model cache, so that no profiled build
# pays for it inside a step: on an empty cache the first build's embedding shard
# exported the model and that, not the corpus, set its peak.
READY = ENCODERS + """
load_encoder(build_spec).encode(["ready"])
if query is not None:
    load_encoder(query).encode(["ready"])
"""

FOOTPRINT = ENCODERS + """
import gc
import psutil
from strata.core.encoders.embedding import release_encoders
from strata.core.memory import release_freed_memory
mb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
now = lambda: psutil.Process().memory_info().rss / 2**20
bare, before = mb(), now()
if sys.argv[1] != "query":  # the build's encoder at its longest inputs: 16 texts of 256 tokens
    load_encoder(build_spec, batch_size=16).encode(["word " * 400] * 16)
if sys.argv[1] != "build" and query is not None:
    load_encoder(query).encode(["word " * 400] * 16)
peak = mb()
release_encoders()  # as the build's embeddings step does: what stays is the runtime's own
gc.collect()
release_freed_memory()
print(bare, peak, now() - before, sys.argv[1], build_spec.runtime)
"""


def child(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh interpreter with the repository importable."""
    return subprocess.run([sys.executable, "-c", script, *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def ready_model_cache() -> None:
    """Export the encoders the builds will load into the model cache, in a process
    of its own, before any build is measured."""
    res = child(READY)
    if res.returncode != 0:
        raise RuntimeError(f"could not ready the model cache:\n{res.stderr[-2000:]}")


def encoder_footprint() -> dict:
    """The encoders' own share of a build's peak (MB): the peak RSS of a process
    that imported what a build imports and then loaded the build's encoder (the
    runtime the settings pick) and encoded its longest inputs, minus the same
    process's before loading it; likewise for the query encoder that the publish
    step loads (where it differs from the build's), and for both in one process,
    as a build holds them."""
    out: dict = {}
    for mode in ("build", "query", "both"):
        res = child(FOOTPRINT, mode)
        if res.returncode != 0:
            return {"error": res.stderr[-500:]}
        bare, loaded, kept, _, runtime = res.stdout.split()[-5:]
        out["runtime"] = runtime
        out[mode] = {"before_mb": round(float(bare)),
                     "peak_mb": round(float(loaded)),
                     "encoder_mb": round(float(loaded) - float(bare)),
                     "kept_mb": round(float(kept))}
    return out


def encoder_shares(footprint: dict) -> tuple[float, float, float]:
    """(the build encoder's MB, what its runtime keeps once let go, the query
    encoder's MB) from :func:`encoder_footprint`: what :func:`peak_without_encoder`
    takes off; zeros for what was not measured."""
    def mb(mode: str, field: str) -> float:
        return float(footprint.get(mode, {}).get(field, 0.0))

    return mb("build", "encoder_mb"), mb("build", "kept_mb"), mb("query", "encoder_mb")


def peak_without_encoder(steps: list[dict], encoder_mb: float, kept_mb: float,
                         query_mb: float = 0.0) -> float:
    """A build's peak less the encoders' share, step by step: from the first embedding
    shard until the embeddings step the process holds the build's encoder
    (``encoder_mb``); from the embeddings step on, which lets it go, what the runtime
    keeps once it is let go (``kept_mb``: its code and its threads); the publish step
    also loads the query encoder where it is another runtime (``query_mb``), which
    stays to the end of the build; before the shards, nothing.

    Why step by step: no step holds both encoders whole, so taking their sum off
    the peak (whichever step set it) takes off more than a step ever held, most of
    all from the smaller build's, and overstates how the rest grows."""
    out, held = 0.0, 0.0
    for s in steps:
        if "embed_shard" in s["step"]:
            held = encoder_mb
        elif s["step"] == "embeddings":
            held = kept_mb
        elif s["step"] == "index_manifest":
            held = kept_mb + query_mb
        out = max(out, s["peak_mb"] - held)
    return out


def one_size(files: int, work: Path, workers: int = 1) -> dict:
    """Profile a fresh build of a synthetic corpus of ``files`` files."""
    corpus, out = work / "corpus", work / "index"
    if not corpus.exists():
        generate(corpus, files)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work / "dagster_home", ignore_errors=True)
    (work / "corpora.yaml").unlink(missing_ok=True)
    trace, largest, report = build(corpus, out, work, workers)
    steps = per_step(trace, step_windows(work / "dagster_home"))
    return {"files": files, "workers": workers, "peak_mb": round(max(mb for _, mb in trace)),
            "largest_process_mb": round(max(largest, default=0)), "steps": steps,
            "stage_peak_rss_mb": {k: v.get("peak_rss_mb") for k, v in report.items()
                                  if isinstance(v, dict) and "peak_rss_mb" in v}}


def markdown(rows: list[dict]) -> str:
    """One table per size: each step's resident set at start, peak and end (MB)."""
    lines = []
    for r in rows:
        head = f"### {r['files']:,} files: peak {r['peak_mb']} MB"
        if r.get("workers", 1) > 1:
            head += (f" in all, {r['largest_process_mb']} MB the largest process "
                     f"(--workers {r['workers']})")
        lines += [head, "",
                  "| step | s | start MB | peak MB | end MB |", "|---|---|---|---|---|"]
        lines += [f"| {s['step']} | {s['seconds']} | {s['start_mb']} | {s['peak_mb']} | "
                  f"{s['end_mb']} |" for s in r["steps"]]
        lines += ["", "record_stage peak_rss_mb: " + json.dumps(r["stage_peak_rss_mb"]), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=size([1000, 4000], [10]))
    ap.add_argument("--work", type=Path, default=SCRATCH / "memory_profile")
    ap.add_argument("--json", type=Path, default=size(None, RESULTS / "memory_profile.json"),
                    help="also write the figures here")
    ap.add_argument("--no-encoder", action="store_true", help="skip the encoder's footprint")
    ap.add_argument("--workers", type=int, default=1,
                    help="strata index --workers: 2 or more runs every step in a process of its own")
    args = ap.parse_args()
    ready_model_cache()
    rows = [one_size(n, args.work / str(n), args.workers) for n in args.sizes]
    result = {"rows": rows}
    if not args.no_encoder:
        result["encoder"] = encoder_footprint()
    print(markdown(rows))
    if len(rows) >= 2:
        print(f"peak ratio {rows[-1]['files']}/{rows[0]['files']}: "
              f"{rows[-1]['peak_mb'] / rows[0]['peak_mb']:.2f}×")
        if args.workers > 1:
            print(f"largest process ratio: "
                  f"{rows[-1]['largest_process_mb'] / rows[0]['largest_process_mb']:.2f}×")
    if "encoder" in result:
        print("encoder footprint:", json.dumps(result["encoder"]))
        if len(rows) >= 2 and "encoder_mb" in result["encoder"].get("build", {}):
            shares = encoder_shares(result["encoder"])
            first, last = (peak_without_encoder(r["steps"], *shares) for r in (rows[0], rows[-1]))
            print(f"peak without the encoders ({shares[0]:.0f} MB while the shards "
                  f"hold the build's, {shares[1]:.0f} MB kept once let go, the query "
                  f"encoder's {shares[2]:.0f} MB in publish): {first:.0f} and "
                  f"{last:.0f} MB, ratio {last / first:.2f}×")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
