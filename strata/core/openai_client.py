"""The openai SDK's client with the SDK's own retries, and a wait a build can cut short.

The SDK decides what is retried (408, 409, 429, 5xx, timeouts, dropped
connections; a server's ``x-should-retry``), how long to wait (the server's
``retry-after-ms`` / ``Retry-After``, seconds or an HTTP date, up to two
minutes; else 0.5 s doubling to 8 s, jittered) and sends one idempotency key
with every attempt. It waits with ``time.sleep``, which nothing can cut short:
a build stopped by Ctrl-C, an LLM closed by its stage, a circuit breaker that
has seen enough would each sit out the whole wait on every worker thread, and
a process does not exit before its worker threads.

So :class:`RetryingOpenAI` overrides the one method that sleeps,
``_sleep_for_retry`` (private, with the same signature from openai 1.80 to
3.x: pyproject holds openai below 4, and tests/test_llm.py fails if the SDK
stops calling it). Its wait is the SDK's own delay, capped at ``max_wait_s``,
spent in :func:`strata.core.stopping.sleep` slices; ``on_retry`` hears of each retry
first, with the answer or the exception that caused it. When ``why_stop``
gives a reason the retry is not made: :class:`RetryAbandoned` leaves the SDK's
loop (it catches transport errors only) and reaches the caller.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import openai

from strata.core import stopping
from strata.core.stopping import RetryAbandoned

__all__ = ["RetryAbandoned", "RetryingOpenAI"]

# on_retry(answer or None, the exception when there was no answer, delay_s, retry n, of max)
OnRetry = Callable[[Any, BaseException | None, float, int, int], None]


class RetryingOpenAI(openai.OpenAI):
    """``openai.OpenAI`` whose waits between retries end early (see the module docstring)."""

    def __init__(self, *, on_retry: OnRetry | None = None,
                 why_stop: Callable[[], str | None] = stopping.requested,
                 max_wait_s: float | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._on_retry = on_retry
        self._why_stop = why_stop
        self._max_wait_s = max_wait_s

    def _sleep_for_retry(self, *, retries_taken: int, max_retries: int, options: Any,
                         response: Any, **_: Any) -> None:
        # the SDK calls this from its except clause: the exception is what failed
        # (a timeout, a refused or dropped connection) when there is no response
        failure = sys.exc_info()[1] if response is None else None
        delay = self._calculate_retry_timeout(max_retries - retries_taken, options,
                                              response.headers if response is not None else None)
        if self._max_wait_s is not None:
            delay = min(delay, self._max_wait_s)
        if self._on_retry is not None:
            self._on_retry(response, failure, delay, retries_taken + 1, max_retries)
        why = stopping.sleep(delay, self._why_stop)
        if why:
            raise RetryAbandoned(why)
