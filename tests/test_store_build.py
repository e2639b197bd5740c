"""A build whose workers share nothing but an object store (`shared: store`):
each worker keeps its own folder in step with the build on the store
(:mod:`strata.core.storage.store_sync`), against moto's S3 server on loopback.

The two-worker test starts a Dask scheduler and two `dask worker` processes, each
in an empty folder of its own with its own corpora file, cache and home; the
sample corpus is part of the code every worker has. The store is the only place
their files meet (the Dagster instance's run storage is Dagster's own, as a
Postgres would be on a cluster)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from strata.core.storage.layout import IndexLayout, write_json_atomic, write_parquet_atomic
from strata.core.storage.store_sync import StoreWorkspace, SyncConflict
from tests.conftest import REPO, SAMPLE, Builder, write_corpora
from tests.dask_run import build_on_dask
from tests.index_equality import index_differences
from tests.s3 import s3_endpoint, uri
from tests.waiting import wait_until


@pytest.fixture
def store(monkeypatch, tmp_path):
    with s3_endpoint(monkeypatch, tmp_path / "reader-cache", "builds") as endpoint:
        yield endpoint


def _workspaces(tmp_path, endpoint):
    location = uri(endpoint, "builds/docs")
    return (StoreWorkspace(location, tmp_path / "a"), StoreWorkspace(location, tmp_path / "b"),
            location)


def test_a_worker_sees_what_another_pushed_and_nothing_else(store, tmp_path):
    a, b, _ = _workspaces(tmp_path, store)
    a.pull()
    (a.root / "build" / "shards").mkdir(parents=True)
    (a.root / "build" / "shards" / "000.parquet").write_bytes(b"shard zero")
    (a.root / "build" / "nodes.parquet").write_bytes(b"nodes")
    (a.root / "build" / ".nodes.parquet.tmp").write_bytes(b"half written")
    assert a.push().files == 2
    # b had a leftover of its own: the store's build wins
    (b.root / "build").mkdir(parents=True)
    (b.root / "build" / "stale.parquet").write_bytes(b"from an old failed step")
    pulled = b.pull()
    assert (pulled.files, pulled.deleted) == (2, 1)
    assert sorted(p.relative_to(b.root / "build").as_posix()
                  for p in (b.root / "build").rglob("*") if p.is_file()) == \
        ["nodes.parquet", "shards/000.parquet"]
    assert b.pull().files == 0  # nothing changed: nothing moves
    # a removal travels too, and so does a rewrite
    (b.root / "build" / "shards" / "000.parquet").unlink()
    (b.root / "build" / "nodes.parquet").write_bytes(b"nodes, second build")
    assert b.push().deleted == 1
    a.pull()
    assert not (a.root / "build" / "shards" / "000.parquet").exists()
    assert (a.root / "build" / "nodes.parquet").read_bytes() == b"nodes, second build"


def test_steps_side_by_side_merge_the_files_they_share(store, tmp_path):
    """Two steps on two workers both change the build report, the failure list and
    the LLM cache: the second push merges instead of overwriting the first."""
    a, b, _ = _workspaces(tmp_path, store)
    a.pull()
    write_json_atomic(a.root / "build" / "build_report.json", {"parse": {"seconds": 1}})
    failures = pl.DataFrame({"stage": ["parse"], "node_id": ["n1"]})
    write_parquet_atomic(failures.to_arrow(), a.root / "build" / "failures.parquet")
    a.push()
    a.pull()
    b.pull()
    write_json_atomic(a.root / "build" / "build_report.json",
                      {"parse": {"seconds": 1}, "summarize": {"seconds": 2}})
    write_json_atomic(b.root / "build" / "build_report.json",
                      {"parse": {"seconds": 1}, "caption": {"seconds": 3}})
    write_parquet_atomic(pl.DataFrame({"stage": ["parse", "summarize"],
                                       "node_id": ["n1", "n2"]}).to_arrow(),
                         a.root / "build" / "failures.parquet")
    write_parquet_atomic(pl.DataFrame({"stage": ["caption"], "node_id": ["n3"]}).to_arrow(),
                         b.root / "build" / "failures.parquet")  # it also cleared parse's row
    for ws, key in ((a, "summary"), (b, "caption")):
        (ws.root / "cache").mkdir(exist_ok=True)
        with sqlite3.connect(ws.root / "cache" / "llm.sqlite") as con:
            con.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT)")
            con.execute("INSERT INTO responses VALUES (?, ?)", (key, f"{key} text"))
        con.close()
    assert not a.push().merged
    merged = b.push().merged
    assert sorted(merged) == ["build/build_report.json", "build/failures.parquet",
                              "cache/llm.sqlite"]
    a.pull()
    report = json.loads((a.root / "build" / "build_report.json").read_text())
    assert report == {"parse": {"seconds": 1}, "summarize": {"seconds": 2},
                      "caption": {"seconds": 3}}
    rows = pl.read_parquet(a.root / "build" / "failures.parquet").sort("node_id")
    assert rows.rows() == [("summarize", "n2"), ("caption", "n3")]
    with sqlite3.connect(a.root / "cache" / "llm.sqlite") as con:
        assert sorted(r[0] for r in con.execute("SELECT key FROM responses")) == \
            ["caption", "summary"]
    con.close()


def test_two_steps_writing_one_table_is_a_conflict_not_a_loss(store, tmp_path):
    a, b, _ = _workspaces(tmp_path, store)
    a.pull()
    (a.root / "build").mkdir(exist_ok=True)
    (a.root / "build" / "edges.parquet").write_bytes(b"first")
    a.push()
    a.pull()
    b.pull()
    (a.root / "build" / "edges.parquet").write_bytes(b"from a")
    (b.root / "build" / "edges.parquet").write_bytes(b"from b")
    a.push()
    with pytest.raises(SyncConflict, match="edges.parquet"):
        b.push()
    a2 = StoreWorkspace(a.uri, tmp_path / "c")
    a2.pull()
    assert (a2.root / "build" / "edges.parquet").read_bytes() == b"from a"


def _worker_env(folder: Path, corpora: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "DAGSTER_"))}
    return {**env, "HOME": str(folder), "STRATA_CORPORA": str(corpora),
            "STRATA_CACHE_DIR": str(folder / "cache"), "STRATA_SHARDS": "2",
            "PYTHONPATH": str(REPO)}


def _start_cluster(tmp_path: Path, corpus: dict) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and two workers, each worker in an empty folder of its own."""
    dask = str(Path(sys.executable).with_name("dask"))
    address_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(address_file)],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=_worker_env(tmp_path, tmp_path / "none.yaml"))]
    wait_until(address_file.exists, "the Dask scheduler's address file")
    for i in range(2):
        folder = tmp_path / f"worker{i}"
        folder.mkdir()
        corpora = write_corpora(folder / "corpora.yaml", corpus)
        procs.append(subprocess.Popen(
            [dask, "worker", "--scheduler-file", str(address_file), "--nthreads", "1",
             "--nworkers", "1", "--no-dashboard", "--name", f"worker{i}",
             "--local-directory", str(folder / "dask")],
            cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=_worker_env(folder, corpora)))
    address = json.loads(address_file.read_text())["address"]
    return address, procs


