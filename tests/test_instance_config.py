"""The project's Dagster instance settings (pipelines/instance_config.py): one
run per corpus partition in Dagster's run queue. Loaded by a real instance; the
queue holding a second run as Queued is driven in `make e2e`
(tests/e2e/test_dagster_ui.py)."""

from __future__ import annotations

import dagster as dg
from dagster._core.instance.ref import InstanceRef

from strata.pipelines.instance_config import corpus_run_limit, ensure_instance_config


def _instance(home):
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))


def test_a_new_instance_holds_one_run_per_corpus(tmp_path):
    path = ensure_instance_config(tmp_path / "home")
    with _instance(tmp_path / "home") as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_coordinator.dequeue_interval_seconds == 1
        assert corpus_run_limit(instance) == 1
    assert "telemetry" in path.read_text()


def test_an_instance_without_a_queue_of_its_own_gets_the_limit_and_keeps_the_rest(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n"
                                       "run_monitoring:\n  enabled: true\n")
    ensure_instance_config(home)
    text = (home / "dagster.yaml").read_text()
    assert text.startswith("telemetry:\n  enabled: false\nrun_monitoring:")
    with _instance(home) as instance:
        assert corpus_run_limit(instance) == 1
        assert instance.run_monitoring_enabled
    ensure_instance_config(home)  # idempotent
    assert (home / "dagster.yaml").read_text() == text


def test_an_operators_own_run_queue_is_left_alone(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    mine = "concurrency:\n  runs:\n    max_concurrent_runs: 3\n"
    (home / "dagster.yaml").write_text(mine)
    ensure_instance_config(home)
    assert (home / "dagster.yaml").read_text() == mine
    with _instance(home) as instance:
        assert corpus_run_limit(instance) is None


def test_a_file_strata_wrote_gets_the_settings_added_since(tmp_path):
    """A dagster.yaml an earlier Strata wrote (it configures the run queue) gets
    the console log level and the kept-engine storage; Dagster reads it, and a
    second call changes nothing."""
    home = tmp_path / "home"
    home.mkdir()
    earlier = ("# Written by Strata (pipelines/instance_config.py): telemetry off, and Dagster's run\n"
               "# queue holding one run per corpus partition at a time (the rest wait as Queued).\n"
               "telemetry:\n  enabled: false\n"
               "concurrency:\n  runs:\n    tag_concurrency_limits:\n    - key: dagster/partition\n"
               "      value:\n        applyLimitPerUniqueValue: true\n      limit: 1\n"
               "run_queue:\n  dequeue_interval_seconds: 1\n")
    (home / "dagster.yaml").write_text(earlier)
    ensure_instance_config(home)
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(earlier) and text.count("# Written by Strata") == 1
    with _instance(home) as instance:
        assert instance.python_log_level == "INFO"
        assert corpus_run_limit(instance) == 1
        assert type(instance.event_log_storage).__name__ == "PooledSqliteEventLogStorage"
    ensure_instance_config(home)
    assert (home / "dagster.yaml").read_text() == text


def test_a_storage_strata_or_the_operator_named_is_kept(tmp_path, monkeypatch):
    """Strata's instance class goes only into a file Strata wrote; there its kept
    engines are the default storage, in the folder the instance is opened from
    (whatever DAGSTER_HOME says), and a storage the file names wins."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))
    home = tmp_path / "home"
    home.mkdir()
    mine = f"storage:\n  sqlite:\n    base_dir: {home}\n"
    (home / "dagster.yaml").write_text(mine)
    ensure_instance_config(home)
    assert "instance_class" not in (home / "dagster.yaml").read_text()
    ensure_instance_config(tmp_path / "fresh")
    with _instance(tmp_path / "fresh") as instance:
        assert type(instance.event_log_storage).__name__ == "PooledSqliteEventLogStorage"
        assert instance.event_log_storage._base_dir.startswith(str(tmp_path / "fresh"))
    ours = (tmp_path / "fresh" / "dagster.yaml").read_text()
    (home / "dagster.yaml").write_text(ours + mine)
    ensure_instance_config(home)
    assert (home / "dagster.yaml").read_text() == ours + mine
    with _instance(home) as instance:
        assert type(instance).__name__ == "StrataInstance"
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
    assert not (tmp_path / "elsewhere").exists()
