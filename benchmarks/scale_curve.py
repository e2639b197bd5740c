"""How a build's cost grows with the corpus: synthetic corpora of 1k, 4k and 16k files
(by default), each built fresh, rebuilt with nothing changed, and rebuilt after 1% of
its files were edited.

Every build is ``strata index`` in a child process under :mod:`benchmarks.measure`
(wall time, peak RSS of the build process). Per size it records files/s, the
embedding stage's texts/s beside the encoder's own rate (the same model encoding a
fixed sample of texts in this process: what the stage would reach with no overhead
at all), each stage's seconds and the build's peak RSS when the stage ended (the
stage that first shows the peak set it), the index's size on disk, and the
no-change and 1% rebuild times. Then it fits each figure's growth — the exponent b
of ``figure ∝ files^b`` over the sizes, least squares in log-log — so a stage that
grows faster than linear (b clearly above 1) is named, and draws the curves
(docs/images/scale-curve.png). The peak RSS target leaves out the encoders' own
footprint (:func:`benchmarks.memory_profile.encoder_footprint`), which does not
depend on the corpus, step by step: the first build's processes are sampled and the
trace cut into its Dagster steps, and each step's peak loses the encoder that step
holds (:func:`benchmarks.memory_profile.peak_without_encoder`); both figures are
reported.

Usage: ``python -m benchmarks.scale_curve [--sizes 1000 4000 16000]``
"""

from __future__ import annotations

import argparse
import math
import shutil
import time
from pathlib import Path

from benchmarks.common import (REPO, RESULTS, SCRATCH, build_with_cli, machine, size, smoke,
                               target, targets_md, write_result)
from benchmarks.memory_profile import (encoder_footprint, encoder_shares,
                                       model_cache_without_checks, peak_without_encoder,
                                       per_step, ready_model_cache, step_windows)
from benchmarks.synthetic_corpus import edit_fraction, generate

