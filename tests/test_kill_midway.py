"""A build killed midway leaves the previous version serving, and the next run
finishes without redoing the work that was done (versioned publish)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from strata.retrieval import Index
from tests.conftest import REPO


def _index_cmd(root, out):
    return [sys.executable, "-m", "strata.pipelines.cli", "index", str(root), "--corpus", "killme",
            "--out", str(out), "--json"]


def test_killed_build_leaves_the_old_version_serving(sample_copy, tmp_path):
    out = tmp_path / "index"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml")}
    (tmp_path / "dh").mkdir()
    first = subprocess.run(_index_cmd(sample_copy, out), cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    v1 = Index.open(out)
    before = [r.node_id for r in v1.search("barometric drift", k=5)]
    assert v1.version == 1 and before

    # a new page forces a rebuild; kill it once the parse stage has written its output
    (sample_copy / "docs" / "killed.md").write_text("# Killed\n\nA page added before the kill.\n")
    nodes = out / "build" / "nodes.parquet"
    stamp = nodes.stat().st_mtime_ns
    proc = subprocess.Popen(_index_cmd(sample_copy, out), cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if nodes.stat().st_mtime_ns != stamp:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)

    # readers still get version 1, whole and queryable
    assert (out / "CURRENT").read_text().strip().endswith("1")
    again = Index.open(out)
    assert again.version == 1
    assert [r.node_id for r in again.search("barometric drift", k=5)] == before
    assert not again.documents().filter(again.documents()["path"] == "docs/killed.md").height

    # the next run completes and does not parse the sample again
    done = subprocess.run(_index_cmd(sample_copy, out), cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # and the killed run, which could not say so itself, is no longer shown as running
    import dagster as dg
    with dg.DagsterInstance.from_config(str(tmp_path / "dh")) as instance:
        statuses = [r.status for r in instance.get_runs(
            filters=dg.RunsFilter(tags={"strata/cli": "index"}))]
    assert statuses.count(dg.DagsterRunStatus.SUCCESS) == 2
    assert statuses.count(dg.DagsterRunStatus.CANCELED) == 1, statuses
    v2 = Index.open(out)
    assert v2.version == 2
    assert v2.documents().filter(v2.documents()["path"] == "docs/killed.md").height == 1
    report = json.loads((out / "build" / "build_report.json").read_text())
    assert report["parse"]["parsed"] == 0  # the killed run's parse was kept

    # older versions stay readable until the retention policy drops them
    pinned = Index.open(out, version=1)
    assert pinned.version == 1 and [r.node_id for r in pinned.search("barometric drift", k=5)] == before
    listed = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "map", "--index", str(out),
                             "--versions", "--json"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["version"], r["current"]) for r in rows] == [(1, False), (2, True)]
    assert rows[1]["files"] == rows[0]["files"] + 1
