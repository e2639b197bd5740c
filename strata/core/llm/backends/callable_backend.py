"""A user-injected ``fn(prompt: str) -> str`` (and optionally
``vision_fn(prompt: str, image: bytes) -> str``) as the model: for tests, and
for a model that is a Python function rather than a server. The request's
messages are joined into one prompt, system text first; its exceptions are
retried like a server's transient failures (:mod:`strata.core.llm.retry`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from strata.core.llm.backends.base import Backend
from strata.core.llm.errors import CallableRaised, RequestFailed
from strata.core.llm.prompts import est_tokens, prompt_text
from strata.core.llm.retry import call_with_retries

if TYPE_CHECKING:
    from strata.core.llm.backends.base import Host
    from strata.core.llm.config import LLMRequest

__all__ = ["CallableBackend"]


class CallableBackend(Backend):
    def __init__(self, host: Host, fn: Callable[[str], str] | None = None,
                 vision_fn: Callable[[str, bytes], str] | None = None):
        super().__init__(host)
        if fn is None and vision_fn is None:
            raise ValueError("callable backend needs fn (and/or vision_fn)")
        self._fn = fn
        self._vision_fn = vision_fn

    @property
    def name(self) -> str:
        f = self._fn or self._vision_fn
        return f"callable:{getattr(f, '__qualname__', type(f).__name__)}"

    def call(self, req: LLMRequest) -> tuple[str, int, int]:
        """The user's function, its exceptions retried: full-jitter exponential
        backoff, a wait that ends when the build stops or the LLM closes."""
        cfg, host = self.config, self.host
        prompt = prompt_text(req.messages)
        if req.image is not None:
            if self._vision_fn is None:
                raise RequestFailed("no vision_fn configured")
            vision_fn = self._vision_fn
            target: Callable[[], Any] = lambda: vision_fn(prompt, req.image)  # noqa: E731
        else:
            if self._fn is None:
                raise RequestFailed("no fn configured (only vision_fn)")
            fn = self._fn
            target = lambda: fn(prompt)  # noqa: E731

        def once() -> Any:
            try:
                return target()
            except Exception as e:  # noqa: BLE001 - user code: retried like a transient error
                raise CallableRaised(host.redact(f"{type(e).__name__}: {e}")) from None

        try:
            out = call_with_retries(
                once, retries=cfg.max_retries,
                retryable=lambda e: isinstance(e, CallableRaised),
                backoff_base_s=cfg.backoff_base_s, backoff_max_s=cfg.backoff_max_s,
                before_retry=lambda e, delay, n, of: host.retrying(str(e), delay, n, of),
                why_stop=host.why_stop, sleep=host.sleep)
        except CallableRaised as e:
            raise RequestFailed(str(e)) from None
        if not isinstance(out, str):
            raise RequestFailed(f"callable returned {type(out).__name__}, expected str")
        return out, est_tokens(prompt), est_tokens(out)