STAGES = ("parse", "summarize", "caption", "openie", "dedup", "graph", "embed")
PLOT = size(REPO / "docs" / "images", RESULTS) / "scale-curve.png"
ENCODER_SAMPLE = 512  # texts the bare encoder is timed on


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def encoder_rate(index_dir: Path) -> float:
    """Texts/s of the index's own encoder on a sample of its texts, in this process
    (loaded first, so the model's load is not counted), shortest first as the stage
    encodes them."""
    import polars as pl

    from strata.core.encoders.embedding import EncoderSpec, load_encoder
    from strata.core.storage.layout import IndexLayout
    from strata.core.config.schema import EMBEDDED_KINDS
    from strata.stages.embed import ENCODE_BATCH

    version = IndexLayout(index_dir).resolve()
    nodes = pl.read_parquet(version / "nodes.parquet", columns=["kind", "text"])
    texts = nodes.filter(pl.col("kind").is_in(list(EMBEDDED_KINDS)))["text"].to_list()
    step = max(1, len(texts) // ENCODER_SAMPLE)  # spread over the table, not its first rows
    texts = sorted(texts[::step][:ENCODER_SAMPLE], key=len)
    import json

    runtime = json.loads((version / "manifest.json").read_text())["embedding"]["runtime"]
    enc = load_encoder(EncoderSpec(runtime=runtime), batch_size=ENCODE_BATCH)
    enc.encode(texts[:ENCODE_BATCH])  # warm
    t0 = time.perf_counter()
    for start in range(0, len(texts), ENCODE_BATCH):
        enc.encode(texts[start:start + ENCODE_BATCH])
    return len(texts) / (time.perf_counter() - t0)


def exponent(sizes: list[int], values: list[float]) -> float | None:
    """b of values ∝ sizes^b (least squares in log-log); None when it cannot be fitted."""
    pts = [(math.log(s), math.log(v)) for s, v in zip(sizes, values) if v and v > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return round(sum((x - mx) * (y - my) for x, y in pts) / den, 2) if den else None


def one_size(files: int, work: Path) -> dict:
    corpus, out = work / "corpus", work / "index"
    n = len(generate(corpus, files))
    print(f"{n} files: first build...", flush=True)
    trace: list[tuple[float, float]] = []
    # a first build of a new corpus at every size: publish checks the query encoder's
    # agreement, which a model cache that recorded it for the same probe rows skips
    env = {"STRATA_MODEL_CACHE": str(model_cache_without_checks(work))}
    fresh = build_with_cli(corpus, out, "curve", work, trace=trace, env=env)
    steps = per_step(trace, step_windows(work / "dagster_home"))  # before another run is listed
    print(f"  {fresh['wall_s']:.1f} s; no-change rebuild...", flush=True)
    same = build_with_cli(corpus, out, "curve", work, env=env)
    edited = edit_fraction(corpus, 0.01)
    print(f"  {same['wall_s']:.1f} s; {len(edited)} files edited...", flush=True)
    edit = build_with_cli(corpus, out, "curve", work, env=env)
    print(f"  {edit['wall_s']:.1f} s", flush=True)
    from strata.core.storage.layout import IndexLayout

    st = fresh["stages"]
    embed = st.get("embed", {})
    shard_s = st.get("embedding_shards", {}).get("seconds", 0) + embed.get("seconds", 0)
    computed = fresh["embeddings_computed"]
    return {
        "files": n, "wall_s": fresh["wall_s"], "files_per_s": round(n / fresh["wall_s"], 2),
        "s_per_1k_files": round(1000 * fresh["wall_s"] / n, 2),
        "peak_rss_mb": fresh["peak_rss_mb"], "steps": steps,
        "texts_embedded": computed,
        "embed_texts_per_s": round(computed / shard_s, 1) if shard_s else None,
        "encoder_texts_per_s": round(encoder_rate(out), 1),
        "index_mb": round(folder_mb(IndexLayout(out).resolve()), 1),
        "stage_s": {s: round(st.get(s, {}).get("seconds", 0.0)
                             + st.get(f"{s}_shards", {}).get("seconds", 0.0)
                             + (st.get("embedding_shards", {}).get("seconds", 0.0) if s == "embed"
                                else 0.0), 2) for s in STAGES},
        "stage_peak_rss_mb": {s: st.get(s, {}).get("peak_rss_mb") for s in STAGES},
        "no_change_s": same["wall_s"], "no_change_stage_s": {
            s: round(same["stages"].get(s, {}).get("seconds", 0.0), 2) for s in STAGES},
        "edit_1pct_s": edit["wall_s"], "edited_files": len(edited),
        "edit_share_pct": round(100 * edit["wall_s"] / fresh["wall_s"], 1),
    }


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["files"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    ax.plot(sizes, [r["s_per_1k_files"] for r in rows], "o-", label="first build")
    ax.plot(sizes, [1000 * r["no_change_s"] / r["files"] for r in rows], "s-", label="no change")
    ax.plot(sizes, [1000 * r["edit_1pct_s"] / r["files"] for r in rows], "^-", label="1% edited")
    ax.set(xscale="log", yscale="log", xlabel="files", ylabel="seconds per 1,000 files",
           title="time per file")
    ax.legend()
    ax = axes[1]
    for s in STAGES:
        ys = [r["stage_s"][s] for r in rows]
        if max(ys) > 0.5:
            ax.plot(sizes, ys, "o-", label=s)
    ax.set(xscale="log", yscale="log", xlabel="files", ylabel="seconds", title="stage time")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(sizes, [r["peak_rss_mb"] for r in rows], "o-", label="build peak RSS")
    ax.plot(sizes, [r["index_mb"] for r in rows], "s-", label="index on disk")
    ax.set(xscale="log", xlabel="files", ylabel="MB", title="memory and size")
    ax.legend()
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=size([1000, 4000, 16000], [10, 20]))
    ap.add_argument("--work", type=Path, default=SCRATCH / "scale_curve")
    args = ap.parse_args()
    # the encoders exported once, not inside the first build's step; their footprint the
    # same at every size: measured once (a smoke run leaves both to benchmarks.memory_profile)
    if not smoke():
        ready_model_cache()
    encoders = {} if smoke() else encoder_footprint()
    rows: list[dict] = []
    for files in sorted(args.sizes):
        work = args.work / str(files)
        shutil.rmtree(work, ignore_errors=True)
        rows.append(one_size(files, work))
        shutil.rmtree(work / "corpus", ignore_errors=True)
        if len(rows) >= 2:
            report(rows, encoders)  # after each size: a long run stopped early keeps what it measured


def report(rows: list[dict], encoders: dict | None = None) -> None:
    """Write the results; ``encoders``: :func:`benchmarks.memory_profile.encoder_footprint`,
    whose build and query encoders together are left out of the peak RSS target (torch
    and the models weigh the same whatever the corpus)."""
    sizes = [r["files"] for r in rows]
    growth = {"wall_s": exponent(sizes, [r["wall_s"] for r in rows]),
              "peak_rss_mb": exponent(sizes, [r["peak_rss_mb"] for r in rows]),
              "index_mb": exponent(sizes, [r["index_mb"] for r in rows]),
              "no_change_s": exponent(sizes, [r["no_change_s"] for r in rows]),
              "edit_1pct_s": exponent(sizes, [r["edit_1pct_s"] for r in rows]),
              **{f"stage {s}": exponent(sizes, [r["stage_s"][s] for r in rows]) for s in STAGES}}
    plot(rows)
    small, big = rows[0], rows[-1]
    per_file = big["s_per_1k_files"] / small["s_per_1k_files"]
    rss = big["peak_rss_mb"] / small["peak_rss_mb"]
    shares = encoder_shares(encoders or {})
    without = [peak_without_encoder(r["steps"], *shares) for r in rows]
    rss_data = without[-1] / max(1.0, without[0])
    targets = [
        target(f"time per file at {big['files']:,} within 1.3× of at {small['files']:,}",
               f"{per_file:.2f}×", per_file <= 1.3),
        target(f"no-change rebuild at {big['files']:,} files ≤ 30 s", f"{big['no_change_s']:.1f} s",
               big["no_change_s"] <= 30),
        target(f"peak RSS at {big['files']:,} ≤ 1.25× of at {small['files']:,}, the encoders "
               f"left out step by step", f"{rss_data:.2f}× ({rss:.2f}× with them)",
               rss_data <= 1.25),
    ]
    faster = [k for k, b in growth.items() if b is not None and b > 1.15]
    lines = [  # the heading and what was run come from benchmarks.report
             "Encoder rate: the same model on a sample of the index's texts in a warm process.", "",
             "| files | first build s | files/s | s per 1k files | peak RSS MB | index MB | "
             "texts embedded | embed texts/s | encoder texts/s | no-change s | 1% edit s (share) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['files']:,} | {r['wall_s']:.1f} | {r['files_per_s']} | "
                     f"{r['s_per_1k_files']} | {r['peak_rss_mb']:.0f} | {r['index_mb']} | "
                     f"{r['texts_embedded']:,} | {r['embed_texts_per_s']} | "
                     f"{r['encoder_texts_per_s']} | {r['no_change_s']:.1f} | "
                     f"{r['edit_1pct_s']:.1f} ({r['edit_share_pct']}%) |")
    lines += ["", "Stage seconds of the first build (and the build's peak RSS in MB when the stage "
              "ended):", "", "| files | " + " | ".join(STAGES) + " |",
              "|---|" + "---|" * len(STAGES)]
    for r in rows:
        lines.append(f"| {r['files']:,} | " + " | ".join(
            f"{r['stage_s'][s]} ({r['stage_peak_rss_mb'][s] or '—'})" for s in STAGES) + " |")
    lines += ["", "Growth exponent b of figure ∝ files^b (1 is linear): " + ", ".join(
        f"{k} {b}" for k, b in growth.items() if b is not None) + ".",
              "Faster than linear (b > 1.15): " + (", ".join(faster) or "nothing") + ".", "",
              "The encoders' own footprint (benchmarks.memory_profile: torch and the model "
              "encoding its longest inputs, plus the ONNX query encoder the publish step loads): "
              + ", ".join(f"{k} {v.get('encoder_mb')} MB" for k, v in (encoders or {}).items()
                          if isinstance(v, dict)) + ".",
              "Peak without them, step by step (the build's processes sampled every 20 ms and "
              "cut into its Dagster steps; from the embedding shards to the embeddings step "
              "less the build's encoder, after it less what its runtime keeps, from publish on "
              "also less the query encoder): " + ", ".join(
                  f"{r['files']:,} files {mb:.0f} MB "
                  f"(highest step peak {max((x['peak_mb'] for x in r['steps']), default=0)} MB)"
                  for r, mb in zip(rows, without)) + ".",
              "The curves: docs/images/scale-curve.png.", *targets_md(targets)]
    write_result("scale_curve", {"machine": machine(), "rows": rows, "growth": growth,
                                 "encoders": encoders, "targets": targets}, "\n".join(lines))


if __name__ == "__main__":
    main()
