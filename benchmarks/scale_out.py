"""Build throughput with 1 and 2 worker processes, and what editing 1% of a
2,000-file corpus costs.

The corpus is generated (``benchmarks.synthetic_corpus``: Markdown pages and
Python modules in the sample corpus's vocabulary, fixed seed). Every build is
``strata index`` in a child process under ``benchmarks.measure``:

1. full build, in process (one worker);
2. full build of the same folder with ``--workers 2`` (Dagster's multiprocess
   executor; the parse and embedding shards run side by side);
3. rebuild of (1) with nothing changed;
4. rebuild of (1) after editing 1% of the files.

Usage: ``python -m benchmarks.scale_out [--files 2000]``
"""

from __future__ import annotations

import argparse
import shutil

from benchmarks.common import SCRATCH, build_with_cli, machine, size, write_result
from benchmarks.synthetic_corpus import edit_fraction, generate

TARGET_EDIT_SHARE = 5.0  # percent of a full build's time


def _row(name: str, workers: int, b: dict, files: int) -> str:
    st = b["stages"]
    shards = st.get("embedding_shards", {})
    rss = f"{b['peak_rss_mb']:.0f}" if workers == 1 else "—"  # forked steps: not our children
    return (f"| {name} | {workers} | {b['wall_s']:.1f} | {files / b['wall_s']:.1f} | "
            f"{rss} | {b['files_parsed']} | {b['embeddings_computed']} | "
            f"{shards.get('processes', 0)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=size(2000, 12))
    ap.add_argument("--edit", type=float, default=0.01, help="share of files edited")
    args = ap.parse_args()

    work = SCRATCH / "scale_out"
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    n = len(generate(corpus, args.files))
    print(f"generated {n} files in {corpus}", flush=True)

    one = build_with_cli(corpus, work / "w1" / "index", "syn", work / "w1")
    print(f"full build, 1 worker: {one['wall_s']:.1f}s", flush=True)
    two = build_with_cli(corpus, work / "w2" / "index", "syn", work / "w2", ["--workers", "2"])
    print(f"full build, 2 workers: {two['wall_s']:.1f}s", flush=True)
    shutil.rmtree(work / "w2", ignore_errors=True)
    same = build_with_cli(corpus, work / "w1" / "index", "syn", work / "w1")
    print(f"unchanged rebuild: {same['wall_s']:.1f}s", flush=True)
    edited = edit_fraction(corpus, args.edit)
    inc = build_with_cli(corpus, work / "w1" / "index", "syn", work / "w1")
    print(f"{len(edited)} files edited: {inc['wall_s']:.1f}s", flush=True)

    share = 100.0 * inc["wall_s"] / one["wall_s"]
    speedup = one["wall_s"] / two["wall_s"]
    table = "\n".join([
        "| build | worker processes | wall s | files/s | peak RSS MB | files parsed | "
        "embeddings computed | embedding shard processes |",
        "|---|---|---|---|---|---|---|---|",
        _row("full build", 1, one, n),
        _row("full build", 2, two, n),
        _row("rebuild, nothing changed", 1, same, n),
        _row(f"rebuild, {len(edited)} files ({args.edit:.0%}) edited", 1, inc, n),
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| {args.edit:.0%} edit ≤ {TARGET_EDIT_SHARE:.0f}% of a full build's time | "
        f"{share:.1f}% ({inc['wall_s']:.1f} s of {one['wall_s']:.1f} s) | "
        f"{'yes' if share <= TARGET_EDIT_SHARE else '**no**'} |",
        f"| 2 workers vs 1 (throughput) | {speedup:.2f}× | — |",
    ])
    report = {"machine": machine(), "files": n, "edited": edited,
              "builds": {"one_worker": one, "two_workers": two, "unchanged": same,
                         "edited": inc},
              "edit_share_pct": round(share, 2), "speedup_two_workers": round(speedup, 3)}
    write_result("scale_out", report, table)


if __name__ == "__main__":
    main()
