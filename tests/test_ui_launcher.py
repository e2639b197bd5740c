"""`make ui` as a supervisor stops it: SIGTERM to the one process it started
(pipelines/ui.py) ends the whole tree `dagster dev` spawned (webserver, daemon,
code servers), and so does the death of the launcher's parent (``make`` killed
alone). Real processes and signals; the waits are generous, nothing is timed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.dagster_dev import free_port
from tests.waiting import wait_until
from tests.conftest import REPO


def _descendants(pid: int) -> list[int]:
    rows = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    kids: dict[int, list[int]] = {}
    for line in rows.splitlines():
        child, parent = (int(x) for x in line.split())
        kids.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _up(port: int) -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("how", ["sigterm-to-the-launcher", "its-parent-killed"])
def test_the_whole_tree_stops(tmp_path, how):
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    launch = [sys.executable, "-m", "strata.pipelines.ui", "-w", "workspace.yaml",
              "-h", "127.0.0.1", "-p", str(port)]
    # a parent standing in for make: it starts the launcher and waits for it
    parent = subprocess.Popen(["sh", "-c", '"$@"; exit 0', "make", *launch], cwd=REPO, env=env,
                              stdout=open(tmp_path / "ui.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    tree: list[int] = []
    try:
        wait_until(lambda: _up(port), "the Dagster UI to answer", limit_s=240)
        tree = _descendants(parent.pid)
        launcher = tree[0]
        assert len(tree) >= 4, tree  # launcher, dagster dev, webserver, daemon, code server
        if how == "sigterm-to-the-launcher":
            os.kill(launcher, signal.SIGTERM)
        else:
            os.kill(parent.pid, signal.SIGKILL)
        wait_until(lambda: not any(_alive(p) for p in tree), "every process of the tree to end",
                   limit_s=60)
        assert not _up(port)
    finally:
        for pid in [parent.pid, *_descendants(parent.pid), *tree]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.wait(timeout=10)
