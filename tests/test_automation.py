"""Automation: the corpus fingerprint, the sensor that rebuilds a corpus when
its files change, and the nightly schedule — evaluated with Dagster's own
sensor/schedule test contexts on real folders."""

from __future__ import annotations

import datetime
import json
import os

import dagster as dg
import pytest

from strata.pipelines.definitions import defs
from strata.pipelines.schedules import nightly_rebuild_schedule
from strata.pipelines.sensors import corpus_change_sensor
from strata.resources import CorpusRegistry, EmbedderResource, LLMResource
from strata.stages.fingerprint import fingerprint
from tests.conftest import write_corpora


REPO_DEF = defs.get_repository_def()


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nalpha\n")
    (root / "sub" / "b.py").write_text("def b():\n    return 1\n")
    (root / "skip.log").write_text("not selected\n")
    return root


def _bump_mtime(path):
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_fingerprint_reads_files_only_when_their_stats_moved(corpus):
    fp = fingerprint(corpus, exclude=["*.log"])
    assert fp.files == 2
    # same stats: the previous content digest is trusted, nothing is read
    fake = fingerprint(corpus, exclude=["*.log"], previous={**fp.to_dict(), "content": "X"})
    assert fake.content == "X"
    # touched but unchanged: stats move, content does not
    _bump_mtime(corpus / "a.md")
    touched = fingerprint(corpus, exclude=["*.log"], previous=fp.to_dict())
    assert touched.stat != fp.stat and touched.content == fp.content
    # edited, renamed, deleted: content moves each time
    (corpus / "a.md").write_text("# A\n\nalpha, edited\n")
    edited = fingerprint(corpus, exclude=["*.log"], previous=touched.to_dict())
    (corpus / "a.md").rename(corpus / "c.md")
    renamed = fingerprint(corpus, exclude=["*.log"], previous=edited.to_dict())
    (corpus / "c.md").unlink()
    deleted = fingerprint(corpus, exclude=["*.log"], previous=renamed.to_dict())
    assert len({fp.content, edited.content, renamed.content, deleted.content}) == 4
    assert deleted.files == 1
    # files outside the selection never count
    (corpus / "more.log").write_text("ignored\n")
    assert fingerprint(corpus, exclude=["*.log"]).content == deleted.content


def _tick(instance, cfg, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, repository_def=REPO_DEF,
                                  resources={"corpora": CorpusRegistry(config_path=str(cfg)),
                                             "llm": LLMResource(), "embedder": EmbedderResource()})
    with dg.partition_loading_context(dynamic_partitions_store=instance):  # as the daemon does
        return corpus_change_sensor.evaluate_tick(ctx)


def test_sensor_requests_a_build_when_files_change(corpus, tmp_path):
    cfg = write_corpora(tmp_path / "corpora.yaml", {
        "docs": {"root": str(corpus), "out": str(tmp_path / "index"), "exclude": ["*.log"]},
        "gone": {"root": str(tmp_path / "missing"), "out": str(tmp_path / "i2")}})
    with dg.instance_for_test() as instance:
        # not a partition yet: the partitions sensor registers it first
        assert not _tick(instance, cfg).run_requests
        instance.add_dynamic_partitions("corpora", ["docs", "gone"])
        first = _tick(instance, cfg)  # never built: build it
        (req,) = first.run_requests
        assert req.partition_key == "docs" and req.tags["strata/trigger"] == "files changed"
        cursor = first.cursor
        assert set(json.loads(cursor)) == {"docs"}  # the missing root is skipped, not fatal
        same = _tick(instance, cfg, cursor)
        assert not same.run_requests and "missing" in same.skip_message
        _bump_mtime(corpus / "a.md")  # touched only
        touched = _tick(instance, cfg, same.cursor)
        assert not touched.run_requests
        (corpus / "sub" / "b.py").write_text("def b():\n    return 2\n")
        edited = _tick(instance, cfg, touched.cursor)
        (req2,) = edited.run_requests
        assert req2.partition_key == "docs" and req2.run_key != req.run_key
        (corpus / "new.md").write_text("# New\n")
        added = _tick(instance, cfg, edited.cursor)
        assert [r.partition_key for r in added.run_requests] == ["docs"]


