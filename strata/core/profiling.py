"""A build's per-step profile, when ``STRATA_PROFILE`` names a folder.

Why: on a 2-core machine a first build should be bound by the cores (the
encoder), not by waits or by Python work slower than its input needs. Each
step run while the variable is set writes ``<step>-<pid>.prof`` (cProfile:
where the step's own thread spent its time) and ``<step>-<pid>.json``
(wall seconds, CPU seconds of the whole process, every thread included, and the
cores it may use), so CPU utilisation = CPU / (wall × cores) tells a busy step
from a waiting one. ``benchmarks.throughput`` reads them back. Off by default:
cProfile slows pure-Python code.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROFILE_ENV = "STRATA_PROFILE"


@contextmanager
def step_profile(step: str) -> Iterator[None]:
    folder = os.environ.get(PROFILE_ENV, "").strip()
    if not folder:
        yield
        return
    import cProfile

    from strata.core.encoders.embedding import usable_cores

    profiler: cProfile.Profile | None = cProfile.Profile()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        profiler.enable()  # type: ignore[union-attr]
    except ValueError:  # another profiler is active in this thread: figures only
        profiler = None
    try:
        yield
    finally:
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{step}-{os.getpid()}"
        if profiler is not None:
            profiler.dump_stats(str(out / f"{stem}.prof"))
        (out / f"{stem}.json").write_text(json.dumps({
            "step": step, "pid": os.getpid(), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "cores": usable_cores(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "started": time.time() - wall}) + "\n")


def top_costs(prof: Path, n: int = 4) -> list[dict]:
    """The ``n`` functions with the most time of their own in a profile."""
    import pstats

    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    rows = sorted(((tt, ct, nc, fn) for fn, (_, nc, tt, ct, _) in stats.items()),
                  key=lambda r: -r[0])[:n]
    return [{"function": _name(fn), "self_s": round(tt, 2), "cum_s": round(ct, 2), "calls": nc}
            for tt, ct, nc, fn in rows]


def _name(fn: tuple) -> str:
    file, line, name = fn
    if file == "~":  # a built-in: its name says what it is
        return name
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{short}:{line}({name})"
