"""The circuit breaker that stops a stage whose endpoint has stopped answering.

Each item's request has its own retries; against a dead server a stage of
thousands of items would spend all of them, one item after another. The breaker
counts connection failures in a row (no answer at all: refused, reset, timed
out) across the stage's worker threads; any HTTP answer, even a 500, resets the
count, because a server that answers is there. After ``limit`` failures in a row
it trips: the queued items are not sent, and waits to retry end at once.

A timeout is weighed before it is counted: a local server that answers one
request at a time times out the requests queued behind a slow model while it
answers a cheap ``GET /models`` at once. That server is busy, which the
throttle (:mod:`strata.core.llm.throttle`) deals with, not dead, so ``busy``
(the backend's own check) is asked first and a busy endpoint is not counted."""

from __future__ import annotations

import threading
from collections.abc import Callable

from strata.core.llm.endpoints import EndpointError, unreachable_hint

__all__ = ["CircuitBreaker"]


class CircuitBreaker:
    """Connection failures in a row of one endpoint (see the module docstring)."""

    def __init__(self, limit: int, endpoint: str, busy: Callable[[], bool] = lambda: False):
        self.limit = limit  # 0: never trips
        self.endpoint = endpoint
        self._busy = busy
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self._last_problem = ""
        self._tripped_after = 0
        self.tripped = threading.Event()

    def answered(self) -> None:
        """The endpoint gave an HTTP answer (any status): the run of failures ends."""
        with self._lock:
            self._failures_in_a_row = 0

    def connection_failed(self, problem: str) -> None:
        """A request got no answer; ``problem`` says how (``describe_connection_error``)."""
        if problem.startswith("does not answer") and self._busy():
            return
        with self._lock:
            self._failures_in_a_row += 1
            self._last_problem = problem
            if self.limit and self._failures_in_a_row >= self.limit and not self.tripped.is_set():
                self._tripped_after = self._failures_in_a_row
                self.tripped.set()

    def error(self) -> EndpointError:
        """What the stage raises once tripped: one line naming the endpoint and why."""
        problem = self._last_problem or "cannot be reached (connection error)"
        return EndpointError(
            "LLM", self.endpoint,
            f"{problem}: {self._tripped_after} requests in a row got no answer",
            unreachable_hint("LLM", self.endpoint))
