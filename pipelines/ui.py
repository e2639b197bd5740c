"""`make ui`: Dagster's UI, daemon and code server (``dagster dev``) as one unit
that a terminal, a supervisor or a container runtime can stop.

``dagster dev`` starts a process tree (webserver, daemon, code servers, run
workers). Ctrl-C on a terminal reaches the whole tree; a supervisor sends
SIGTERM to one process, and if that is ``make`` the tree lives on without it.
So this launcher runs ``dagster dev`` in a process group of its own and, on
SIGTERM, SIGINT or SIGHUP, or when its own parent goes away, asks the group to
stop (SIGTERM, which ``dagster dev`` handles as a clean shutdown), waits
``GRACE_S``, and kills what is left, so the whole tree is gone within seconds.

Usage: ``python -m strata.pipelines.ui [dagster dev arguments...]``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 6.0  # dagster dev's own shutdown, before what is left is killed
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def dagster_dev(args: list[str]) -> list[str]:
    dagster = Path(sys.executable).with_name("dagster")
    cmd = [str(dagster)] if dagster.exists() else [sys.executable, "-m", "dagster"]
    return [*cmd, "dev", *args]


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> int:
    """SIGTERM to ``proc``'s group, then SIGKILL to whatever of it is left after
    ``grace_s``; returns ``proc``'s exit status."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return proc.wait()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reaps the leader, so a group of nothing but it reads as gone
        if proc.returncode is not None and not _group_alive(proc.pid):
            return proc.returncode
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    parent = os.getppid()
    asked: list[int] = []
    for sig in STOPPING:
        signal.signal(sig, lambda signum, frame: asked.append(signum))
    proc = subprocess.Popen(dagster_dev(args), start_new_session=True)
    while proc.poll() is None and not asked:
        if os.getppid() != parent:  # make (or whoever started us) is gone: so are we
            asked.append(signal.SIGHUP)
            break
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    if asked:
        print(f"stopping the Dagster UI ({signal.Signals(asked[0]).name})…", file=sys.stderr,
              flush=True)
    code = stop_group(proc)
    return 0 if asked else code


if __name__ == "__main__":
    sys.exit(main())
