"""A slow-client attack on a real `strata serve` (the ``slowclient`` part of
``python -m benchmarks.hardening``).

The server runs on loopback on the bundled sample index with its default
limits (connection cap, keep-alive timeout, request deadline). The attacker, in
this process, keeps ``connections`` connections open for ``seconds``: each sends
the headers of a ``POST /search`` declaring a 1000-byte body, then one body byte
every ``byte_every_s``; whenever the server answers or closes one, it connects
again at once, as a real attacker would. Measured from outside the server:
its established connections on the port (sampled every half second), its
resident memory before and during the attack, what the attackers were answered
(503 over the cap, 408 at the deadline), a normal ``/search`` request's status
and latency every second during the attack, and the bytes the server logged.

Nothing is asserted: the tests check the behaviour."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.common import REPO

QUERY = {"query": "barometric drift correction", "k": 5}
#: what the issue measured before the limits existed, on the same kind of attack
BEFORE = {"connections": 3000, "byte_every_s": 8, "held": "all 3,000 for over 40 s",
          "rss_mb": "417 → 517", "search_ms": 6200, "log": "3.2 MB of tracebacks"}


def _head(port: int) -> bytes:
    return (f"POST /search HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
            f"\r\nContent-Length: 1000\r\n\r\n{{").encode()


async def _attacker(port: int, until: float, byte_every_s: float, seen: Counter) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            seen["connect_failed"] += 1
            await asyncio.sleep(0.5)
            continue
        seen["opened"] += 1
        try:
            writer.write(_head(port))
            while loop.time() < until:
                try:
                    data = await asyncio.wait_for(reader.read(4096), timeout=byte_every_s)
                except TimeoutError:
                    writer.write(b" ")
                    await writer.drain()
                    continue
                code = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else None
                seen[f"answered_{code}" if code else "closed"] += 1
                break
        except OSError:
            seen["reset"] += 1
        finally:
            writer.close()


async def _attack(port: int, connections: int, seconds: float, byte_every_s: float) -> Counter:
    seen: Counter = Counter()
    until = asyncio.get_running_loop().time() + seconds
    tasks = []
    for i in range(connections):  # opened over about a second, not in one burst
        tasks.append(asyncio.create_task(_attacker(port, until, byte_every_s, seen)))
        if i % 50 == 49:
            await asyncio.sleep(0.1)
    await asyncio.gather(*tasks)
    return seen


def _held(pid: int, port: int) -> int:
    import psutil

    return sum(1 for c in psutil.Process(pid).net_connections(kind="tcp")
               if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def _rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def _search(base: str) -> tuple[int | str, float]:
    t0 = time.perf_counter()
    try:
        status: int | str = httpx.post(base + "/search", json=QUERY, timeout=60).status_code
    except httpx.HTTPError as e:
        status = type(e).__name__
    return status, (time.perf_counter() - t0) * 1000


def attack(index: Path, work: Path, connections: int, seconds: float,
           byte_every_s: float) -> dict:
    """One attack on a fresh server; its figures."""
    from benchmarks.service_load import free_port, stop_server, wait_healthy

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = work / f"serve-{connections}.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "STRATA_LLM_BACKEND": "offline"}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "strata.pipelines.cli", "serve", "--index",
                                 str(index), "--port", str(port), "-q"],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(base, proc, log)
        quiet = [_search(base)[1] for _ in range(5)][-3:]  # warmed: the model loaded
        rss_before = _rss_mb(proc.pid)
        log_before = log.stat().st_size
        held, rss, searches = [], [], []
        done = threading.Event()

        def watch():
            time.sleep(2.0)  # the attack ramps up first
            tick = 0
            while not done.is_set():
                held.append(_held(proc.pid, port))
                rss.append(_rss_mb(proc.pid))
                if tick % 2 == 0:
                    searches.append(_search(base))
                tick += 1
                done.wait(0.5)

        watcher = threading.Thread(target=watch)
        watcher.start()
        seen = asyncio.run(_attack(port, connections, seconds, byte_every_s))
        done.set()
        watcher.join()
        after = _search(base)
        log_bytes = log.stat().st_size - log_before
    finally:
        stop_server(proc)
    ok = [ms for status, ms in searches if status == 200]
    return {"connections": connections, "seconds": seconds, "byte_every_s": byte_every_s,
            "held_max": max(held, default=0),
            "held_median": round(statistics.median(held)) if held else 0,
            "rss_before_mb": round(rss_before), "rss_during_max_mb": round(max(rss, default=0)),
            "search_quiet_ms": round(statistics.median(quiet), 1),
            "search_during": dict(Counter(str(s) for s, _ in searches)),
            "search_during_ok_median_ms": round(statistics.median(ok), 1) if ok else None,
            "search_during_ok_max_ms": round(max(ok), 1) if ok else None,
            "search_after": after[0], "attackers": dict(seen), "log_bytes": log_bytes}


def slow_clients(index: Path, work: Path, connections: list[int], seconds: float,
                 byte_every_s: float) -> list[dict]:
    rows = []
    for n in connections:
        rows.append(attack(index, work, n, seconds, byte_every_s))
        print(rows[-1], flush=True)
    return rows


def markdown(rows: list[dict], settings: dict) -> list[str]:
    """The table of the attacks, the issue's figures before the limits first."""
    b = BEFORE
    out = ["", f"Slow clients against `strata serve` on the sample index (limits: "
           f"{settings['max_connections']} connections, {settings['request_timeout_s']:g} s to "
           f"send a request, keep-alive {settings['keep_alive_s']} s):", "",
           "| attack | held by the server (max / median) | RSS MB before → during (max) | "
           "a normal /search during the attack | attackers answered | log written |",
           "|---|---|---|---|---|---|",
           f"| before the limits (from the issue, not measured here): {b['connections']:,} "
           f"connections, a byte every {b['byte_every_s']} s | {b['held']} | {b['rss_mb']} | "
           f"{b['search_ms'] / 1000:g} s | none | {b['log']} |"]
    for r in rows:
        answered = ", ".join(f"{k.removeprefix('answered_')}: {v}"
                             for k, v in sorted(r["attackers"].items()) if k != "opened")
        during = ", ".join(f"{k}: {v}" for k, v in sorted(r["search_during"].items()))
        median = r["search_during_ok_median_ms"]
        out.append(
            f"| {r['connections']:,} connections for {r['seconds']:g} s, a byte every "
            f"{r['byte_every_s']:g} s ({r['attackers'].get('opened', 0):,} opened) | "
            f"{r['held_max']} / {r['held_median']} | {r['rss_before_mb']} → "
            f"{r['rss_during_max_mb']} | {during}; median of the 200s "
            f"{'—' if median is None else f'{median:g} ms'} (quiet: {r['search_quiet_ms']:g} ms) | "
            f"{answered} | {r['log_bytes']:,} B |")
    return out