def test_sensor_takes_a_published_corpus_as_its_baseline(corpus, tmp_path):
    out = tmp_path / "index"
    out.mkdir()
    (out / "CURRENT").write_text("v000001\n")
    cfg = write_corpora(tmp_path / "corpora.yaml", {"docs": {"root": str(corpus), "out": str(out)}})
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("corpora", ["docs"])
        first = _tick(instance, cfg)
        assert not first.run_requests and json.loads(first.cursor)["docs"]["files"] == 3
        (corpus / "a.md").unlink()
        assert [r.partition_key for r in _tick(instance, cfg, first.cursor).run_requests] == ["docs"]


def test_nightly_schedule_rebuilds_every_corpus(tmp_path):
    when = datetime.datetime(2026, 11, 30, 3, 0, tzinfo=datetime.UTC)
    with dg.instance_for_test() as instance:
        ctx = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=when, repository_def=REPO_DEF,
            resources={"corpora": CorpusRegistry(config_path=str(tmp_path / "none.yaml")),
                       "llm": LLMResource(), "embedder": EmbedderResource()})
        empty = nightly_rebuild_schedule.evaluate_tick(ctx)
        assert not empty.run_requests and "no corpus" in empty.skip_message
        instance.add_dynamic_partitions("corpora", ["b", "a"])
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            reqs = nightly_rebuild_schedule.evaluate_tick(ctx).run_requests
        assert [r.partition_key for r in reqs] == ["a", "b"]
        assert {r.run_key for r in reqs} == {"nightly:2026-11-30:a", "nightly:2026-11-30:b"}
        assert all(r.tags["strata/trigger"] == "nightly" for r in reqs)


def test_sensor_waits_while_a_build_of_the_corpus_is_in_progress(corpus, tmp_path):
    """One build per index: while `strata index` holds the index's lock, or a run
    of the partition is under way, a change is left for a later tick."""
    import uuid

    from strata.core.storage.buildlock import BuildLock

    out = tmp_path / "index"
    cfg = write_corpora(tmp_path / "corpora.yaml", {"docs": {"root": str(corpus), "out": str(out)}})
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("corpora", ["docs"])
        with BuildLock(out).acquire(what="strata index (test)", token="t"):
            held = _tick(instance, cfg)
        assert not held.run_requests and "build is in progress" in held.skip_message
        run = dg.DagsterRun(job_name="index_corpus", run_id=str(uuid.uuid4()),
                            status=dg.DagsterRunStatus.STARTED, tags={"dagster/partition": "docs"})
        instance.add_run(run)
        assert not _tick(instance, cfg).run_requests  # a run of it is going on
        instance.report_run_canceled(run)
        assert [r.partition_key for r in _tick(instance, cfg).run_requests] == ["docs"]


def test_the_sensor_closes_cli_runs_whose_process_is_gone(corpus, tmp_path):
    """A `strata index` killed with SIGKILL cannot mark its run finished; left
    Started, the run would hold its corpus's later runs in Dagster's queue for
    ever. The sensor's tick marks it canceled once nobody holds the index's lock;
    the run of a build still holding its lock is left alone."""
    import signal
    import subprocess
    import sys
    import uuid

    from strata.core.storage.buildlock import BuildLock
    from tests.conftest import REPO

    dead, live = tmp_path / "dead", tmp_path / "live"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from strata.core.storage.buildlock import BuildLock; "
         "BuildLock(sys.argv[1]).acquire(what='strata index', token='t'); "
         "print('held', flush=True); time.sleep(600)", str(dead)],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGKILL)  # as a killed build: no chance to say so
    holder.wait(timeout=30)
    cfg = write_corpora(tmp_path / "corpora.yaml", {"docs": {"root": str(corpus),
                                                             "out": str(tmp_path / "i")}})
    with dg.instance_for_test() as instance, BuildLock(live).acquire(what="strata index",
                                                                     token="u"):
        instance.add_dynamic_partitions("corpora", ["docs"])
        runs = {}
        for name, out in (("dead", dead), ("live", live)):
            runs[name] = dg.DagsterRun(
                job_name="index_corpus", run_id=str(uuid.uuid4()),
                status=dg.DagsterRunStatus.STARTED,
                tags={"strata/cli": "index", "strata/out": str(out), "dagster/partition": "docs"})
            instance.add_run(runs[name])
        _tick(instance, cfg)
        status = {n: instance.get_run_by_id(r.run_id).status for n, r in runs.items()}
    assert status == {"dead": dg.DagsterRunStatus.CANCELED, "live": dg.DagsterRunStatus.STARTED}
