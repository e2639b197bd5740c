"""The HTTP service under load: concurrent clients on loopback, every mode.

Unit tests call the service one request at a time; this checks that it stays
correct (zero errors) and how fast it answers when several clients query it at
once, as a team's editors and agents would. It builds the bundled sample corpus
with ``strata index``, starts ``strata serve`` on it in a child process (a free
loopback port, no API keys), and then, mode by mode, runs N client threads —
each with its own ``httpx.Client`` — for a fixed time, looping over realistic
questions about the sample corpus. ``ask`` is ``POST /ask`` (the default mode, the
extractive answer: no LLM is configured). Latency is client-side wall time;
``server ms`` is the mean ``took_ms`` the service reports (retrieval only).
Every request's text is distinct (a question with the client and request
number appended), so each one pays for its query embedding as a real user's
would: the index's query cache never answers.
Exits 1 if any request failed (non-200 or exception), after writing results.

Usage: ``python -m benchmarks.service_load [--clients 8] [--seconds 10] [--index DIR]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from benchmarks.common import (REPO, SCRATCH, build_with_cli, latency, machine, sample_docs, size,
                               write_result)

MODES = ("auto", "flat", "hybrid", "hierarchical", "diffusion", "routed", "ask")
QUERIES = (
    "how do I correct pressure readings for barometric drift?",
    "calibrate a gauge against a reference gauge",
    "export processed water levels to Parquet",
    "reading raw logger files with the CSV reader",
    "difference between vented and non-vented pressure sensors",
    "Kelpie PT-12 sensor specifications",
    "where is the config file read from, TIDEWATER_CONFIG",
    "firmware sampler loop in Rust",
    "harbour-north calibration CSV offsets",
    "tide chart for station 8443970",
    "smoothing noisy water level series",
    "unit conversion from decibars to metres of water",
)
WARMUP = 3  # requests per mode before measuring
HEALTH_WAIT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "strata.pipelines.cli", "serve", "--index", str(index),
           "--host", "127.0.0.1", "--port", str(port), "-q", "--log-level", "warning"]
    with log.open("w") as err:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=err, stderr=subprocess.STDOUT)


def wait_healthy(base: str, proc: subprocess.Popen, log: Path) -> dict:
    deadline = time.monotonic() + HEALTH_WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"strata serve exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            r = httpx.get(f"{base}/health", timeout=2)
            if r.status_code == 200:
                return r.json()
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"strata serve not healthy after {HEALTH_WAIT_S} s:\n"
                     f"{log.read_text()[-4000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def request(client: httpx.Client, mode: str, query: str) -> tuple[float, str | None, float | None]:
    """One request: (client ms, error or None, server took_ms)."""
    if mode == "ask":
        path, body = "/ask", {"question": query, "k": 8}  # the default mode
    else:
        path, body = "/search", {"query": query, "mode": mode, "k": 10}
    t0 = time.perf_counter()
    try:
        r = client.post(path, json=body)
        ms = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            return ms, f"HTTP {r.status_code}: {r.text[:200]}", None
        data = r.json()
        if ("answer" if mode == "ask" else "results") not in data:
            return ms, f"malformed body: {str(data)[:200]}", None
        return ms, None, data.get("took_ms")
    except Exception as e:  # noqa: BLE001 - every failure counts as an error
        return (time.perf_counter() - t0) * 1000, f"{type(e).__name__}: {e}", None


def load(base: str, mode: str, clients: int, seconds: float) -> dict:
    """``clients`` threads, each looping over QUERIES (from its own offset)
    until ``seconds`` have passed; every request's outcome is recorded."""
    with httpx.Client(base_url=base, timeout=30) as c:
        for q in QUERIES[:WARMUP]:
            request(c, mode, q)
    samples: list[tuple[float, str | None, float | None]] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        mine = []
        with httpx.Client(base_url=base, timeout=30) as c:
            i = n
            while time.monotonic() < stop:
                # distinct text per request: no query-embedding cache hits
                q = f"{QUERIES[i % len(QUERIES)]} ({mode} client {n}, request {i})"
                mine.append(request(c, mode, q))
                i += 1
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0

    ms = sorted(s[0] for s in samples)
    errors = [s[1] for s in samples if s[1]]
    took = [s[2] for s in samples if s[2] is not None]
    p99 = ms[max(0, int(round(0.99 * len(ms))) - 1)] if ms else 0.0
    return {"mode": mode, "requests": len(samples), "errors": len(errors),
            "req_per_s": round(len(samples) / elapsed, 1), **(latency(ms) if ms else {}),
            "p99_ms": round(p99, 1),
            "server_ms_mean": round(statistics.mean(took), 1) if took else None,
            "elapsed_s": round(elapsed, 2), "first_errors": errors[:5]}


def table(rows: list[dict], clients: int, seconds: float) -> str:
    lines = [f"| mode ({clients} clients, {seconds:g} s each) | requests | errors | req/s | "
             "p50 ms | p99 ms | server ms (mean) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        name = "ask (`POST /ask`, default mode)" if r["mode"] == "ask" else r["mode"]
        server = "—" if r["server_ms_mean"] is None else f"{r['server_ms_mean']:.1f}"
        lines.append(f"| {name} | {r['requests']} | {r['errors']} | {r['req_per_s']:.1f} | "
                     f"{r.get('p50_ms', 0):.1f} | {r['p99_ms']:.1f} | {server} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=size(8, 2))
    ap.add_argument("--seconds", type=float, default=size(10.0, 0.5),
                    help="measured time per mode")
    ap.add_argument("--index", type=Path, default=None, help="serve this index (skip the build)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, in this order")
    args = ap.parse_args()

    work = SCRATCH / "service_load"
    work.mkdir(parents=True, exist_ok=True)
    build = None
    index = args.index
    if index is None:
        index = work / "index"
        shutil.rmtree(index, ignore_errors=True)
        build = build_with_cli(sample_docs(), index, "sample", work)
        print(f"built the sample index in {build['wall_s']:.1f}s", flush=True)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    proc = start_server(index, port, log)
    rows = []
    try:
        health = wait_healthy(base, proc, log)
        print(f"serving {health['indexes']} on {base}", flush=True)
        for mode in args.modes.split(","):
            row = load(base, mode, args.clients, args.seconds)
            rows.append(row)
            print(f"  {mode}: {row['requests']} requests, {row['errors']} errors, "
                  f"{row['req_per_s']} req/s, p50 {row.get('p50_ms')} ms", flush=True)
            for e in row["first_errors"]:
                print(f"    error: {e}", flush=True)
    finally:
        stop_server(proc)

    report = {"machine": machine(), "clients": args.clients, "seconds_per_mode": args.seconds,
              "queries": list(QUERIES), "warmup_requests": WARMUP, "index": health["indexes"],
              "build": build and {k: v for k, v in build.items() if k != "stages"}, "rows": rows}
    write_result("service_load", report, table(rows, args.clients, args.seconds))
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