@pytest.mark.e2e  # a cluster of worker processes: `make e2e`, which CI runs after `make test`
def test_workers_sharing_only_the_store_build_the_in_process_index(
        sample_index, store, tmp_path, monkeypatch):
    pytest.importorskip("dagster_dask")
    import dagster as dg
    from distributed import Client

    from strata.core.storage.mirror import pull_version

    location = uri(store, "builds/sample")
    corpus = {"sample": {"root": str(SAMPLE), "out": "work/sample", "mirror": location,
                         "shared": "store"}}
    launcher = tmp_path / "launcher"
    launcher.mkdir()
    monkeypatch.setenv("STRATA_CORPORA", str(write_corpora(launcher / "corpora.yaml", corpus)))
    address, procs = _start_cluster(tmp_path, corpus)
    try:
        with Client(address, timeout=60) as client:
            wait_until(lambda: len(client.scheduler_info()["workers"]) == 2,
                       "two Dask workers")
        logs = build_on_dask(tmp_path / "dh", {"existing": {"address": address}})
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
    # both workers built, each in its own folder; the launcher's folder was never written
    built = [tmp_path / f"worker{i}" / "work" / "sample" / "build" for i in range(2)]
    assert all(b.is_dir() for b in built)
    assert not (launcher / "work").exists()
    assert any("pushed" in m for m in logs) and any("pulled" in m for m in logs)
    # the version published on the store equals the in-process build, table by table
    local, version = pull_version(location)
    report = json.loads((IndexLayout(local).version_dir(version) / "manifest.json")
                        .read_text())["stages"]
    assert report["parse_shards"]["processes"] == 2, report["parse_shards"]
    diffs = index_differences(IndexLayout(local).version_dir(version),
                              IndexLayout(sample_index).resolve())
    assert not diffs, "\n".join(diffs)

    # a new worker, with an empty folder, rebuilds from the store: nothing is parsed or
    # encoded again, and the store keeps serving the same version
    fresh = {"sample": {**corpus["sample"], "out": str(tmp_path / "new-pod" / "sample")}}
    with dg.instance_for_test() as instance:
        Builder(instance, write_corpora(tmp_path / "new-pod.yaml", fresh)).build("sample")
    again = json.loads((tmp_path / "new-pod" / "sample" / "build" / "build_report.json")
                       .read_text())
    assert (again["parse"]["parsed"], again["embed"]["computed"]) == (0, 0), again
    assert pull_version(location)[1] == version


