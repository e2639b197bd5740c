"""One build per index folder at a time.

Two builds of one index write the same ``build/`` folder: with different LLM
settings, one publishes the other's half-finished work (issue 17: a sensor run
published offline summaries over a CLI run's OpenAI ones). So a build holds an
exclusive lock on ``<index>/.build.lock``:

- ``strata index`` takes it before the run starts and holds it until it exits
  (a second ``strata index`` of the same folder stops with a message naming the
  holder, or waits with ``--wait``); the run carries the lock's token in a tag,
  so its steps, in this process or in worker processes, know the lock is theirs.
- a run launched another way (the UI, a sensor, a schedule) takes it in its
  first step that writes the index, in the process running that step, and gives
  it back when it publishes (or when that process ends); a step that finds it
  held by someone else fails with the holder's description instead of writing.

The lock is ``flock(2)``: the kernel drops it when its process dies, even by
SIGKILL, so a crash never leaves a stale lock behind. It is advisory and local:
builds on other machines sharing the folder over NFS are not covered.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

LOCK_FILE = ".build.lock"
RUN_TAG = "strata/build-lock"  # the token of the lock a CLI run holds for its steps

__all__ = ["BuildLock", "BuildLocked", "LOCK_FILE", "RUN_TAG", "hold_for_run", "release_for_run",
           "is_held", "holder"]


class BuildLocked(RuntimeError):
    """Another build holds the index folder's lock."""

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
    """What the lock file says about its last holder (it may have finished)."""
    try:
        text = (Path(index_dir) / LOCK_FILE).read_text()
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None


def is_held(index_dir: str | os.PathLike) -> bool:
    """Whether some process (this one included) holds the lock now."""
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


class BuildLock:
    """An exclusive, process-held lock on one index folder."""

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
                stop: threading.Event | None = None) -> "BuildLock":
        """Take the lock or raise :class:`BuildLocked`; ``wait`` polls until it is
        free (``on_wait`` is told once whom it waits for; ``stop`` gives up)."""
        self.index_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if not wait:
                        raise BuildLocked(self.index_dir, holder(self.index_dir)) from None
                    if on_wait is not None and not told:
                        on_wait(holder(self.index_dir))
                        told = True
                    if stop is not None and stop.wait(poll_s):
                        raise BuildLocked(self.index_dir, holder(self.index_dir)) from None
                    if stop is None:
                        time.sleep(poll_s)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.info = {"what": what, "token": token, "pid": os.getpid(),
                     "host": socket.gethostname(),
                     "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        data = json.dumps(self.info).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # no stale description of a holder that is gone
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "BuildLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# --------------------------------------------------------------------------- runs

# Locks this process holds, by index folder: taken for a run (a step of a run
# started outside the CLI) or by the CLI for its run ("cli": never given back by
# a step).
_HELD: dict[Path, tuple[BuildLock, str]] = {}
_HELD_LOCK = threading.Lock()


def register_cli_lock(lock: BuildLock) -> None:
    with _HELD_LOCK:
        _HELD[lock.index_dir.resolve()] = (lock, "cli")


def unregister_cli_lock(lock: BuildLock) -> None:
    with _HELD_LOCK:
        _HELD.pop(lock.index_dir.resolve(), None)


def hold_for_run(index_dir: str | os.PathLike, run_id: str, run_token: str | None) -> None:
    """Called by every step that writes the index: returns when this run may write
    (this process holds the lock, or the CLI that launched the run does), raises
    :class:`BuildLocked` otherwise."""
    key = Path(index_dir).resolve()
    with _HELD_LOCK:
        if key in _HELD:
            return  # this process: the CLI's own lock, or an earlier step of a run here
        info = holder(key)
        if run_token and info and info.get("token") == run_token and is_held(key):
            return  # the CLI that launched this run holds it for its worker processes
        lock = BuildLock(key).acquire(what=f"Dagster run {run_id[:8]}", token=f"run:{run_id}")
        _HELD[key] = (lock, "run")


def release_for_run(index_dir: str | os.PathLike) -> None:
    """A run published: give back the lock a step took for it (not the CLI's)."""
    key = Path(index_dir).resolve()
    with _HELD_LOCK:
        entry = _HELD.get(key)
        if entry is not None and entry[1] == "run":
            del _HELD[key]
            entry[0].release()
