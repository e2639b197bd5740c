"""The project's Dagster instance: ``$DAGSTER_HOME/dagster.yaml`` (``.dagster/``
by default), written by `make install` and by the first `strata index`.

Besides turning telemetry off it makes Dagster's own run queue hold one run of
a corpus partition at a time: a second run of the same corpus, from
the UI, the change sensor or the nightly schedule, waits as *Queued* in the UI
until the first has finished, instead of racing it to the index. The queue
counts every run of the instance in progress, `strata index`'s too (they carry
the partition tag), so a run launched from the UI during a CLI build queues as
well. `strata index` itself does not go through the queue (it runs the job in
its own process); the index folder's lock (:mod:`strata.core.storage.buildlock`) stays the
guard there, and for builds of the same folder from anywhere.

``run_queue.dequeue_interval_seconds: 1``: the daemon looks at the queue every
second rather than every five, a few seconds off every launch from the UI.

``python_logs.python_log_level: INFO``: the console logger Dagster gives each step
process of a multiprocess run (``strata index --workers``) logs from INFO, not
DEBUG; at DEBUG every step process printed a "STEP_WORKER_STARTED" line on the
user's terminal, under ``-q`` too. Dagster's events are recorded whatever the
level; only an op's own ``context.log.debug`` messages are no longer kept.

Storage is Dagster's own default (SQLite files in the home); an operator's
``dagster.yaml`` may name any other storage Dagster supports.

A file this module wrote (it starts with :data:`MARK`) gets the settings added
since it was written, and loses the ones Strata no longer writes
(:data:`RETIRED`); a file of the operator's own gets only the run limit, and only
when it configures no run queue of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from strata.core.config.files import read_config_file
from strata.core.storage.layout import write_text_atomic

CORPUS_RUN_LIMIT = {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True},
                    "limit": 1}
SETTINGS = {
    "telemetry": {"enabled": False},
    "concurrency": {"runs": {"tag_concurrency_limits": [CORPUS_RUN_LIMIT]}},
    "run_queue": {"dequeue_interval_seconds": 1},
    "python_logs": {"python_log_level": "INFO"},
}
# Settings an earlier Strata wrote into its own file and no longer does: an instance
# class of its own (Dagster's default instance and storage are used again).
RETIRED = {"instance_class": {"module": "strata.pipelines.sqlite_storage", "class": "StrataInstance"}}
QUEUE_KEYS = ("concurrency", "run_queue", "run_coordinator")
MARK = "# Written by Strata (pipelines/instance_config.py)"
HEADER = (f"{MARK}: telemetry off, Dagster's run queue holding one\n"
          "# run per corpus partition at a time (the rest wait as Queued), Dagster's console\n"
          "# logs from INFO.\n")


def ensure_instance_config(home: Path) -> Path:
    """Create ``home/dagster.yaml``; add the settings added since to one this module
    wrote; add them to an operator's own only when it configures no run queue of its
    own (what an operator wrote is never changed)."""
    from strata.core.storage.ownership import mark

    home.mkdir(parents=True, exist_ok=True)
    mark(home, "dagster-home")  # never indexed, even inside a corpus folder
    path = home / "dagster.yaml"
    if not path.exists():
        write_text_atomic(path, HEADER + yaml.safe_dump(SETTINGS, sort_keys=False))
        return path
    # a FIFO or a device in its place is refused in one line (ConfigFileError), unread
    raw = read_config_file(path, f"the Dagster instance file {path} ($DAGSTER_HOME)")
    try:
        text = raw.decode("utf-8")
        current = yaml.safe_load(text) or {}
    except (UnicodeDecodeError, yaml.YAMLError):
        return path  # Dagster will say what is wrong with it
    if not isinstance(current, dict):
        return path
    ours = text.startswith(MARK)
    if not ours and any(k in current for k in QUEUE_KEYS):
        return path
    if ours and any(current.get(k) == v for k, v in RETIRED.items()):
        kept = {k: v for k, v in current.items() if RETIRED.get(k) != v}
        write_text_atomic(path, HEADER + yaml.safe_dump({**SETTINGS, **kept}, sort_keys=False))
        return path
    extra = {k: v for k, v in SETTINGS.items() if k not in current}
    if extra:
        write_text_atomic(path, text.rstrip("\n") + "\n" + ("" if ours else HEADER)
               + yaml.safe_dump(extra, sort_keys=False))
    return path


def corpus_run_limit(instance) -> int | None:
    """The instance's limit on runs of one corpus partition at a time (None: none)."""
    queue = instance.get_concurrency_config().run_queue_config
    if queue is None:  # not a queued run coordinator
        return None
    for limit in queue.tag_concurrency_limits or []:
        if limit.get("key") == "dagster/partition" and \
                isinstance(limit.get("value"), dict) and \
                limit["value"].get("applyLimitPerUniqueValue"):
            return int(limit["limit"])
    return None


if __name__ == "__main__":  # make install
    from strata.core.config.settings import dagster_home_dir

    print(ensure_instance_config(Path(sys.argv[1]) if len(sys.argv) > 1 else dagster_home_dir()))
