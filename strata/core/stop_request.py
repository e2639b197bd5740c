"""A process-wide request to stop the build in progress.

`strata index` sets it when the user presses Ctrl-C or sends SIGTERM
(:mod:`pipelines.interrupt`). Signals alone are not enough: Dagster turns an
interrupt inside a step into that step's failure and then carries on with the
steps that do not depend on it, and a signal can land on a worker thread while
the main thread waits. So the long loops (LLM calls, encoder batches, parsing)
and the start of every step look at this flag too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

_stop = threading.Event()
_reason = [""]


class StopRequested(KeyboardInterrupt):
    """Raised by a long loop when the build is stopping (an interrupt, as Ctrl-C is)."""


class RetryAbandoned(Exception):
    """A retry that was not made, and why: its wait (:func:`sleep`) was cut short
    because the build is stopping, the client's owner closed, ..."""


def request(reason: str) -> None:
    _reason[0] = reason
    _stop.set()


def requested() -> str | None:
    """Why the build is stopping, or None."""
    if not _stop.is_set():
        return None
    return _reason[0] or "stop requested"


def check() -> None:
    """Raise :class:`StopRequested` when the build is stopping."""
    if _stop.is_set():
        raise StopRequested(_reason[0] or "stop requested")


def sleep(seconds: float, why_not: Callable[[], str | None] = requested,
          poll_s: float = 0.1) -> str | None:
    """Wait ``seconds`` (between two attempts at a request), or less: ``why_not``
    (by default :func:`requested`) is asked every ``poll_s``, and its first
    reason ends the wait and is returned. None when the time ran out. Any
    thread may call it; a plain ``time.sleep`` on a worker thread would hold a
    stopping build for the whole wait."""
    deadline = time.monotonic() + max(0.0, seconds)
    while True:
        why = why_not()
        if why:
            return why
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if _stop.is_set():  # a why_not that does not care: no busy loop
            time.sleep(min(left, poll_s))
        else:
            _stop.wait(min(left, poll_s))  # a stop request ends the slice at once


def clear() -> None:
    _stop.clear()
    _reason[0] = ""
