"""Dagster's SQLite storage with each file's engine kept (pipelines/sqlite_storage.py),
as the instance Strata writes configures it: real runs stored in real SQLite files,
read back by Dagster's own storage classes and by another process while the
writer's connections stay open."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.instance.ref import InstanceRef

from strata.pipelines.instance_config import ensure_instance_config
from strata.pipelines.sqlite_storage import KEPT_FILES


@dg.asset
def first(context):
    context.log.info("first made")
    return dg.MaterializeResult(metadata={"rows": 1})


@dg.asset(deps=[first], check_specs=[dg.AssetCheckSpec("positive", asset="second")])
def second(context):
    context.log.info("second made")
    return dg.MaterializeResult(metadata={"rows": 2},
                                check_results=[dg.AssetCheckResult(passed=True)])


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An instance home as `strata index` writes it, named by DAGSTER_HOME."""
    home = tmp_path / "home"
    ensure_instance_config(home)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


class Connects:
    """How many SQLite connections the process opens while counted."""

    def __init__(self):
        self.n = 0

    def __call__(self, dbapi_connection, record):
        self.n += 1

    def __enter__(self):
        sa.event.listen(sa.engine.Engine, "connect", self)
        return self

    def __exit__(self, *exc):
        sa.event.remove(sa.engine.Engine, "connect", self)


def _dagsters_own(home):
    """The same home opened with Dagster's default SQLite storage classes."""
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(
        str(home), overrides={"storage": {"sqlite": {"base_dir": str(home)}}}))


def test_runs_open_a_few_connections_and_dagsters_own_storage_reads_them(home):
    """Two runs of two assets (with logs, a check and data versions read) keep to a
    connection or two per file, where Dagster's storage opens one per transaction;
    the files are Dagster's own: its default storage reads every run and event."""
    with dg.DagsterInstance.get() as instance:
        assert type(instance.event_log_storage).__name__ == "PooledSqliteEventLogStorage"
        assert type(instance.run_storage).__name__ == "PooledSqliteRunStorage"
        with Connects() as pooled:
            runs = [dg.materialize([first, second], instance=instance) for _ in range(2)]
        assert all(r.success for r in runs)
        events = [instance.all_logs(r.run_id) for r in runs]
        assert len(instance.event_log_storage._engines.urls()) <= KEPT_FILES
    with _dagsters_own(home) as plain:
        assert type(plain.event_log_storage).__name__ == "SqliteEventLogStorage"
        assert {r.run_id for r in plain.get_runs()} == {r.run_id for r in runs}
        for run, stored in zip(runs, events):
            assert [(e.timestamp, e.message) for e in plain.all_logs(run.run_id)] \
                == [(e.timestamp, e.message) for e in stored]
            assert plain.get_run_by_id(run.run_id).is_success
        assert plain.get_latest_materialization_event(dg.AssetKey("second")) is not None
        with Connects() as default:
            dg.materialize([first, second], instance=plain)
    assert len(events[0]) > 20  # a real run's worth of events
    # files written: the asset index, runs.db, the run's own file (a few more for the
    # one-time set-up); Dagster's own storage opens one per transaction
    assert pooled.n <= 2 * 8, pooled.n
    assert default.n > 2 * pooled.n, (default.n, pooled.n)  # for one run against two


READER = """
import json, sys
import dagster as dg
from dagster._core.instance.ref import InstanceRef
home = sys.argv[1]
with dg.DagsterInstance.from_ref(InstanceRef.from_dir(
        home, overrides={"storage": {"sqlite": {"base_dir": home}}})) as plain:
    runs = plain.get_runs()
    plain.add_run_tags(runs[0].run_id, {"seen_by": "reader"})  # a write, between the writer's
    print(json.dumps({"runs": [r.run_id for r in runs],
                      "events": len(plain.all_logs(runs[0].run_id))}))
"""


def test_another_process_reads_and_writes_while_the_connections_stay_open(home):
    """The writer's kept connections hold no lock between transactions: another
    process (the webserver, the daemon) reads the run and writes to it meanwhile,
    and the writer's next run is stored after it."""
    with dg.DagsterInstance.get() as instance:
        one = dg.materialize([first, second], instance=instance)
        out = subprocess.run([sys.executable, "-c", READER, str(home)], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        seen = json.loads(out.strip().splitlines()[-1])
        assert seen == {"runs": [one.run_id], "events": len(instance.all_logs(one.run_id))}
        two = dg.materialize([first, second], instance=instance)
        assert two.success
        assert instance.get_run_by_id(one.run_id).tags.get("seen_by") == "reader"
        assert [r.run_id for r in instance.get_runs()] == [two.run_id, one.run_id]


def test_a_forked_child_stores_through_its_own_connections(home):
    """A child forked while the parent's connections are open makes its own (SQLite
    connections do not survive a fork) and leaves the parent's alone: both go on
    storing, and every event is there."""
    with dg.DagsterInstance.get() as instance:
        before = dg.materialize([first], instance=instance)
        pid = os.fork()
        if pid == 0:  # the child: a run of its own, then out without the parent's atexit
            try:
                code = 0 if dg.materialize([first], instance=instance).success else 1
            except BaseException:  # noqa: BLE001 - reported by the exit code
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        after = dg.materialize([second], instance=instance)
        runs = instance.get_runs()
        assert len(runs) == 3 and all(r.is_success for r in runs)
        assert before.run_id in {r.run_id for r in runs} and after.success
        for run in runs:
            assert any(e.is_dagster_event and e.dagster_event_type == dg.DagsterEventType.RUN_SUCCESS
                       for e in instance.all_logs(run.run_id))


def test_wiping_the_event_log_lets_its_files_go(home):
    """A wipe removes the run files: the kept connections go with them, and what is
    stored after it is in the new files (not in a removed one)."""
    with dg.DagsterInstance.get() as instance:
        dg.materialize([first], instance=instance)
        instance.event_log_storage.wipe()
        again = dg.materialize([first], instance=instance)
        stored = instance.all_logs(again.run_id)
    with _dagsters_own(home) as plain:
        assert len(plain.all_logs(again.run_id)) == len(stored) > 5
