"""The LLM the enrichment stages share."""

from __future__ import annotations

import importlib
from pathlib import Path

import dagster as dg


class LLMResource(dg.ConfigurableResource):
    """Which LLM the stages call, and how hard.

    ``backend``: ``offline`` (default: deterministic stand-ins, no model),
    ``openai`` (any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama; key from
    the environment variable named by ``api_key_env``), or ``callable``
    (``callable_path`` = ``"package.module:function"``, a ``str -> str``
    function; ``vision_callable_path`` optionally for images).
    """

    backend: str = "offline"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 512
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 5
    callable_path: str | None = None
    vision_callable_path: str | None = None
    # what the endpoint charges, for the cost shown with each materialization
    usd_per_million_prompt_tokens: float | None = None
    usd_per_million_completion_tokens: float | None = None

    def client(self, cache_path: Path, vision: bool = False, overrides: dict | None = None):
        """The LLM for one stage. ``overrides``: settings a corpus remembers
        (``backend``, ``model``, ``base_url``, ``api_key_env``, ``callable_path``,
        ``vision_callable_path``), which win over the resource's. A ``callable``
        backend without a vision callable cannot see images: captions then use
        the offline stand-in."""
        from strata.llm import LLM, LLMConfig

        s = {"backend": self.backend, "model": self.model, "base_url": self.base_url,
             "api_key_env": self.api_key_env, "callable_path": self.callable_path,
             "vision_callable_path": self.vision_callable_path}
        s.update({k: v for k, v in (overrides or {}).items() if k in s and v is not None})
        if vision and s["backend"] == "callable" and not s["vision_callable_path"]:
            return LLM(LLMConfig(backend="offline"))
        config = LLMConfig(backend=s["backend"], model=s["model"], base_url=s["base_url"],
                           api_key_env=s["api_key_env"], temperature=self.temperature,
                           max_tokens=self.max_tokens, concurrency=self.concurrency,
                           timeout_s=self.timeout_s, max_retries=self.max_retries)
        return LLM(config, cache_path=cache_path, fn=_load(s["callable_path"]),
                   vision_fn=_load(s["vision_callable_path"]))


def _load(path: str | None):
    if not path:
        return None
    module, _, name = path.partition(":")
    if not name:
        raise ValueError(f"callable_path {path!r} must look like 'package.module:function'")
    return getattr(importlib.import_module(module), name)
