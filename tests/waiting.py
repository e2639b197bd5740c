"""Waiting for another process or thread to get somewhere: a server to listen, a
reload to land. One helper so that every wait is a liveness guard with a generous
limit that says what never happened — never an assertion about how fast something
ran (speed is measured by `make bench`, not asserted by tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str, *, limit_s: float = 120.0,
               poll_s: float = 0.05) -> T:
    """Call ``condition`` until it returns something truthy and return that; raise
    ``TimeoutError(what)`` if it never does within ``limit_s`` (a hang, not a slow
    machine: the limits are minutes apart from the usual seconds)."""
    end = time.monotonic() + limit_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            raise TimeoutError(f"{what} (waited {limit_s:g} s)")
        time.sleep(poll_s)


def stopped_while(call: Callable[[], object], waiting: Callable[[], bool], what: str,
                  then: Callable[[], None] | None = None) -> list[BaseException]:
    """Run ``call`` on a thread; once ``waiting()`` holds (say, a retry wait was
    logged), request a stop as Ctrl-C does and wait for the thread (and ``then``,
    e.g. joining the pool's workers) before the stop flag is cleared. Returns what
    ``call`` raised: the stop ends waits, so no test sits out a server's minute."""
    import threading

    from strata.core import stop_request as stopping

    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as e:  # noqa: BLE001 - what the caller would see
            raised.append(e)

    worker = threading.Thread(target=run)
    try:
        worker.start()
        wait_until(waiting, what)
        stopping.request("SIGINT (test)")
        worker.join()
        if then is not None:
            then()
    finally:
        stopping.clear()
    return raised
