"""A build process hands freed memory back: polars' allocator is configured, when
strata is imported first, to return the pages a frame freed at once rather than
keep them (what one build step freed would otherwise stay resident beneath the
next step's peak); a building process caps glibc's arenas, maps large blocks except
while it encodes and takes Arrow's buffers from malloc; a setting of the user's own
is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os, sys
import strata  # first, as the CLI and the code location import it
import polars as pl
import psutil
rss = lambda: psutil.Process().memory_info().rss / 2**20
base = rss()
df = pl.select(pl.int_range(0, 20_000_000).alias("a")).with_columns((pl.col("a") * 3).alias("b"))
peak = rss()
del df
print(json.dumps({"base": base, "peak": peak, "after": rss(),
                  "conf": os.environ.get("_RJEM_MALLOC_CONF")}))
"""


def probe(env: dict | None = None, script: str = PROBE, *args: str) -> dict:
    """Run ``script`` (with ``args``) in a fresh interpreter; the JSON object its last
    line prints."""
    out = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# glibc's allocator through ctypes, as the scripts below call it
LIBC = """
import ctypes
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
"""


def test_a_freed_frame_is_handed_back():
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    got = probe(env)
    # polars puts its own defaults first; the later options win
    assert got["conf"].endswith("dirty_decay_ms:0,muzzy_decay_ms:0"), got
    rise = got["peak"] - got["base"]
    assert rise > 200, got  # the frame really was allocated (two columns of 20M int64)
    assert got["after"] - got["base"] < 0.3 * rise, got


def test_the_users_own_allocator_setting_is_kept():
    got = probe({**os.environ, "_RJEM_MALLOC_CONF": "narenas:2"})
    assert got["conf"].endswith(",narenas:2") and "dirty_decay_ms:0" not in got["conf"], got


ARENAS = """
import os, sys, threading
if sys.argv[1] == "capped":
    from strata.core.memory import few_malloc_arenas
    few_malloc_arenas()
""" + LIBC + """
ready, done = threading.Barrier(9), threading.Event()

def worker():  # a native allocation in each of eight threads alive at once
    libc.malloc(64 * 1024)
    ready.wait()
    done.wait()

threads = [threading.Thread(target=worker) for _ in range(8)]
for t in threads:
    t.start()
ready.wait()
sys.stderr.flush()
libc.malloc_stats()  # one "Arena N:" paragraph per arena, on stderr
done.set()
for t in threads:
    t.join()
print(os.environ.get("MALLOC_ARENA_MAX"))
"""


def arenas(mode: str, env: dict) -> tuple[int, str]:
    """The glibc arenas of a process whose eight threads each allocated, and the
    MALLOC_ARENA_MAX its children would inherit."""
    run = subprocess.run([sys.executable, "-c", ARENAS, mode], env=env, capture_output=True,
                         text=True, check=True)
    return run.stderr.count("Arena "), run.stdout.strip()


def test_a_building_process_keeps_its_threads_to_few_malloc_arenas():
    """Freed memory scattered over one arena per thread stays resident under the next
    step; the build caps the arenas, for itself and the processes it starts."""
    from strata.core.memory import BUILD_ARENAS

    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    plain, _ = arenas("plain", env)
    assert plain > BUILD_ARENAS + 2, plain  # glibc's default: an arena per new thread here
    capped, inherited = arenas("capped", env)
    assert capped <= BUILD_ARENAS and inherited == str(BUILD_ARENAS), (capped, inherited)


def test_the_users_own_arena_limit_is_kept():
    got, inherited = arenas("capped", {**os.environ, "MALLOC_ARENA_MAX": "5"})
    assert inherited == "5" and 2 < got <= 5, got
    # set as glibc's tunable instead: the build neither caps nor sets the variable
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    got, inherited = arenas("capped", {**env, "GLIBC_TUNABLES": "glibc.malloc.arena_max=5"})
    assert inherited == "None" and 2 < got <= 5, (got, inherited)


MAPPED = LIBC + """
import json, os, sys
from strata.core import memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc.mallinfo2.restype = Mallinfo2

def mapped_by(size):
    # the bytes in blocks with pages of their own that one allocation of size added
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    grew = libc.mallinfo2().hblkhd - before
    libc.free(block)
    return grew

if sys.argv[1] == "build":
    memory.build_allocators()
libc.free(libc.malloc(8 << 20))  # a freed 8 MiB mapped block: glibc's moving threshold rises
got = {"after_a_large_free": mapped_by(2 << 20)}
with memory.heap_blocks():
    got["encoding"] = mapped_by(2 << 20)
got["after_encoding"] = mapped_by(2 << 20)
got["inherited"] = os.environ.get(memory.MMAP_THRESHOLD_ENV)
print(json.dumps(got))
"""


