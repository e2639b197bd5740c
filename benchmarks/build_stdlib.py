"""Build figures for a real code corpus: this Python's standard library.

Runs `strata index` (the real Dagster assets) in a child process on the stdlib
folder, without site-packages and test suites (about 19k code nodes), then
again with nothing changed, and prints wall time, peak RSS and what was
computed vs reused (with ``--json FILE``, also writes them there). A smoke run
builds one small package of it. Usage: python -m benchmarks.build_stdlib
[--out DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from benchmarks.common import RESULTS, size

EXCLUDES = ["site-packages/**", "test/**", "**/test/**", "**/tests/**", "**/idle_test/**"]


def run_index(root: str, out: Path, home: Path, corpora: Path) -> dict:
    cmd = [sys.executable, "-m", "strata.pipelines.cli", "index", root, "--corpus", "stdlib",
           "--out", str(out), "--json", "-q"]
    for e in EXCLUDES:
        cmd += ["--exclude", e]
    env = {**os.environ, "DAGSTER_HOME": str(home), "STRATA_CORPORA": str(corpora)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"strata index failed:\n{proc.stderr[-4000:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stats = json.loads(proc.stdout)
    return {"wall_seconds": round(wall, 1),
            "peak_rss_mib_max_so_far": round(max(peak_kib, before) / 1024),
            "files": stats["files"], "nodes": stats["nodes"],
            "nodes_by_kind": stats["nodes_by_kind"], "edges_by_type": stats["edges_by_type"],
            "skipped": len(stats["skipped"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="index folder (default: a temporary folder)")
    ap.add_argument("--json", type=Path, default=size(None, RESULTS / "build_stdlib.json"),
                    help="also write the figures here")
    args = ap.parse_args()
    root = str(Path(sysconfig.get_paths()["stdlib"]) / size("", "json"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = Path(args.out) if args.out else tmp / "index"
        (tmp / "home").mkdir()
        first = run_index(root, out, tmp / "home", tmp / "corpora.yaml")
        print("first build:", json.dumps(first, indent=2), flush=True)
        again = run_index(root, out, tmp / "home", tmp / "corpora.yaml")
        manifest = json.loads((out / "manifest.json").read_text())
        print("rebuild, nothing changed:", json.dumps(
            {"wall_seconds": again["wall_seconds"], "stages": manifest["stages"]}, indent=2))
        print(f"speed-up of the unchanged rebuild: {first['wall_seconds'] / again['wall_seconds']:.1f}x")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"root": root, "first": first, "unchanged": {
                "wall_seconds": again["wall_seconds"], "stages": manifest["stages"]}},
                indent=1) + "\n")


if __name__ == "__main__":
    main()
