"""What a backend is to the LLM, and what the LLM lends it.

The LLM (:class:`strata.core.llm.LLM`) owns what every backend shares: the
cache, the worker pool, the stats, the circuit breaker, parse retries. A backend
only sends one request and says what came of it: the text and its token counts,
or :class:`~strata.core.llm.errors.RequestFailed` (with ``connection`` set when
there was no answer at all) or :class:`~strata.core.llm.errors.FormatRejected`.
What it needs of the LLM comes in a :class:`Host`, so a backend never reaches
into the LLM's state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strata.core.llm.config import LLMConfig, LLMRequest
    from strata.core.llm.retry import Sleep
    from strata.core.llm.throttle import Throttle

__all__ = ["Backend", "Host"]


@dataclass(frozen=True)
class Host:
    """What the LLM lends its backend."""

    config: LLMConfig
    throttle: Throttle  # requests in flight (lowered on timeouts)
    redact: Callable[[str], str]  # the key's value and any bearer token become ***
    redact_key: Callable[[str], str]  # the key's value only (model output)
    why_stop: Callable[[], str | None]  # why no (further) request should be sent, or None
    # a retry of this thread's item is about to wait: (what failed, wait_s, retry n, of max)
    retrying: Callable[[str, float, int, int], None]
    answered: Callable[[], None]  # an HTTP answer came (the breaker's run ends)
    connection_failed: Callable[[str], None]  # no answer at all (the breaker counts it)
    sleep: Sleep  # the wait between two attempts


class Backend:
    """One way of answering an :class:`~strata.core.llm.config.LLMRequest`.
    ``fn`` and ``vision_fn`` are the callable backend's; others ignore them."""

    offline = False  # True: no model; the stages use their deterministic stand-ins

    def __init__(self, host: Host, fn: Callable[[str], str] | None = None,
                 vision_fn: Callable[[str, bytes], str] | None = None):
        self.host = host
        self.config = host.config

    @property
    def name(self) -> str:
        """Names the model in the cache key and the stats (never a secret)."""
        raise NotImplementedError

    @property
    def endpoint(self) -> str:
        """What error messages name as the endpoint."""
        return self.name

    def probe(self) -> None:
        """Before a stage's first uncached call: raise EndpointError when nothing answers."""

    def busy(self) -> bool:
        """After a timeout: does the endpoint still answer a cheap request?"""
        return False

    def call(self, req: LLMRequest) -> tuple[str | None, int, int]:
        """The answer's text (None: an empty answer) and its prompt and completion tokens."""
        raise NotImplementedError

    def stream(self, req: LLMRequest, usage: Callable[[int, int], None]) -> Iterator[str]:
        """The answer's pieces as they come; ``usage`` hears the server's token
        counts when it sends them. By default the whole answer at once."""
        text, _, _ = self.call(req)
        if text is not None:
            yield text

    def close(self) -> None:
        """Release what the backend holds (a client's connections)."""
