"""The exceptions that pass between :class:`strata.core.llm.LLM` and its backends.

Only :class:`LLMStreamError` reaches callers (:meth:`LLM.stream`); the others say
to the item loop what became of one request, so that the loop alone decides what
is retried, recorded or counted by the circuit breaker, whatever the backend."""

from __future__ import annotations

__all__ = ["LLMStreamError", "RequestFailed", "FormatRejected", "CallableRaised"]


class LLMStreamError(RuntimeError):
    """A streamed answer that failed (before its first piece after the retries,
    or midway); the message names why, with any key redacted."""


class RequestFailed(Exception):
    """An item's request failed for good (its retries spent, or not worth retrying).
    ``connection``: there was no answer at all (refused, reset, timed out), which the
    circuit breaker counts; an HTTP answer of any status resets it. ``status``: that
    answer's HTTP status, when the server gave one."""

    def __init__(self, message: str, connection: str | None = None, status: int | None = None):
        super().__init__(message)
        self.connection = connection
        self.status = status


class FormatRejected(Exception):
    """The server refused ``response_format`` (or ``stream_options``); ask again at
    once without it."""


class CallableRaised(Exception):
    """The callable backend's function raised: retried like a transient HTTP failure."""
