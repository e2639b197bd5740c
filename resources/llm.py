"""The LLM the enrichment stages share."""

from __future__ import annotations

import importlib
import os
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
    # What the endpoint charges (US dollars per million tokens), for the cost shown
    # with each materialization and `strata index --dry-run`. Strings because they
    # are usually set through dg.EnvVar (STRATA_LLM_USD_PER_M_*), which Dagster
    # only resolves into string and int fields; checked when a run starts.
    usd_per_million_prompt_tokens: str | None = None
    usd_per_million_completion_tokens: str | None = None

    def setup_for_execution(self, context) -> None:
        usd_prices(self)  # a price that is not a number fails the run before any step

    def settings(self, overrides: dict | None = None) -> dict:
        """Which LLM a stage uses: the resource's settings, with what a corpus
        remembers (``overrides``: ``backend``, ``model``, ``base_url``,
        ``api_key_env``, ``callable_path``, ``vision_callable_path``) winning."""
        s = {"backend": self.backend, "model": self.model, "base_url": self.base_url,
             "api_key_env": self.api_key_env, "callable_path": self.callable_path,
             "vision_callable_path": self.vision_callable_path}
        s.update({k: v for k, v in (overrides or {}).items() if k in s and v is not None})
        return s

    def label(self, overrides: dict | None = None) -> str:
        """``offline``, ``openai:MODEL`` or ``callable:PATH``: the run tag and the
        metadata that say which LLM a build used."""
        s = self.settings(overrides)
        if s["backend"] == "offline":
            return "offline"
        return f"callable:{s['callable_path']}" if s["backend"] == "callable" \
            else f"{s['backend']}:{s['model']}"

    def client(self, cache_path: Path, vision: bool = False, overrides: dict | None = None):
        """The LLM for one stage (:meth:`settings` says which). A ``callable``
        backend without a vision callable cannot see images: captions then use
        the offline stand-in."""
        from strata.llm import LLM, LLMConfig

        s = self.settings(overrides)
        if vision and s["backend"] == "callable" and not s["vision_callable_path"]:
            return LLM(LLMConfig(backend="offline"))
        # a local server's pace (README: "A local model"); the settings model declares
        # these two variables properly (issue 19), this reads them until it lands
        env = os.environ
        config = LLMConfig(backend=s["backend"], model=s["model"], base_url=s["base_url"],
                           api_key_env=s["api_key_env"], temperature=self.temperature,
                           max_tokens=self.max_tokens,
                           concurrency=int(env.get("STRATA_LLM_CONCURRENCY") or self.concurrency),
                           timeout_s=float(env.get("STRATA_LLM_TIMEOUT_S") or self.timeout_s),
                           max_retries=self.max_retries)
        return LLM(config, cache_path=cache_path, fn=_load(s["callable_path"]),
                   vision_fn=_load(s["vision_callable_path"]))


def _load(path: str | None):
    if not path:
        return None
    module, _, name = path.partition(":")
    if not name:
        raise ValueError(f"callable_path {path!r} must look like 'package.module:function'")
    return getattr(importlib.import_module(module), name)


def usd_prices(resource) -> tuple[float | None, float | None]:
    """(prompt, completion) US dollars per million tokens, None where not set."""
    out = []
    for field, var in (("usd_per_million_prompt_tokens", "STRATA_LLM_USD_PER_M_PROMPT"),
                       ("usd_per_million_completion_tokens", "STRATA_LLM_USD_PER_M_COMPLETION")):
        raw = getattr(resource, field, None)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            out.append(None)
            continue
        try:
            out.append(float(raw))
        except (TypeError, ValueError):
            raise ValueError(f"the llm resource's {field} (${var}) must be a number of US "
                             f"dollars per million tokens, not {raw!r}") from None
    return out[0], out[1]