def test_a_store_nobody_answers_fails_the_build_in_one_line(tmp_path):
    """`strata index` of a `shared: store` corpus whose store does not listen: the
    build stops before it writes, with one line naming the store, and no trace."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    location = f"s3://builds/docs?endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
    cfg = write_corpora(tmp_path / "corpora.yaml", {"docs": {
        "root": str(SAMPLE), "out": str(tmp_path / "index"), "mirror": location,
        "shared": "store"}})
    (tmp_path / "dh").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"), "STRATA_CORPORA": str(cfg),
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(SAMPLE),
                           "--corpus", "docs"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "s3://builds/docs" in ln]
    assert lines and "failed" in lines[0] and f"127.0.0.1:{port}" in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Debug source" not in proc.stderr
    assert "endpoint_override" not in proc.stderr  # the URI's options stay out of the log
    assert not (tmp_path / "index" / "build" / "nodes.parquet").exists()


def test_a_push_the_store_refuses_fails_the_step_once_in_one_line(store, tmp_path, monkeypatch):
    """A step whose push fails (the store went away after the pull) fails as the pull
    would: one line naming the store, and no retries of the step on top of obstore's
    own (a retry would redo the step's work only to meet the same store)."""
    import dagster as dg

    from strata.core.storage.object_store import StoreError

    location = uri(store, "builds/docs")
    cfg = write_corpora(tmp_path / "corpora.yaml", {"docs": {
        "root": str(SAMPLE), "out": str(tmp_path / "index"), "mirror": location,
        "shared": "store"}})
    pushes = []

    def refuse(self):
        pushes.append(1)
        raise StoreError(f"push to {location.split('?')[0]} failed: connection reset")

    monkeypatch.setattr(StoreWorkspace, "push", refuse)
    with dg.instance_for_test() as instance:
        result = Builder(instance, cfg).build("docs", raise_on_error=False,
                                              selection=["parsed_shards"])
    assert not result.success
    failed = [e for e in result.all_events if e.is_step_failure]
    steps = [e.step_key for e in failed]
    assert steps and len(set(steps)) == len(steps) == len(pushes)  # each step once: no retry
    for event in failed:
        message = event.step_failure_data.error.message
        assert "push to s3://builds/docs failed: connection reset" in message
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
