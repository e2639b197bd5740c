"""Scale-out: the parse and embedding shards run as separate steps on
Dagster's multiprocess executor and on a local Dask cluster (dagster-dask),
and the index they produce equals the in-process build of the same corpus."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import dagster as dg
import pytest

from strata.core.storage.layout import IndexLayout
from tests.conftest import REPO, SAMPLE, write_corpora
from tests.dask_run import build_on_dask
from tests.index_equality import index_differences


def _report(index) -> dict:
    return json.loads((index / "build" / "build_report.json").read_text())


def test_in_process_build_runs_every_shard_in_one_process(sample_index):
    report = _report(sample_index)
    assert report["parse_shards"]["shards"] >= 2 and report["parse_shards"]["processes"] == 1
    assert report["parse"]["parsed_in_shards"] == report["parse"]["parsed"] > 30
    assert report["embed"]["computed_in_shards"] == report["embed"]["computed"] > 500
    # one shard encodes at a time: it gets every core this process may use
    assert report["embedding_shards"]["encoding_processes"] == 1
    assert report["embedding_shards"]["threads"] == len(os.sched_getaffinity(0))


@pytest.mark.e2e  # worker processes: `make e2e`, which CI runs after `make test`
def test_multiprocess_workers_build_the_same_index(sample_index, tmp_path):
    """`strata index --workers 2`: Dagster's multiprocess executor, one process per step.
    Its output is a pipe here: a line per finished step, and the progress lines the
    step processes log inside the embedding shards (read back from the event log)."""
    (tmp_path / "dh").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml"), "STRATA_PROGRESS_EVERY_S": "0"}
    out = tmp_path / "index"
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(SAMPLE),
                           "--corpus", "sample", "--out", str(out), "--workers", "2", "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = _report(out)
    # the two shards of each stage ran in two different processes
    assert report["parse_shards"]["processes"] == 2
    assert report["embedding_shards"]["processes"] == 2
    # the two encoding processes share the cores instead of each taking them all
    assert report["embedding_shards"]["encoding_processes"] == 2
    assert report["embedding_shards"]["threads"] == max(1, len(os.sched_getaffinity(0)) // 2)
    assert report["embed"]["computed_in_shards"] == report["embed"]["computed"] > 500
    diffs = index_differences(IndexLayout(out).resolve(), IndexLayout(sample_index).resolve())
    assert not diffs, "\n".join(diffs)
    lines = proc.stderr.splitlines()
    # the forkserver preloads lancedb but never runs it: no fork warning per step
    assert "Warning" not in proc.stderr, proc.stderr[-2000:]
    # nor a line of Dagster's console logger from each step process (its DEBUG lines)
    assert not [ln for ln in lines if " - dagster - " in ln], proc.stderr[-2000:]
    assert any(re.match(r"\s+\[\d+/\d+\] done\s+embedding_shards\.embed_shard_1", ln)
               for ln in lines), proc.stderr[-2000:]
    for shard in (0, 1):
        moving = [m for m in (re.match(rf"\s+embed shard {shard}: (\d+)/(\d+) \(", ln)
                              for ln in lines) if m and 0 < int(m[1]) < int(m[2])]
        assert moving, (shard, proc.stderr[-2000:])
    run = _runs(tmp_path / "dh")[0]
    assert run.job_name == "index_corpus" and run.tags["dagster/partition"] == "sample"


def _runs(home):
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.get_runs()


@pytest.mark.e2e  # a cluster of worker processes: `make e2e`, which CI runs after `make test`
def test_dask_executor_builds_the_same_index(sample_index, tmp_path, monkeypatch):
    """dagster-dask on a local cluster of two worker processes (the engine a
    user points at a real scheduler with `cluster: {existing: {address: ...}}`)."""
    pytest.importorskip("dagster_dask")
    cfg = write_corpora(tmp_path / "corpora.yaml",
                        {"sample": {"root": str(SAMPLE), "out": str(tmp_path / "index")}})
    monkeypatch.setenv("STRATA_CORPORA", str(cfg))  # the workers rebuild resources from it
    build_on_dask(tmp_path / "dh", {"local": {"n_workers": 2, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None}})
    report = _report(tmp_path / "index")
    assert report["parse_shards"]["processes"] == 2, report
    diffs = index_differences(IndexLayout(tmp_path / "index").resolve(),
                              IndexLayout(sample_index).resolve())
    assert not diffs, "\n".join(diffs)
