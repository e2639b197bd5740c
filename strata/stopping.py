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

_stop = threading.Event()
_reason = [""]


class StopRequested(KeyboardInterrupt):
    """Raised by a long loop when the build is stopping (an interrupt, as Ctrl-C is)."""


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


def clear() -> None:
    _stop.clear()
    _reason[0] = ""
