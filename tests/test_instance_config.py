"""The project's Dagster instance settings (pipelines/instance_config.py): one
run per corpus partition in Dagster's run queue. Loaded by a real instance; the
queue holding a second run as Queued is driven in `make e2e`
(tests/e2e/test_dagster_ui.py)."""

from __future__ import annotations

import dagster as dg

from strata.pipelines.instance_config import RETIRED, corpus_run_limit, ensure_instance_config


def _instance(home):
    return dg.DagsterInstance.from_config(str(home))


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
    the console log level; Dagster reads it, and a second call changes nothing."""
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
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
    ensure_instance_config(home)
    assert (home / "dagster.yaml").read_text() == text


def test_an_instance_class_an_earlier_strata_wrote_is_removed(tmp_path):
    """Strata's own instance class is gone: a file Strata wrote with it loses it
    (and keeps what else it says), so the instance opens with Dagster's own
    storage; an operator's file that names a storage keeps it."""
    home = tmp_path / "home"
    ensure_instance_config(home)
    path = home / "dagster.yaml"
    retired = "instance_class:\n  module: strata.pipelines.sqlite_storage\n  class: StrataInstance\n"
    path.write_text(path.read_text() + retired + "run_monitoring:\n  enabled: true\n")
    ensure_instance_config(home)
    text = path.read_text()
    assert "instance_class:" not in text and "sqlite_storage" not in text
    assert text.count("# Written by Strata") == 1
    with _instance(home) as instance:
        assert type(instance).__name__ == "DagsterInstance"
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
        assert instance.run_monitoring_enabled and corpus_run_limit(instance) == 1
    ensure_instance_config(home)
    assert path.read_text() == text
    assert set(RETIRED) == {"instance_class"}
    mine = f"storage:\n  sqlite:\n    base_dir: {tmp_path / 'own'}\n"
    (tmp_path / "op").mkdir()
    (tmp_path / "op" / "dagster.yaml").write_text(mine)
    ensure_instance_config(tmp_path / "op")
    assert "instance_class:" not in (tmp_path / "op" / "dagster.yaml").read_text()
