"""Figures for issue 17's guarantees, measured on real processes (`make bench`).

- How long `strata index` takes to stop after SIGINT (sent to the process, as
  `kill -INT` does), after Ctrl-C typed on its terminal (a pseudo-terminal: the
  kernel signals the whole foreground process group) and after SIGTERM: while an
  LLM request is held open by the server, and while the encoder is busy.
- How long a build takes to fail, as a whole command, when the LLM endpoint or
  the embedding endpoint is a port where nothing listens.
- Peak memory of a build of the hostile corpus (a 2 GiB sparse image, a 200 MiB
  text file, a DOCX whose XML part inflates to 64 MiB, a FIFO, a character
  device, ...), and of the change sensor's fingerprint and of reading the folder
  alone: bounded by the caps, whatever the files claim.

Every figure is a child process measured from outside; nothing here is asserted
(the tests check the behaviour; `make test` must pass on a loaded machine).

Usage: ``python -m benchmarks.hardening [--trials 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from benchmarks.common import REPO, RESULTS, SCRATCH

PTY_LAUNCHER = ("import os, pty, sys; "
                "sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))")
PAGES = {f"page{i:02d}.md": f"# Page {i}\n\nTide gauge {i} reads the harbour level.\n\n"
         f"## Drift {i}\n\nBarometric drift {i} is corrected hourly.\n" for i in range(12)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(work: Path) -> dict:
    return {**os.environ, "DAGSTER_HOME": str(work / "dagster_home"),
            "STRATA_CORPORA": str(work / "corpora.yaml"), "STRATA_SHARDS": "1",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _cmd(root: Path, out: Path, *extra: str, corpus: str = "hard") -> list[str]:
    return [sys.executable, "-m", "strata.pipelines.cli", "index", str(root), "--corpus", corpus,
            "--out", str(out), *extra]


def _stop_once(work: Path, root: Path, out: Path, server, how: str, wait_for: str,
               trial: int) -> dict:
    """One build stopped by ``how`` (sigint / sigterm / pty) once ``wait_for``
    happened ("llm": a request is held open; "encode": the embedding step runs)."""
    page = root / f"new-{how}-{wait_for}-{trial}.md"
    if wait_for == "llm":
        page.write_text(f"# New {how} {trial}\n\nSLOWPAGE {how} {wait_for} {trial}\n")
    else:  # 600 new sections: the encoder has seconds of work when the signal comes
        page.write_text("\n".join(f"## Section {how} {trial} {i}\n\nReading {i} of gauge "
                                  f"{trial} on the {how} run, {i * 7 % 13} metres.\n"
                                  for i in range(600)))
    env = _env(work)
    llm = ["--llm-backend", "openai", "--llm-base-url", server.base_url, "--llm-model", "m"]
    extra = llm if wait_for == "llm" else ["--llm-backend", "offline"]
    since = len(server.requests)
    log = open(work / f"{how}-{wait_for}-{trial}.log", "wb")
    if how == "pty":
        proc = subprocess.Popen([sys.executable, "-c", PTY_LAUNCHER, *_cmd(root, out, *extra)],
                                cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=log,
                                stderr=subprocess.STDOUT)
    else:
        proc = subprocess.Popen(_cmd(root, out, *extra), cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if wait_for == "llm" and any("SLOWPAGE" in r.prompt for r in server.requests[since:]):
            time.sleep(0.5)
            break
        if wait_for == "encode" and _embedding_started(work):
            time.sleep(1.0)
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        return {"error": f"ended before it could be stopped (rc {proc.returncode})"}
    t0 = time.monotonic()
    if how == "pty":
        proc.stdin.write(b"\x03")
        proc.stdin.flush()
    else:
        proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
    try:
        rc = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        return {"error": "did not stop within 120 s"}
    finally:
        log.close()
    return {"stop_s": round(time.monotonic() - t0, 2), "rc": rc}


def _embedding_started(work: Path) -> bool:
    """Whether the latest run's embedding step has started (from the event log)."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    try:
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(work / "dagster_home"))) as i:
            runs = i.get_runs(limit=1)
            if not runs or runs[0].is_finished:
                return False
            records = i.get_records_for_run(runs[0].run_id, of_type=dg.DagsterEventType.STEP_START)
            return any((r.event_log_entry.step_key or "").startswith(("embed", "embedding"))
                       for r in records.records)
    except Exception:  # noqa: BLE001 - the storage may be mid-write
        return False


