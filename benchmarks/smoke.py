"""Every benchmark, tiny, end to end: ``make bench-smoke`` (CI runs it).

Runs each benchmark module as ``python -m benchmarks.NAME`` in a child process with
``STRATA_BENCH_SMOKE=1`` (:func:`benchmarks.common.smoke`: corpora of a few files, a
few questions, one trial) and ``STRATA_BENCH_OUT`` set to one temporary folder, so
results and scratch folders go there and ``benchmarks/results`` and the docs stay as
they are. Builds embed with ONNX Runtime (``STRATA_EMBED_RUNTIME=onnx``), which loads
in a fraction of torch's time; the benchmarks that compare runtimes still name theirs.
Each module must exit 0 within its time limit and write its result files; the figures
themselves are not checked. Modules run side by side (``--jobs``), one that reuses
another's indexes after that one.

A module that needs what the machine lacks is skipped, with the reason: the local LLM
server (the ``llm-server`` extra), ``../shared/data`` beside the clone, HypRAG's venv
(made by a full run of ``benchmarks.hyprag_peer``, which installs it from PyPI).
Every module of ``benchmarks/`` must be listed here, as a benchmark or as a helper
the benchmarks run, so that a new one cannot be left out.

Usage: ``python -m benchmarks.smoke [NAME ...] [--out DIR] [--jobs N] [--timeout S]
[--keep]`` (names: only those modules; ``--out``: that folder, kept, e.g. to run again
the modules that reuse indexes without building them)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


class Bench(NamedTuple):
    files: list[str]  # what it writes into the results folder (glob patterns)
    needs: tuple[str, ...] = ()  # "shared", "llm", "hyprag"
    after: tuple[str, ...] = ()  # the modules whose indexes it reuses


DEV = ("musique_recall", "openharmony_dev", "stdlib_code")
MODULES = {
    "musique_recall": Bench(["musique.json", "musique.md"], ("shared",)),
    "scale_out": Bench(["scale_out.json", "scale_out.md"]),
    "openharmony_dev": Bench(["openharmony.json", "openharmony.md"], ("shared",)),
    "stdlib_code": Bench(["stdlib_code.json", "stdlib_code.md"]),
    "musique_sweep": Bench(["musique_sweep.json", "musique_sweep.md"], ("shared",),
                           ("musique_recall",)),
    "offline_answer": Bench(["offline_answer.json", "offline_answer.md"], ("shared",),
                            ("openharmony_dev", "stdlib_code")),
    "hyprag_peer": Bench(["hyprag.json", "hyprag.md"], ("hyprag",), ("stdlib_code",)),
    "calibration": Bench(["calibration.json", "calibration.md", "retrieval_calibration.json"],
                         ("shared",), DEV),
    "context_budget": Bench(["context_budget.json", "context_budget.md"], ("shared",), DEV),
    "fusion_sweep": Bench(["fusion_sweep.json", "fusion_sweep.md"], ("shared",), DEV),
    "ui_launch": Bench(["ui_launch.json", "ui_launch.md"]),
    "onnx_runtime": Bench(["onnx_runtime.json", "onnx_runtime.md"], ("shared",)),
    "incremental": Bench(["incremental.json", "incremental.md"], ("shared",)),
    "scale_curve": Bench(["scale_curve.json", "scale_curve.md", "scale-curve.png"]),
    "hardening": Bench(["hardening.json", "hardening.md"]),
    "store_build": Bench(["store_build.json", "store_build.md"]),
    "throughput": Bench(["throughput*.json", "throughput*.md"]),
    "memory_profile": Bench(["memory_profile.json"]),
    "service_load": Bench(["service_load.json", "service_load.md"]),
    "cold_start": Bench(["cold_start.json", "cold_start.md"], ("shared",),
                        ("musique_recall", "openharmony_dev", "service_load")),
    "build_stdlib": Bench(["build_stdlib.json"]),
    "openie_quality": Bench(["openie_quality.json", "openie_quality.md"], ("shared",)),
    "code_parse": Bench(["code_parse.json"]),
    "openie_llm": Bench(["openie_llm.json", "openie_llm.md"], ("shared", "llm"),
                        ("openie_quality",)),
}
MODULES["report"] = Bench(["report/benchmarks.md", "report/modes.md"], (), tuple(MODULES))
# not benchmarks themselves: run by the ones above (and by this runner)
HELPERS = {
    "common": "every benchmark",
    "measure": "every build through the CLI",
    "musique_corpus": "musique_recall, incremental, onnx_runtime",
    "synthetic_corpus": "scale_out, store_build, throughput, memory_profile, scale_curve",
    "synthetic_index": "cold_start, as python -m benchmarks.synthetic_index",
    "llama_server": "openie_llm",
    "slow_clients": "hardening, its slow-client part",
    "hyprag_runner": "hyprag_peer, in HypRAG's venv",
    "smoke": "this runner",
}
TIMEOUT_S = 360


def missing(needs) -> str | None:
    """Why a module that needs ``needs`` cannot run here, or None."""
    if "shared" in needs and not (SHARED / "musique_100").is_dir():
        return f"no {SHARED} beside the clone"
    if "llm" in needs:
        from benchmarks.llama_server import missing as llm_missing

        why = llm_missing()
        if why:
            return why
    if "hyprag" in needs:
        from benchmarks.hyprag_peer import HYPRAG_VENV

        if not (HYPRAG_VENV / ".installed").exists():
            return f"no HypRAG venv at {HYPRAG_VENV} (a full run installs it from PyPI)"
    return None


def unlisted() -> list[str]:
    """Modules of benchmarks/ that are neither a benchmark here nor a helper."""
    names = {p.stem for p in Path(__file__).parent.glob("*.py") if p.stem != "__init__"}
    return sorted(names - set(MODULES) - set(HELPERS))


def start(name: str, out: Path) -> subprocess.Popen:
    """``python -m benchmarks.NAME`` as a smoke run, its output in ``out/logs``."""
    env = {**os.environ, "STRATA_BENCH_SMOKE": "1", "STRATA_BENCH_OUT": str(out),
           "STRATA_EMBED_RUNTIME": "onnx", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        # a session of its own: its servers and builds end with it on a timeout
        return subprocess.Popen([sys.executable, "-m", f"benchmarks.{name}"], cwd=REPO, env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def outcome(name: str, rc: int, out: Path) -> str:
    """'' when the module exited 0 and wrote its files, else what went wrong."""
    if rc != 0:
        return f"exit {rc}"
    absent = [f for f in MODULES[name].files if not any((out / "results").glob(f))]
    return f"wrote no {', '.join(absent)}" if absent else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="only these modules (default: all)")
    ap.add_argument("--out", type=Path, help="results and scratch here (kept)")
    ap.add_argument("--jobs", type=int, default=2, help="modules run at a time")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per module")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in MODULES]
    if unknown:
        raise SystemExit(f"not benchmarks here: {', '.join(unknown)} (of {', '.join(MODULES)})")
    out = (args.out or Path(tempfile.mkdtemp(prefix="strata-bench-smoke-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"benchmarks, smoke run: results and scratch in {out}", flush=True)
    failed = unlisted()
    for name in failed:
        print(f"{name:<16} FAILED: a module of benchmarks/ that benchmarks/smoke.py does not list")
    todo = [n for n in MODULES if not args.names or n in args.names]
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops them
    t_all = time.perf_counter()
    try:
        while todo or running:
            for name in [n for n in todo if not set(MODULES[n].after) & {*todo, *running}]:
                if len(running) >= args.jobs:
                    break
                todo.remove(name)
                why = missing(MODULES[name].needs)
                if why:
                    print(f"{name:<16}      —   skipped: {why}", flush=True)
                    continue
                lost = [d for d in MODULES[name].after if d in failed]
                if lost:
                    print(f"{name:<16}      —   not run: {', '.join(lost)} failed", flush=True)
                    continue
                running[name] = (start(name, out), time.perf_counter())
            time.sleep(0.2)
            for name, (proc, t0) in list(running.items()):
                seconds = time.perf_counter() - t0
                if proc.poll() is None and seconds < args.timeout:
                    continue
                if proc.returncode is None:
                    stop(proc)
                    problem = f"no end after {args.timeout:.0f} s"
                else:
                    problem = outcome(name, proc.returncode, out)
                del running[name]
                log = out / "logs" / f"{name}.log"
                print(f"{name:<16} {seconds:6.1f} s  " + (f"FAILED: {problem}; log {log}"
                                                          if problem else "ok"), flush=True)
                if problem:
                    failed.append(name)
                    tail = log.read_text(errors="replace").splitlines()[-25:]
                    print("\n".join(f"    | {x}" for x in tail), flush=True)
    finally:
        for proc, _ in running.values():
            stop(proc)
    print("helpers, run by the benchmarks: "
          + "; ".join(f"{k} ({v})" for k, v in HELPERS.items()))
    print(f"total {time.perf_counter() - t_all:.0f} s; "
          + (f"failed: {', '.join(failed)}" if failed else "all ran"), flush=True)
    if failed or args.keep or args.out:
        print(f"kept {out}")
    else:
        shutil.rmtree(out, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
