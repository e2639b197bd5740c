"""Runs of `strata index` whose process died without saying so.

A build killed with SIGKILL (or a power cut) leaves its run *Started* in the
instance for ever. That misleads the run list, and since Dagster's run queue
holds one run per corpus at a time (:mod:`pipelines.instance_config`), it would
also keep every later run of that corpus queued. `strata index` holds its index
folder's lock for as long as its process lives, so a CLI run in progress whose
folder nobody holds is dead: the next build of the folder and the change
sensor's next tick mark it canceled.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable

import dagster as dg

from strata.assets.run_tags import CLI_TAG, OUT_TAG

IN_PROGRESS = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING,
               dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.CANCELING]


def close_abandoned_cli_runs(instance, is_alive: Callable[[dg.DagsterRun], bool],
                             out: Path | None = None, by: str = "") -> list[str]:
    """Mark canceled the CLI runs in progress (of ``out``, or of any folder) that
    ``is_alive`` says are not; their ids. Never raises: housekeeping must not
    stand in the way of a build or a sensor tick."""
    tags = {CLI_TAG: "index", **({OUT_TAG: str(out)} if out is not None else {})}
    try:
        runs = instance.get_runs(filters=dg.RunsFilter(tags=tags, statuses=IN_PROGRESS),
                                 limit=50)
    except Exception:  # noqa: BLE001
        return []
    closed = []
    for run in runs:
        try:
            if is_alive(run):
                continue
            instance.report_run_canceled(
                run, message="strata index ended without finishing (its process was killed)"
                             + (f"; closed by {by}" if by else ""))
            closed.append(run.run_id)
        except Exception:  # noqa: BLE001
            pass
    return closed


def cli_run_is_alive(run: dg.DagsterRun) -> bool:
    """Whether the `strata index` process of ``run`` may still be running: its
    folder's lock is held, or the folder or its last holder is not of this
    machine (the lock is local: another machine's build is not ours to judge)."""
    import socket

    from strata.core.storage.buildlock import LOCK_FILE, holder, is_held

    out = run.tags.get(OUT_TAG)
    if not out or not (Path(out) / LOCK_FILE).exists() or is_held(out):
        return True
    info = holder(out) or {}
    return info.get("host") not in (None, socket.gethostname())