def stop_times(work: Path, trials: int) -> list[dict]:
    sys.path.insert(0, str(REPO))
    from tests.fake_openai import FakeOpenAI  # the tests' OpenAI-compatible server

    root, out = work / "corpus", work / "index"
    root.mkdir(parents=True)
    for name, text in PAGES.items():
        (root / name).write_text(text)
    subprocess.run(_cmd(root, out, "-q"), cwd=REPO, env=_env(work), check=True)
    rows = []
    with FakeOpenAI() as server:
        server.add_fault("slow", 3600, match="SLOWPAGE", times=None)
        for wait_for in ("llm", "encode"):
            for how in ("sigint", "pty", "sigterm"):
                runs = [_stop_once(work, root, out, server, how, wait_for, t)
                        for t in range(trials)]
                times = [r["stop_s"] for r in runs if "stop_s" in r]
                rows.append({"signal": how, "during": wait_for, "trials": len(runs),
                             "median_s": round(statistics.median(times), 2) if times else None,
                             "max_s": max(times) if times else None,
                             "exit_codes": sorted({r.get("rc") for r in runs}),
                             "errors": [r["error"] for r in runs if "error" in r]})
                print(rows[-1], flush=True)
    return rows


def dead_endpoints(work: Path, trials: int) -> list[dict]:
    root, out = work / "corpus", work / "index"
    rows = []
    for what in ("llm", "embedding"):
        times, codes, lines = [], set(), []
        for t in range(trials):
            (root / f"dead-{what}-{t}.md").write_text(f"# Dead {what} {t}\n\nNobody answers.\n")
            url = f"http://127.0.0.1:{_free_port()}/v1"
            extra = (["--llm-backend", "openai", "--llm-base-url", url, "--llm-model", "m"]
                     if what == "llm" else
                     ["--llm-backend", "offline", "--embed-backend", "openai",
                      "--embed-base-url", url, "--model", "text-embedding-3-small"])
            t0 = time.monotonic()
            proc = subprocess.run(_cmd(root, out, "-q", *extra), cwd=REPO, env=_env(work),
                                  capture_output=True, text=True, timeout=600)
            times.append(round(time.monotonic() - t0, 2))
            codes.add(proc.returncode)
            lines = proc.stderr.strip().splitlines()[-1:]
        rows.append({"endpoint": what, "trials": trials, "median_s": statistics.median(times),
                     "max_s": max(times), "exit_codes": sorted(codes),
                     "message": lines[0] if lines else ""})
        print(rows[-1], flush=True)
    return rows


def _measured(cmd: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.measure", "--", *cmd], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=3600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hostile_memory(work: Path) -> list[dict]:
    sys.path.insert(0, str(REPO))
    from tests.reliability.hostile import write_hostile_corpus

    root = work / "hostile"
    write_hostile_corpus(root)
    env = _env(work)
    rows = []
    for label, code in (
            ("read the folder (discover)",
             f"from strata.stages.discover import discover; print(len(discover({str(root)!r})))"),
            ("fingerprint (the change sensor)",
             f"from strata.stages.fingerprint import fingerprint; print(fingerprint({str(root)!r}))")):
        m = _measured([sys.executable, "-c", code], env)
        rows.append({"what": label, "wall_s": m["wall_s"], "peak_rss_mb": m["peak_rss_mb"],
                     "rc": m["returncode"]})
        print(rows[-1], flush=True)
    m = _measured(_cmd(root, work / "hostile-index", "-q", corpus="hostile"), env)
    rows.append({"what": "strata index (whole build, encoder included)", "wall_s": m["wall_s"],
                 "peak_rss_mb": m["peak_rss_mb"], "rc": m["returncode"]})
    print(rows[-1], flush=True)
    return rows


def markdown(stops: list[dict], dead: list[dict], memory: list[dict]) -> str:
    names = {"sigint": "SIGINT (kill -INT)", "pty": "Ctrl-C on a terminal (pty)",
             "sigterm": "SIGTERM"}
    during = {"llm": "an LLM request held open", "encode": "the encoder running"}
    out = ["| stopped by | while | trials | median s | max s | exit code |",
           "|---|---|---|---|---|---|"]
    for r in stops:
        out.append(f"| {names[r['signal']]} | {during[r['during']]} | {r['trials']} | "
                   f"{r['median_s']} | {r['max_s']} | {', '.join(map(str, r['exit_codes']))} |")
    out += ["", "| endpoint down (nothing listens) | trials | median s | max s | exit code |",
            "|---|---|---|---|---|"]
    for r in dead:
        out.append(f"| {r['endpoint']} | {r['trials']} | {r['median_s']} | {r['max_s']} | "
                   f"{', '.join(map(str, r['exit_codes']))} |")
    out += ["", "| hostile corpus | wall s | peak RSS MB |", "|---|---|---|"]
    for r in memory:
        out.append(f"| {r['what']} | {r['wall_s']:.1f} | {r['peak_rss_mb']:.0f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    work = SCRATCH / "hardening"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    stops = stop_times(work, args.trials)
    dead = dead_endpoints(work, args.trials)
    memory = hostile_memory(work)
    RESULTS.mkdir(exist_ok=True)
    machine = {"date": date.today().isoformat(), "cpus": os.cpu_count()}
    (RESULTS / "hardening.json").write_text(json.dumps(
        {"machine": machine, "stops": stops, "dead_endpoints": dead, "hostile_memory": memory},
        indent=2) + "\n")
    (RESULTS / "hardening.md").write_text(markdown(stops, dead, memory))
    print(markdown(stops, dead, memory))


if __name__ == "__main__":
    main()
