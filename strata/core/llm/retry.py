"""Retries of a request to a model or an embedding endpoint: one mechanism
(tenacity) for every backend.

What is retried: whatever ``retryable`` says, which for an OpenAI-compatible
server (:func:`openai_retryable`) is HTTP 408, 409, 429 and 5xx (or what the
server's ``x-should-retry`` header says), timeouts and refused or dropped
connections, and for the callable backend its function's exceptions.

How long a retry waits: the server's own ``retry-after-ms`` / ``Retry-After``
(seconds, or an HTTP date) when it names one of at most two minutes; a server
that asks for longer is not retried at all, the item fails at once with its
answer. Otherwise exponential backoff with full jitter (a wait drawn from
``[0, base·2^n]``, at most ``backoff_max_s``). No wait is longer than
``max_wait_s``, the server's included.

Why not the SDK's own retries: it waits with ``time.sleep``, which nothing can
cut short. A build stopped by Ctrl-C, an LLM closed by its stage, a circuit
breaker that has seen enough would each sit out the whole wait on every worker
thread, and cutting that wait short meant overriding a private method of the
SDK. Here the wait is spent in ``sleep`` (by default
:func:`strata.core.stop_request.sleep`, which tests replace with a fake clock's):
when ``why_stop`` gives a reason the retry is not made, and
:class:`~strata.core.stop_request.RetryAbandoned` reaches the caller. So the SDK's
retries are off (``max_retries=0``), and :class:`RetryingOpenAI` retries its
calls here instead.

tenacity and openai are imported on first use: the query side imports this
package without calling a model.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from strata.core import stop_request as stopping
from strata.core.stop_request import RetryAbandoned

__all__ = ["RetryAbandoned", "RetryingOpenAI", "Sleep", "call_with_retries", "openai_retryable",
           "server_wait_s"]

T = TypeVar("T")

# sleep(seconds, why_not) -> the reason the wait ended early, or None (stopping.sleep's shape)
Sleep = Callable[[float, Callable[[], str | None]], str | None]
# before_retry(what failed, the wait in seconds, retry n, of max)
BeforeRetry = Callable[[BaseException, float, int, int], None]
# on_retry(HTTP answer or None, the exception when there was no answer, wait_s, retry n, of max)
OnRetry = Callable[[Any, BaseException | None, float, int, int], None]

MAX_SERVER_WAIT_S = 120.0  # a longer Retry-After is not waited for: the request fails


def call_with_retries(fn: Callable[[], T], *, retries: int,
                      retryable: Callable[[BaseException], bool],
                      backoff_base_s: float = 0.5, backoff_max_s: float = 8.0,
                      max_wait_s: float | None = None,
                      server_wait: Callable[[BaseException], float | None] = lambda e: None,
                      before_retry: BeforeRetry | None = None,
                      why_stop: Callable[[], str | None] = stopping.requested,
                      sleep: Sleep = stopping.sleep) -> T:
    """``fn()``, called again (up to ``retries`` more times) while it raises what
    ``retryable`` accepts; the last exception is raised as it is. Each wait is
    ``server_wait`` of the failure when it names one, else the backoff, capped
    at ``max_wait_s``; ``before_retry`` hears of it first."""
    import tenacity

    backoff = tenacity.wait_random_exponential(multiplier=backoff_base_s, max=backoff_max_s)

    def wait(state: tenacity.RetryCallState) -> float:
        asked = server_wait(state.outcome.exception())
        delay = backoff(state) if asked is None else asked
        return delay if max_wait_s is None else min(delay, max_wait_s)

    def announce(state: tenacity.RetryCallState) -> None:
        if before_retry is not None:
            before_retry(state.outcome.exception(), state.upcoming_sleep, state.attempt_number,
                         retries)

    def pause(seconds: float) -> None:
        why = sleep(seconds, why_stop)
        if why:
            raise RetryAbandoned(why)

    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retries + 1), wait=wait,
        retry=tenacity.retry_if_exception(retryable), before_sleep=announce, sleep=pause,
        reraise=True,
    )(fn)


# --------------------------------------------------------------------------- OpenAI-compatible

def server_wait_s(headers: Mapping[str, str]) -> float | None:
    """The wait an HTTP answer asks for: ``retry-after-ms``, else ``Retry-After``
    in seconds or as an HTTP date; None when it names none."""
    for name, per_second in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / per_second
        except ValueError:
            continue
    try:
        when = email.utils.parsedate_tz(headers.get("retry-after"))
        return None if when is None else float(email.utils.mktime_tz(when) - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _answer(exc: BaseException) -> Any:
    """The HTTP answer behind an SDK exception, or None when there was none."""
    import openai

    return exc.response if isinstance(exc, openai.APIStatusError) else None


def openai_retryable(exc: BaseException) -> bool:
    """Whether the SDK's exception is worth another attempt (see the module docstring)."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # timeouts too (APITimeoutError)
        return True
    answer = _answer(exc)
    if answer is None:
        return False
    asked = server_wait_s(answer.headers)
    if asked is not None and not math.isnan(asked) and asked > MAX_SERVER_WAIT_S:
        return False
    flag = answer.headers.get("x-should-retry")
    if flag in ("true", "false"):
        return flag == "true"
    return answer.status_code in (408, 409, 429) or answer.status_code >= 500


def openai_server_wait(exc: BaseException) -> float | None:
    answer = _answer(exc)
    asked = server_wait_s(answer.headers) if answer is not None else None
    return asked if asked is not None and math.isfinite(asked) and 0 < asked else None


class RetryingOpenAI:
    """An ``openai.OpenAI`` client (the SDK's retries off) whose ``chat`` and
    ``embeddings`` calls are retried by :func:`call_with_retries`, as the SDK
    would (:func:`openai_retryable`, the server's ``Retry-After``) but with a
    wait a build can cut short. ``on_retry`` hears of each retry first, with
    the HTTP answer (429, 5xx) or the exception (no answer) that caused it."""

    def __init__(self, *, max_retries: int = 2, on_retry: OnRetry | None = None,
                 why_stop: Callable[[], str | None] = stopping.requested,
                 max_wait_s: float | None = None, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 8.0, sleep: Sleep = stopping.sleep, **kwargs: Any):
        import openai

        self._client = openai.OpenAI(max_retries=0, **kwargs)

        def before_retry(exc: BaseException, delay: float, n: int, of: int) -> None:
            if on_retry is not None:
                answer = _answer(exc)
                on_retry(answer, exc if answer is None else None, delay, n, of)

        def call(fn: Callable[[], T]) -> T:
            return call_with_retries(
                fn, retries=max_retries, retryable=openai_retryable,
                backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s, max_wait_s=max_wait_s,
                server_wait=openai_server_wait, before_retry=before_retry, why_stop=why_stop,
                sleep=sleep)

        self.chat = _Retried(self._client.chat, call)
        self.embeddings = _Retried(self._client.embeddings, call)

    def close(self) -> None:
        self._client.close()


class _Retried:
    """A resource of the SDK's client (``chat``, ``chat.completions``,
    ``embeddings``): its attributes are wrapped likewise, and calling one of its
    methods goes through ``call`` (the retries)."""

    def __init__(self, target: Any, call: Callable[[Callable[[], Any]], Any]):
        self._target = target
        self._call = call

    def __getattr__(self, name: str) -> _Retried:
        return _Retried(getattr(self._target, name), self._call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(lambda: self._target(*args, **kwargs))
