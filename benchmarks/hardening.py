"""Figures for the hardening guarantees, measured on real processes (`make bench`).

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
- What the service spends rendering a node made to be slow to parse as
  Markdown (a 200 KB line of ``[a](``): the whole text parsed, as every request
  once did, against the bounded prefix, and a request that renders it cold
  against one served from the render cache, alone and six at once.
- Two builds of the same corpus at once against one alone (each a ``strata
  index`` process with its own ``--out`` and ``DAGSTER_HOME``), per OpenMP wait
  policy: the ratio pair / single shows whether the builds only share the cores
  (about 2) or their idle threads spin against each other's work. The load
  average is recorded beside each figure: other work on the machine moves them.
- A slow-client attack on a real `strata serve` (:mod:`benchmarks.slow_clients`):
  the connections it holds, its memory, what the attackers are answered and a
  normal request's latency meanwhile, under the default connection cap and
  request deadline.

Every figure is a child process measured from outside; nothing here is asserted
(the tests check the behaviour; `make test` must pass on a loaded machine).

Usage: ``python -m benchmarks.hardening [--trials 3] [--only render|concurrency|stops|slowclient]``
(``--only`` updates that part of the results and keeps the others).
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

from benchmarks.common import REPO, RESULTS, SCRATCH, cli_env, size, smoke, write_result

PTY_LAUNCHER = ("import os, pty, sys; "
                "sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))")
PAGES = {f"page{i:02d}.md": f"# Page {i}\n\nTide gauge {i} reads the harbour level.\n\n"
         f"## Drift {i}\n\nBarometric drift {i} is corrected hourly.\n" for i in range(12)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(work: Path) -> dict:
    return {**cli_env(work), "STRATA_SHARDS": "1", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


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
    # a smoke run: each way of stopping once, not each with each wait
    pairs = ([("llm", "pty"), ("encode", "sigint")] if smoke() else
             [(w, h) for w in ("llm", "encode") for h in ("sigint", "pty", "sigterm")])
    with FakeOpenAI() as server:
        server.add_fault("slow", 3600, match="SLOWPAGE", times=None)
        for wait_for, how in pairs:
            runs = [_stop_once(work, root, out, server, how, wait_for, t) for t in range(trials)]
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
    if smoke():  # the tests build this corpus; a smoke run reads it only
        return rows
    m = _measured(_cmd(root, work / "hostile-index", "-q", corpus="hostile"), env)
    rows.append({"what": "strata index (whole build, encoder included)", "wall_s": m["wall_s"],
                 "peak_rss_mb": m["peak_rss_mb"], "rc": m["returncode"]})
    print(rows[-1], flush=True)
    return rows


STORM = "[a](" * size(50_000, 5_000)  # 200 KB on one line: an unclosed link, over and over
# how each build's OpenMP threads wait: "active" forced (they spin), libgomp's own
# default (no usable policy: a short spin; an unrecognised value makes libgomp use
# it, as builds did before the CLI set one) and the CLI's default (passive)
POLICIES = {"active": "ACTIVE", "libgomp-default": "unset", "passive": None}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _ms(fn, trials: int) -> float:
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def render_cost(trials: int) -> dict:
    """The pathological node rendered in this process, as the service does."""
    from concurrent.futures import ThreadPoolExecutor

    from strata.service import render

    def whole():  # what every request did: all of it parsed, then sanitized
        return render.sanitize(render._markdown().render(STORM[:render.MAX_INPUT_CHARS]))

    def cold():
        render._cache.clear()
        return render.node_html("section", STORM)

    def six(fn):
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda _: fn(), range(6)))

    load = _load()
    rows = {"text_chars": len(STORM), "markdown_chars": render.markdown_end(STORM),
            "markdown_max_chars": render.MARKDOWN_MAX_CHARS,
            "markdown_max_markup": render.MARKDOWN_MAX_MARKUP,
            "whole_text_ms": _ms(whole, trials),
            "bounded_ms": _ms(lambda: render.markdown_html(STORM), trials),
            "request_cold_ms": _ms(cold, trials)}
    render.node_html("section", STORM)
    rows["request_cached_ms"] = _ms(lambda: render.node_html("section", STORM), 50)
    rows["six_requests_whole_ms"] = _ms(lambda: six(whole), 1)
    rows["six_requests_cold_cache_ms"] = _ms(lambda: (render._cache.clear(),
                                                      six(lambda: render.node_html("section",
                                                                                   STORM))), 1)
    rows["loadavg_1m"] = [load, _load()]
    render._cache.clear()
    print(rows, flush=True)
    return rows


def _build(root: Path, run: Path, policy: str | None, corpus: str) -> subprocess.Popen:
    run.mkdir(parents=True)
    env = _env(run)
    env.pop("OMP_WAIT_POLICY", None)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    log = open(run / "build.log", "wb")
    proc = subprocess.Popen(_cmd(root, run / "index", "-q", "--llm-backend", "offline",
                                 corpus=corpus), cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    proc.log = log
    return proc


def _wait(procs: list[subprocess.Popen], t0: float) -> list[float]:
    ends = []
    for proc in procs:
        rc = proc.wait(timeout=3600)
        proc.log.close()
        if rc != 0:
            raise RuntimeError(f"a build failed (rc {rc}); see {proc.log.name}")
        ends.append(round(time.monotonic() - t0, 2))
    return ends


def _encoding(run: Path) -> float | None:
    """Texts per second of the build's encoder (its manifest's stage figures)."""
    stages = json.loads((run / "index" / "manifest.json").read_text()).get("stages", {})
    seconds = stages.get("embedding_shards", {}).get("seconds")
    texts = stages.get("embed", {}).get("computed")
    return round(texts / seconds, 1) if seconds and texts else None


def concurrent_builds(work: Path, files: int, policies: list[str]) -> list[dict]:
    """Per policy: one build alone, then two at once (copies of one synthetic
    corpus, each into a fresh index and Dagster home)."""
    from benchmarks.synthetic_corpus import generate

    base = work / "concurrency"
    shutil.rmtree(base, ignore_errors=True)
    generate(base / "corpus-a", files=files)
    shutil.copytree(base / "corpus-a", base / "corpus-b")
    rows = []
    for name in policies:
        policy = POLICIES[name]
        load = _load()
        t0 = time.monotonic()
        single = _wait([_build(base / "corpus-a", base / f"{name}-single", policy, "ca")], t0)[0]
        load_single = _load()
        t0 = time.monotonic()
        pair = _wait([_build(base / f"corpus-{x}", base / f"{name}-pair-{x}", policy, f"c{x}")
                      for x in "ab"], t0)
        rows.append({"policy": name, "omp_wait_policy": policy, "files": files,
                     "single_s": single, "pair_s": pair, "ratio": round(max(pair) / single, 2),
                     "encoder_texts_per_s": {
                         "single": _encoding(base / f"{name}-single"),
                         "pair": [_encoding(base / f"{name}-pair-{x}") for x in "ab"]},
                     "loadavg_1m": [load, load_single, _load()]})
        print(rows[-1], flush=True)
    return rows


def markdown(report: dict) -> str:
    """The tables of the sections ``report`` holds."""
    names = {"sigint": "SIGINT (kill -INT)", "pty": "Ctrl-C on a terminal (pty)",
             "sigterm": "SIGTERM"}
    during = {"llm": "an LLM request held open", "encode": "the encoder running"}
    stops, dead = report.get("stops", []), report.get("dead_endpoints", [])
    memory = report.get("hostile_memory", [])
    out = []
    if stops:
        out += ["| stopped by | while | trials | median s | max s | exit code |",
                "|---|---|---|---|---|---|"]
    for r in stops:
        out.append(f"| {names[r['signal']]} | {during[r['during']]} | {r['trials']} | "
                   f"{r['median_s']} | {r['max_s']} | {', '.join(map(str, r['exit_codes']))} |")
    if dead:
        out += ["", "| endpoint down (nothing listens) | trials | median s | max s | exit code |",
                "|---|---|---|---|---|"]
    for r in dead:
        out.append(f"| {r['endpoint']} | {r['trials']} | {r['median_s']} | {r['max_s']} | "
                   f"{', '.join(map(str, r['exit_codes']))} |")
    if memory:
        out += ["", "| hostile corpus | wall s | peak RSS MB |", "|---|---|---|"]
    for r in memory:
        out.append(f"| {r['what']} | {r['wall_s']:.1f} | {r['peak_rss_mb']:.0f} |")
    r = report.get("render")
    if r:
        out += ["", f"| a {r['text_chars']:,}-character line of `[a](` rendered | ms |",
                "|---|---|",
                f"| whole text parsed as Markdown (every request, before) | {r['whole_text_ms']} |",
                f"| bounded: first {r['markdown_chars']:,} characters parsed, the rest plain "
                f"text | {r['bounded_ms']} |",
                f"| a request, render cache cold | {r['request_cold_ms']} |",
                f"| a request, from the render cache | {r['request_cached_ms']} |",
                f"| six requests at once, whole text each (before) | "
                f"{r['six_requests_whole_ms']} |",
                f"| six requests at once, cache cold | {r['six_requests_cold_cache_ms']} |",
                "", f"load average (1 min) before / after: {r['loadavg_1m']}"]
    conc = report.get("concurrency", [])
    if conc:
        out += ["", "| OpenMP wait policy | files | one build s | two at once s | ratio | "
                "encoder texts/s, one / two at once | load avg (start, after one, after two) |",
                "|---|---|---|---|---|---|---|"]
    for r in conc:
        rate = r.get("encoder_texts_per_s") or {}
        out.append(f"| {r['policy']} | {r['files']} | {r['single_s']} | "
                   f"{' / '.join(map(str, r['pair_s']))} | {r['ratio']} | "
                   f"{rate.get('single')} / {' / '.join(map(str, rate.get('pair', [])))} | "
                   f"{', '.join(map(str, r['loadavg_1m']))} |")
    if report.get("slowclient"):
        from benchmarks.slow_clients import markdown as slow_table

        out += slow_table(report["slowclient"], report["slowclient_limits"])
    return "\n".join(out) + "\n"


def slowclient(work: Path, connections: list[int], seconds: float) -> tuple[list[dict], dict]:
    """The slow-client attacks on the sample index (built once), and the limits
    the server ran with (the settings' defaults)."""
    from benchmarks.common import build_with_cli, sample_docs
    from benchmarks.slow_clients import slow_clients
    from strata.core.config.settings import ServeSettings, default

    base = work / "slowclient"
    index = base / "index"
    if not (index / "CURRENT").is_file():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        build_with_cli(sample_docs(), index, "sample", base)
    limits = {name: default(ServeSettings, name)
              for name in ("max_connections", "request_timeout_s", "keep_alive_s")}
    return slow_clients(index, base, connections, seconds, byte_every_s=3.0), limits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=size(3, 1))
    ap.add_argument("--only", choices=("stops", "render", "concurrency", "slowclient"),
                    action="append",
                    help="run only this part (repeatable); the others keep their last figures")
    ap.add_argument("--files", type=int, default=size(300, 5),
                    help="files in the corpus of the concurrent builds")
    ap.add_argument("--policies", default=size("active,passive", "passive"),
                    help=f"OpenMP wait policies of the concurrent builds, of {', '.join(POLICIES)}")
    ap.add_argument("--slow-connections", default=size("500,1000", "20"),
                    help="slowclient: the attacks' connection counts, comma-separated")
    ap.add_argument("--slow-seconds", type=float, default=size(20.0, 4.0),
                    help="slowclient: how long each attack lasts")
    args = ap.parse_args()
    parts = args.only or ["stops", "render", "concurrency", "slowclient"]
    work = SCRATCH / "hardening"
    report = {}
    if args.only and (RESULTS / "hardening.json").is_file():
        report = json.loads((RESULTS / "hardening.json").read_text())
    if "stops" in parts:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    if "stops" in parts:
        report["stops"] = stop_times(work, args.trials)
        report["dead_endpoints"] = dead_endpoints(work, args.trials)
        report["hostile_memory"] = hostile_memory(work)
    if "render" in parts:
        report["render"] = render_cost(args.trials)
    if "concurrency" in parts:
        report["concurrency"] = concurrent_builds(work, args.files, args.policies.split(","))
    if "slowclient" in parts:
        report["slowclient"], report["slowclient_limits"] = slowclient(
            work, [int(n) for n in args.slow_connections.split(",")], args.slow_seconds)
    machine = {"date": date.today().isoformat(), "cpus": os.cpu_count(),
               "loadavg": [round(x, 2) for x in os.getloadavg()]}
    if "stops" in parts or "machine" not in report:
        report["machine"] = machine
    for part in ("render", "concurrency", "slowclient"):
        if part in parts:
            report[f"{part}_machine"] = machine
    write_result("hardening", report, markdown(report))


if __name__ == "__main__":
    main()
