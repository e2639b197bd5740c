"""A build process hands freed memory back: polars' allocator is configured, when
strata is imported first, to return the pages a frame freed at once rather than
keep them (what one build step freed would otherwise stay resident beneath the
next step's peak); a setting of the user's own is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


def probe(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


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
