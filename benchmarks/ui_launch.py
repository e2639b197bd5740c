"""An unchanged rebuild launched the way the Dagster UI launches it, against the
same rebuild from `strata index` (79 s from the UI, 11 s from the CLI).

- UI path: `dagster dev -w workspace.yaml` (webserver, daemon, code server) on
  loopback; each trial is a GraphQL ``launchPipelineExecution`` of the
  ``index_corpus`` job for the corpus partition, which is what the UI's
  launchpad and *Materialize* buttons send; the run goes through Dagster's run
  queue, its daemon and the default run launcher into a run worker process.
  Timed from the mutation to the run's end as the UI reports it (GraphQL polled
  every 0.2 s), split into launch → start (queue, launcher, run worker start-up)
  and start → end (the run).
- The same with ``execution.config.workers: 2`` in the launch's run config: the
  multiprocess executor every run used before (one process per step).
- CLI: `strata index` of the same corpus in a child process, interpreter start-up
  included (the user's wall time).

The corpus is the bundled sample, built once first. Nothing is asserted; the
tests check the behaviour (`tests/e2e/test_dagster_ui.py` checks a UI rebuild
runs in one process).

Usage: ``python -m benchmarks.ui_launch [--trials 3]``
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
from datetime import date

from benchmarks.common import REPO, RESULTS, SCRATCH, sample_docs, size
from tests.dagster_dev import dagster_dev, launch_index_run, step_processes, wait_run

TARGET = 1.5  # UI path at most this many times the CLI's time


def _cli(env: dict, corpus_root, out) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(corpus_root), "--corpus",
                    "sample", "--out", str(out), "-q"], cwd=REPO, env=env, check=True)
    return time.perf_counter() - t0


def _ui(base: str, home, run_config: dict | None = None) -> dict:
    t0 = time.perf_counter()
    run_id = launch_index_run(base, "sample", run_config=run_config)
    run = wait_run(base, run_id, timeout_s=1800, poll_s=0.2)
    wall = time.perf_counter() - t0
    if run["status"] != "SUCCESS":
        raise RuntimeError(f"run {run_id}: {run['status']}")
    pids, _ = step_processes(home, run_id)
    return {"wall_s": round(wall, 2), "launch_to_start_s": round(run["startTime"]
                                                                 - run["creationTime"], 2),
            "run_s": round(run["endTime"] - run["startTime"], 2), "step_processes": len(pids)}


def _summary(rows: list[dict], key: str = "wall_s") -> dict:
    values = [r[key] for r in rows]
    return {"trials": len(values), "median_s": round(statistics.median(values), 2),
            "min_s": round(min(values), 2), "max_s": round(max(values), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=size(3, 1))
    args = ap.parse_args()
    from strata.pipelines.instance_config import ensure_instance_config

    work = SCRATCH / "ui_launch"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home = work / "dagster_home"
    ensure_instance_config(home)
    out = work / "index"
    docs = sample_docs()
    (work / "corpora.yaml").write_text(json.dumps(
        {"corpora": {"sample": {"root": str(docs), "out": str(out)}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "STRATA_"))}
    env.update(DAGSTER_HOME=str(home), STRATA_CORPORA=str(work / "corpora.yaml"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    print("first build of the sample…", flush=True)
    _cli(env, docs, out)
    subprocess.run([sys.executable, "-m", "dagster", "sensor", "stop", "corpus_change_sensor",
                    "-w", "workspace.yaml"], cwd=REPO, env=env, check=True, capture_output=True)
    cli, ui, multi = [], [], []
    with dagster_dev(env, work / "dagster_dev.log") as (base, _):
        _ui(base, home)  # warm: the code server's first load, the OS page cache
        for i in range(args.trials):  # interleaved: the machine's load hits both alike
            cli.append({"wall_s": round(_cli(env, docs, out), 2)})
            ui.append(_ui(base, home))
            print(f"trial {i + 1}: cli {cli[-1]['wall_s']} s, ui {ui[-1]}", flush=True)
        for _ in range(max(1, args.trials // 2)):
            multi.append(_ui(base, home, {"execution": {"config": {"workers": 2}}}))
            print(f"ui, 2 workers: {multi[-1]}", flush=True)
    result = {
        "machine": {"date": date.today().isoformat(), "cpus": os.cpu_count()},
        "cli": {**_summary(cli), "runs": cli},
        "ui": {**_summary(ui), "launch_to_start_median_s": _summary(ui, "launch_to_start_s")[
            "median_s"], "run_median_s": _summary(ui, "run_s")["median_s"],
               "step_processes": sorted({r["step_processes"] for r in ui}), "runs": ui},
        "ui_workers_2": {**_summary(multi), "run_median_s": _summary(multi, "run_s")["median_s"],
                         "step_processes": sorted({r["step_processes"] for r in multi}),
                         "runs": multi},
    }
    result["ratio"] = round(result["ui"]["median_s"] / result["cli"]["median_s"], 2)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ui_launch.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "ui_launch.md").write_text(markdown(result))
    print(markdown(result))


def markdown(r: dict) -> str:
    rows = ["| rebuild, nothing changed | trials | median s | min s | max s | launch → start s "
            "| run s | step processes |", "|---|---|---|---|---|---|---|---|"]
    for label, key in (("`strata index` (CLI)", "cli"),
                       ("UI path, in process (default)", "ui"),
                       ("UI path, `workers: 2` (multiprocess, the old default)", "ui_workers_2")):
        s = r[key]
        rows.append(f"| {label} | {s['trials']} | {s['median_s']} | {s['min_s']} | {s['max_s']} "
                    f"| {s.get('launch_to_start_median_s', '—')} | {s.get('run_median_s', '—')} "
                    f"| {', '.join(map(str, s.get('step_processes', []))) or '1'} |")
    met = "yes" if r["ratio"] <= TARGET else "**no**"
    rows += ["", "| target | measured | met |", "|---|---|---|",
             f"| UI path ≤ {TARGET}× CLI (medians) | {r['ratio']}× ({r['ui']['median_s']} s vs "
             f"{r['cli']['median_s']} s) | {met} |"]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
