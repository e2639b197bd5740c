"""One build per index folder at a time.

Two builds of one index write the same ``build/`` folder: with different LLM
settings, one publishes the other's half-finished work (a sensor run
published offline summaries over a CLI run's OpenAI ones). So every build
claims the folder's lock file, ``<index>/.build.lock``, in one of two ways:

- ``strata index`` holds an exclusive ``flock(2)`` on it for as long as the
  command runs. The kernel drops it when the process dies, even by SIGKILL, so
  a crash never leaves it behind. A second ``strata index`` of the same folder
  stops with a message naming the holder (or waits, with ``--wait``). The run
  it starts carries the lock's token in a tag, so its steps, in this process or
  in worker processes, know the lock is theirs.
- A run started another way (the UI, a sensor, a schedule) writes a *lease* in
  the file, under a brief ``flock``: its run id. Its steps may run in any
  process, side by side (the multiprocess and Dask executors); each checks that
  the lease names its run. A lease is given back when the run publishes, and a
  lease whose run has finished (failed, canceled) is stale: the next run takes
  it over. A step that finds the index claimed by another build fails before it
  writes anything, naming that build.

The lock is advisory and local: builds on other machines sharing the folder
over NFS are not covered. Between machines, a mirrored corpus's builds also
take a lease object on the store by conditional writes (:mod:`strata.core.storage.store_lease`).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Callable

LOCK_FILE = ".build.lock"
RUN_TAG = "strata/build-lock"  # the token of the lock a CLI run holds for its steps

__all__ = ["BuildLock", "BuildLocked", "LOCK_FILE", "RUN_TAG", "claim_for_run",
           "release_for_run", "is_held", "holder", "describe"]


class BuildLocked(RuntimeError):
    """Another build holds the index folder."""

    def __init__(self, index_dir: Path, info: dict | None):
        self.index_dir = index_dir
        self.info = info or {}
        super().__init__(f"another build of {index_dir} is running ({describe(self.info)})")


def describe(info: dict) -> str:
    if not info:
        return "its holder did not say who it is"
    parts = [info.get("what") or "a build"]
    if info.get("pid"):
        host = info.get("host")
        parts.append(f"pid {info['pid']}" + (f" on {host}" if host and host != socket.gethostname()
                                             else ""))
    if info.get("since"):
        parts.append(f"since {info['since']}")
    return ", ".join(parts)


def holder(index_dir: str | os.PathLike) -> dict | None:
    """What the lock file says about its holder (a CLI, or a run's lease)."""
    try:
        text = (Path(index_dir) / LOCK_FILE).read_text()
        data = json.loads(text) if text.strip() else None
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _flock(fd: int, wait_s: float = 0.0) -> bool:
    """An exclusive flock on ``fd``, trying for up to ``wait_s``; False if busy."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def is_held(index_dir: str | os.PathLike) -> bool:
    """Whether a `strata index` (this process's included) holds the lock now."""
    path = Path(index_dir) / LOCK_FILE
    if not path.exists():
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _info(what: str, token: str, **extra) -> dict:
    return {"what": what, "token": token, "pid": os.getpid(), "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"), **extra}


def _write(fd: int, info: dict | None) -> None:
    data = json.dumps(info).encode() if info else b""
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


class BuildLock:
    """The lock `strata index` holds for as long as it runs."""

    def __init__(self, index_dir: str | os.PathLike):
        self.index_dir = Path(index_dir)
        self.path = self.index_dir / LOCK_FILE
        self._fd: int | None = None
        self.info: dict = {}

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, what: str, token: str, wait: bool = False, poll_s: float = 0.5,
                on_wait: Callable[[dict | None], None] | None = None,
                run_is_live: Callable[[str], bool] | None = None) -> BuildLock:
        """Take the lock or raise :class:`BuildLocked`; ``wait`` polls until it is
        free (``on_wait`` is told once whom it waits for). ``run_is_live`` says
        whether a run lease found in the file still counts (default: it does
        not, as nothing can tell)."""
        self.index_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        told = False
        try:
            while True:
                if _flock(fd, wait_s=1.0):  # a run's brief claim ends within a second
                    lease = holder(self.index_dir)
                    if not (lease and lease.get("run_id") and run_is_live is not None
                            and run_is_live(lease["run_id"])):
                        break
                    fcntl.flock(fd, fcntl.LOCK_UN)  # a run of the UI/sensor is building it
                else:
                    lease = holder(self.index_dir)
                if not wait:
                    raise BuildLocked(self.index_dir, lease)
                if on_wait is not None and not told:
                    on_wait(lease)
                    told = True
                time.sleep(poll_s)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.info = _info(what, token, kind="cli")
        _write(fd, self.info)
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            _write(fd, None)  # no stale description of a holder that is gone
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> BuildLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# --------------------------------------------------------------------------- runs

_CLI_HELD: set[Path] = set()  # index folders whose lock this process's `strata index` holds
_CLI_LOCK = threading.Lock()


def register_cli_lock(lock: BuildLock) -> None:
    with _CLI_LOCK:
        _CLI_HELD.add(lock.index_dir.resolve())


def unregister_cli_lock(lock: BuildLock) -> None:
    with _CLI_LOCK:
        _CLI_HELD.discard(lock.index_dir.resolve())


def claim_for_run(index_dir: str | os.PathLike, run_id: str, run_token: str | None,
                  run_is_live: Callable[[str], bool], what: str | None = None) -> None:
    """Called by every step that writes the index: returns when this run may write
    (the CLI that launched it holds the lock, or its lease is this run's, or there
    was none or a stale one, now replaced by this run's), raises
    :class:`BuildLocked` otherwise."""
    key = Path(index_dir).resolve()
    with _CLI_LOCK:
        if key in _CLI_HELD:
            return  # `strata index` in this very process holds it for its run
    info = holder(key)
    if run_token and info and info.get("token") == run_token and is_held(key):
        return  # the CLI that launched this run, holding it for its worker processes
    key.mkdir(parents=True, exist_ok=True)
    fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _flock(fd, wait_s=2.0):  # held for long: a `strata index`
            raise BuildLocked(key, holder(key))
        try:
            lease = holder(key)
            if lease and lease.get("run_id") not in (None, run_id) and run_is_live(lease["run_id"]):
                raise BuildLocked(key, lease)
            if not lease or lease.get("run_id") != run_id:
                _write(fd, _info(what or f"Dagster run {run_id[:8]}", f"run:{run_id}",
                                 kind="run", run_id=run_id))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def release_for_run(index_dir: str | os.PathLike, run_id: str) -> None:
    """A run published: clear its lease (a CLI's lock is the CLI's to give back)."""
    path = Path(index_dir) / LOCK_FILE
    lease = holder(index_dir)
    if not path.exists() or not lease or lease.get("run_id") != run_id:
        # not this run's lease (a CLI's lock, held for its whole build): nothing to
        # clear, and no flock to wait 2 s for (every `strata index` did)
        return
    fd = os.open(path, os.O_RDWR)
    try:
        if not _flock(fd, wait_s=2.0):
            return  # a CLI holds it
        try:
            lease = holder(index_dir)
            if lease and lease.get("run_id") == run_id:
                _write(fd, None)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
