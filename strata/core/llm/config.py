"""An LLM's settings and the shapes of what goes in and out of it.

:class:`LLMConfig` holds every knob of one model; the ones a user sets take their
defaults from :class:`strata.core.config.settings.LLMSettings`, so each is declared once,
with its variable and bounds. :class:`LLMRequest` is one call (its fields are the
cache key's), :class:`LLMResult` what became of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strata.core.llm.backends import BACKENDS
from strata.core.config.settings import LLMSettings, default

__all__ = ["LLMConfig", "LLMRequest", "LLMResult", "BACKENDS", "JSON_MODES"]

JSON_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class LLMRequest:
    """One call. ``key`` names the item (a node id) for failure records."""

    key: str
    messages: tuple[dict[str, Any], ...]  # OpenAI chat messages; text content only
    template: str  # prompt template name + version, e.g. "summarize/v1": part of the cache key
    json_mode: bool = False
    max_tokens: int | None = None
    image: bytes | None = None  # sent as an image content part (vision)


@dataclass
class LLMResult:
    key: str
    text: str | None  # raw model output (None on failure)
    value: Any = None  # parse(text) when a parser was given
    error: str | None = None
    attempts: int = 0
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


def _default(name: str) -> Any:
    return default(LLMSettings, name)


@dataclass
class LLMConfig:
    """One LLM's settings. The ones a user sets (backend ... max_retries) take
    their defaults from :class:`strata.core.config.settings.LLMSettings`, where they are
    declared with their variables and bounds; :meth:`from_settings` builds one
    from it."""

    backend: str = _default("backend")  # one of BACKENDS (strata.core.llm.backends)
    model: str = _default("model")
    base_url: str | None = None
    api_key_env: str = _default("api_key_env")  # the *name* of the variable; the key is never stored
    temperature: float = _default("temperature")
    max_tokens: int = _default("max_tokens")
    concurrency: int = _default("concurrency")  # bounded worker pool
    timeout_s: float = _default("timeout_s")  # per request (openai backend)
    # retries of 408/409/429/5xx, timeouts and dropped connections (openai backend), or
    # of the callable's exceptions: one mechanism for both (strata.core.llm.retry)
    max_retries: int = _default("max_retries")
    backoff_base_s: float = 0.5  # backoff drawn from [0, base·2^n] ...
    # ... and no wait between two attempts longer, the server's Retry-After included
    backoff_max_s: float = 30.0
    # auto | on | off: send response_format={"type": "json_object"} for json_mode requests;
    # auto drops it for good once the server rejects it with a 400 naming response_format
    json_mode: str = "auto"
    parse_retries: int = 2  # extra calls when the output does not parse
    # the endpoint is probed (one GET /models) before a stage's first uncached call,
    # and the stage stops after this many connection failures in a row with no answer
    # in between (0: never): a dead endpoint fails in seconds, not after every item's
    # retries
    probe: bool = True
    breaker_failures: int = 8

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown LLM backend {self.backend!r} (expected one of {BACKENDS})")
        if self.json_mode not in JSON_MODES:
            raise ValueError(f"unknown json_mode {self.json_mode!r} (expected one of {JSON_MODES})")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")

    @classmethod
    def from_settings(cls, s: LLMSettings, **over: Any) -> LLMConfig:
        """From a :class:`strata.core.config.settings.LLMSettings`; ``over`` wins."""
        fields = ("backend", "model", "base_url", "api_key_env", "temperature", "max_tokens",
                  "concurrency", "timeout_s", "max_retries")
        return cls(**{**{f: getattr(s, f) for f in fields}, **over})
