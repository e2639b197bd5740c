"""Every benchmark, tiny, end to end: ``make bench-smoke`` (CI runs it).

Runs each benchmark module as ``python -m benchmarks.NAME`` in a child process with
``STRATA_BENCH_SMOKE=1`` (:func:`benchmarks.common.smoke`: corpora of a few files, a
few questions, one trial) and ``STRATA_BENCH_OUT`` set to one temporary folder, so
results and scratch folders go there and ``benchmarks/results`` and the docs stay as
they are. The modules run in the order of ``make bench``: the ones that reuse the dev
indexes come after the ones that build them. Each gets a time limit, and must exit 0
and write its result files; the figures themselves are not checked.

A module that needs what the machine lacks is skipped, with the reason: the local LLM
server (the ``llm-server`` extra), ``../shared/data`` beside the clone, HypRAG's venv
(made by a full run of ``benchmarks.hyprag_peer``, which installs it from PyPI).
Every module of ``benchmarks/`` must be listed here, as a benchmark or as a helper
the benchmarks run, so that a new one cannot be left out.

Usage: ``python -m benchmarks.smoke [NAME ...] [--out DIR] [--timeout S] [--keep]``
(names: only those modules; ``--out``: that folder, kept, e.g. to run the modules
that reuse indexes again without building them)
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

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"

# module: the files it writes into the results folder, and what it needs
MODULES = {
    "code_parse": (["code_parse.json"], ()),
    "openie_quality": (["openie_quality.json", "openie_quality.md"], ("shared",)),
    "musique_recall": (["musique.json", "musique.md"], ("shared",)),
    "musique_sweep": (["musique_sweep.json", "musique_sweep.md"], ("shared",)),
    "openharmony_dev": (["openharmony.json", "openharmony.md"], ("shared",)),
    "offline_answer": (["offline_answer.json", "offline_answer.md"], ("shared",)),
    "stdlib_code": (["stdlib_code.json", "stdlib_code.md"], ()),
    "hyprag_peer": (["hyprag.json", "hyprag.md"], ("hyprag",)),
    "calibration": (["calibration.json", "calibration.md", "retrieval_calibration.json"],
                    ("shared",)),
    "context_budget": (["context_budget.json", "context_budget.md"], ("shared",)),
    "fusion_sweep": (["fusion_sweep.json", "fusion_sweep.md"], ("shared",)),
    "onnx_runtime": (["onnx_runtime.json", "onnx_runtime.md"], ("shared",)),
    "incremental": (["incremental.json", "incremental.md"], ("shared",)),
    "scale_out": (["scale_out.json", "scale_out.md"], ()),
    "store_build": (["store_build.json", "store_build.md"], ()),
    "throughput": (["throughput.json", "throughput.md"], ()),
    "memory_profile": (["memory_profile.json"], ()),
    "scale_curve": (["scale_curve.json", "scale_curve.md", "scale-curve.png"], ()),
    "build_stdlib": (["build_stdlib.json"], ()),
    "service_load": (["service_load.json", "service_load.md"], ()),
    "cold_start": (["cold_start.json", "cold_start.md"], ("shared",)),
    "hardening": (["hardening.json", "hardening.md"], ()),
    "ui_launch": (["ui_launch.json", "ui_launch.md"], ()),
    "openie_llm": (["openie_llm.json", "openie_llm.md"], ("shared", "llm")),
    "report": (["report/benchmarks.md", "report/modes.md"], ()),
}
# not benchmarks themselves: run by the ones above (and by this runner)
HELPERS = {
    "common": "every benchmark",
    "measure": "every build through the CLI",
    "musique_corpus": "musique_recall, incremental, throughput",
    "synthetic_corpus": "scale_out, store_build, throughput, memory_profile, scale_curve",
    "synthetic_index": "cold_start (python -m benchmarks.synthetic_index)",
    "llama_server": "openie_llm",
    "hyprag_runner": "hyprag_peer, in HypRAG's venv",
    "smoke": "this runner",
}
TIMEOUT_S = 300


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


def run(name: str, out: Path, timeout: float) -> tuple[str, str]:
    """(status, detail) of ``python -m benchmarks.NAME`` as a smoke run."""
    env = {**os.environ, "STRATA_BENCH_SMOKE": "1", "STRATA_BENCH_OUT": str(out),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        # a session of its own: on a timeout its servers and builds end with it
        proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{name}"], cwd=REPO, env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "FAILED", f"no end after {timeout:.0f} s; log {log}"
    if rc != 0:
        return "FAILED", f"exit {rc}; log {log}"
    absent = [f for f in MODULES[name][0] if not (out / "results" / f).is_file()]
    if absent:
        return "FAILED", f"wrote no {', '.join(absent)}; log {log}"
    return "ok", ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="only these modules (default: all)")
    ap.add_argument("--out", type=Path, help="results and scratch here (kept)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per module")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in MODULES]
    if unknown:
        raise SystemExit(f"not benchmarks here: {', '.join(unknown)} (of {', '.join(MODULES)})")
    out = (args.out or Path(tempfile.mkdtemp(prefix="strata-bench-smoke-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"benchmarks, smoke run: results and scratch in {out}", flush=True)
    failed = [f"{n} (not listed in benchmarks/smoke.py)" for n in unlisted()]
    for n in unlisted():
        print(f"{n:<16} FAILED: a module of benchmarks/ that benchmarks.smoke does not list")
    t_all = time.perf_counter()
    for name, (_, needs) in MODULES.items():
        if args.names and name not in args.names:
            continue
        why = missing(needs)
        if why:
            print(f"{name:<16}      —   skipped: {why}", flush=True)
            continue
        t0 = time.perf_counter()
        status, detail = run(name, out, args.timeout)
        line = f"{name:<16} {time.perf_counter() - t0:6.1f} s  {status}"
        print(line + (f": {detail}" if detail else ""), flush=True)
        if status != "ok":
            failed.append(name)
            tail = (out / "logs" / f"{name}.log").read_text(errors="replace").splitlines()[-25:]
            print("\n".join(f"    | {x}" for x in tail), flush=True)
    print("helpers, run by the benchmarks: " + "; ".join(f"{k} ({v})" for k, v in HELPERS.items()))
    print(f"total {time.perf_counter() - t_all:.0f} s; "
          + (f"failed: {', '.join(failed)}" if failed else "all ran"), flush=True)
    if failed or args.keep or args.out:
        print(f"kept {out}")
    else:
        shutil.rmtree(out, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
