"""Importing Strata only declares: the code location's module
(``strata.pipelines.definitions``, what ``dagster dev`` and every run process load)
and the package itself leave the process as they found it — the environment (the
allocator's, OpenMP's and the native libraries' variables among it), the garbage
collector, the threads, Arrow's memory pool. Anything a build wants set is set
where a build starts, when it starts.

What the libraries Strata imports do at their own import (polars sets its
allocator's variable) is theirs: each probe is compared with a process that
imports the same other libraries and no Strata module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = """
import gc, json, os, sys, threading
before = {"env": dict(os.environ), "gc": gc.isenabled(), "frozen": gc.get_freeze_count(),
          "threads": threading.active_count(), "thresholds": gc.get_threshold()}
for name in sys.argv[1:]:
    try:
        __import__(name)
    except ImportError:  # a name only a loaded extension module registers
        if name.startswith("strata"):
            raise
import pyarrow as pa
after = {"env": dict(os.environ), "gc": gc.isenabled(), "frozen": gc.get_freeze_count(),
         "threads": threading.active_count(), "thresholds": gc.get_threshold()}
libraries = sorted({m.split(".")[0] for m in sys.modules
                    if not m.startswith("_")} - {"strata", "__main__"})
print(json.dumps({"env": after["env"], "libraries": libraries,
                  "pool": pa.default_memory_pool().backend_name,
                  **{k: [before[k], after[k]] for k in ("gc", "frozen", "threads", "thresholds")}}))
"""


def _probe(*modules: str) -> dict:
    run = subprocess.run([sys.executable, "-c", PROBE, *modules], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("modules", [("strata",), ("strata.pipelines.definitions",),
                                     ("strata.retrieval",)])
def test_importing_changes_no_process_wide_state(modules):
    got = _probe(*modules)
    assert "strata" not in got["libraries"]
    bare = _probe(*got["libraries"])  # the same libraries, no Strata
    changed = sorted(k for k in set(got["env"]) | set(bare["env"])
                     if got["env"].get(k) != bare["env"].get(k))
    assert changed == []  # MALLOC_*, OMP_*, _RJEM_MALLOC_CONF, LANCEDB_LOG, ...
    assert got["gc"] == [True, True] and got["frozen"] == [0, 0]
    assert got["thresholds"][0] == got["thresholds"][1]
    assert got["threads"] == bare["threads"]
    assert got["pool"] == bare["pool"]  # Arrow's default pool, as pyarrow chose it