def test_a_building_process_maps_large_blocks_except_while_it_encodes():
    """Once glibc has freed a large mapped block it serves blocks of a few MB from the
    heap, where freed ones stay resident until the heap is trimmed; a building process
    (and the processes it starts) keeps mapping them, which hands them back when
    freed, except while it encodes, when the heap's reuse keeps the encoder fast."""
    from strata.core.memory import MMAP_THRESHOLD_ENV, PINNED_THRESHOLD

    env = {k: v for k, v in os.environ.items() if k != MMAP_THRESHOLD_ENV}
    plain = probe(env, MAPPED, "plain")
    assert plain == {"after_a_large_free": 0, "encoding": 0, "after_encoding": 0,
                     "inherited": None}, plain  # glibc's moving threshold: from the heap
    built = probe(env, MAPPED, "build")
    assert built["after_a_large_free"] >= 2 << 20, built
    assert built["encoding"] == 0, built
    assert built["after_encoding"] >= 2 << 20, built
    assert built["inherited"] == str(PINNED_THRESHOLD), built


def test_the_users_own_mmap_threshold_is_kept():
    """A threshold the user set (1 MiB here) is glibc's from the start, and the build
    changes it neither for itself nor while it encodes: a 2 MiB block is mapped
    throughout."""
    from strata.core.memory import MMAP_THRESHOLD_ENV

    got = probe({**os.environ, MMAP_THRESHOLD_ENV: str(1 << 20)}, MAPPED, "build")
    assert got["inherited"] == str(1 << 20), got
    assert min(got["after_a_large_free"], got["encoding"], got["after_encoding"]) >= 2 << 20, got


POOL = """
import json, os, sys
import pyarrow as pa  # loaded before the call, as the code location has it
import psutil
from strata.core.memory import system_arrow_pool
if sys.argv[1] == "set":
    system_arrow_pool()
rss = lambda: psutil.Process().memory_info().rss / 2**20
texts = [f"{j} " + "word " * 80 for j in range(120_000)]
base = rss()
column = pa.array(texts, pa.string())  # a builder that grows as it goes, as a build's are
print(json.dumps({"pool": pa.default_memory_pool().backend_name, "column": column.nbytes / 2**20,
                  "rise": rss() - base, "inherited": os.environ.get("ARROW_DEFAULT_MEMORY_POOL")}))
"""


def test_a_building_process_takes_arrows_buffers_from_malloc():
    """pyarrow's default pool keeps the buffers a growing column freed, about as much
    again as the column; from malloc they are handed back as the column grows. The
    choice reaches the processes the build starts.

    mimalloc hands freed pages back once its purge delay has passed and it is next
    called, so what it still holds when the probe reads its RSS depends on how often
    the scheduler paused the probe (a loaded machine purges some). The default pool's
    probe sets a delay longer than the probe runs, so the comparison is between the
    pools and not the machine's load; malloc hands them back at once either way."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    plain = probe({**env, "MIMALLOC_PURGE_DELAY": "10000"}, POOL, "plain")
    built = probe(env, POOL, "set")
    assert built["pool"] == "system" and built["inherited"] == "system", built
    assert plain["pool"] != "system" and plain["inherited"] is None, plain
    assert built["rise"] < plain["rise"] - 0.5 * built["column"], (plain, built)


def test_the_users_own_arrow_pool_is_kept():
    got = probe({**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}, POOL, "set")
    assert got["pool"] == "jemalloc" and got["inherited"] == "jemalloc", got


def test_a_build_command_collects_no_cycles_until_its_run_starts(tmp_path, monkeypatch):
    """`strata index` sets itself up (imports, instance, resources) without cycle
    collections; its run collects, whatever executor runs it, with what existed
    before it frozen out of the traversals; the command ends with collection as it
    found it, even when the run raises."""
    import gc

    import dagster as dg

    from strata.pipelines import cli, definitions

    seen = {}
    resolved = definitions.resolved_resources

    def resources(instance):
        seen["setting_up"] = gc.isenabled()
        return resolved(instance)

    def execute_job(*args, **kwargs):
        seen["running"], seen["frozen"] = gc.isenabled(), gc.get_freeze_count()
        raise RuntimeError("the run went wrong")

    monkeypatch.setattr(definitions, "resolved_resources", resources)
    monkeypatch.setattr(dg, "execute_job", execute_job)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text.\n")
    monkeypatch.setenv("STRATA_CORPORA", str(tmp_path / "corpora.yaml"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="the run went wrong"):
        cli.main(["index", str(tmp_path / "docs"), "--corpus", "docs",
                  "--out", str(tmp_path / "index"), "-q"])
    assert seen["setting_up"] is False and seen["running"] is True
    assert seen["frozen"] > 10_000  # the modules, classes and definitions imported
    assert gc.isenabled() and gc.get_freeze_count() == 0
