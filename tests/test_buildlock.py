"""One build per index folder: the lock `strata index` holds for its
lifetime, and the lease a run started from the UI or a sensor takes, across
real processes."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from strata.core.storage.buildlock import (BuildLock, BuildLocked, claim_for_run, holder, is_held,
                              release_for_run)
from tests.conftest import REPO

# The holder resets SIGTERM to its default action: a child inherits an ignored
# signal from whatever started pytest (a background job, a CI runner), and a
# holder that ignores the test's SIGTERM would sleep out its 600 s.
HOLD = ("import signal, sys, time; from strata.core.storage.buildlock import BuildLock; "
        "signal.signal(signal.SIGTERM, signal.SIG_DFL); "
        "BuildLock(sys.argv[1]).acquire(what='strata index (holder)', token='T'); "
        "print('held', flush=True); time.sleep(600)")


def _holder_process(index):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(index)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_cli_build_is_refused_naming_the_holder_and_sigkill_frees_it(tmp_path):
    proc = _holder_process(tmp_path)
    try:
        assert is_held(tmp_path)
        with pytest.raises(BuildLocked) as err:
            BuildLock(tmp_path).acquire(what="second", token="U")
        assert f"pid {proc.pid}" in str(err.value) and "strata index (holder)" in str(err.value)
    finally:
        proc.send_signal(signal.SIGKILL)  # the kernel drops the lock with the process
        proc.wait(timeout=30)
    with BuildLock(tmp_path).acquire(what="third", token="V") as lock:
        assert lock.held and holder(tmp_path)["token"] == "V"
    assert not is_held(tmp_path) and holder(tmp_path) is None


def test_wait_waits_for_the_holder_to_finish(tmp_path):
    proc = _holder_process(tmp_path)
    told = []

    def on_wait(info):  # told whom it waits for; that build then ends
        told.append(info)
        proc.send_signal(signal.SIGTERM)

    try:
        with BuildLock(tmp_path).acquire(what="waiter", token="W", wait=True, poll_s=0.1,
                                         on_wait=on_wait) as lock:
            assert lock.held and holder(tmp_path)["token"] == "W"
    finally:
        proc.wait(timeout=30)
    assert len(told) == 1 and told[0]["token"] == "T"


def test_a_run_lease_admits_its_own_steps_and_refuses_other_runs(tmp_path):
    live = {"r1": True}
    claim_for_run(tmp_path, "r1", None, run_is_live=lambda r: live.get(r, False))
    claim_for_run(tmp_path, "r1", None, run_is_live=lambda r: live.get(r, False))  # another step
    assert holder(tmp_path)["run_id"] == "r1" and not is_held(tmp_path)  # a lease, not a flock
    with pytest.raises(BuildLocked, match="Dagster run r1"):
        claim_for_run(tmp_path, "r2", None, run_is_live=lambda r: live.get(r, False))
    with pytest.raises(BuildLocked):  # a CLI build respects a live lease too
        BuildLock(tmp_path).acquire(what="cli", token="C", run_is_live=lambda r: live.get(r))
    live["r1"] = False  # r1 failed or was canceled: its lease is stale
    claim_for_run(tmp_path, "r2", None, run_is_live=lambda r: live.get(r, False))
    assert holder(tmp_path)["run_id"] == "r2"
    release_for_run(tmp_path, "r1")  # not r1's any more: left alone
    assert holder(tmp_path)["run_id"] == "r2"
    release_for_run(tmp_path, "r2")
    assert holder(tmp_path) is None


def test_the_steps_of_a_cli_run_in_worker_processes_share_the_cli_lock(tmp_path):
    proc = _holder_process(tmp_path)
    try:
        claim_for_run(tmp_path, "run-of-the-cli", "T", run_is_live=lambda r: True)  # its token
        with pytest.raises(BuildLocked, match="strata index"):
            claim_for_run(tmp_path, "a-sensor-run", None, run_is_live=lambda r: True)
    finally:
        proc.kill()
        proc.wait(timeout=30)
