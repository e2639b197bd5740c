"""The LLM the enrichment stages share."""

from __future__ import annotations

import importlib
from pathlib import Path

import dagster as dg

from strata.core.config.settings import LLMSettings, check, resource_field


def _D(name: str):  # noqa: N802 - reads as the declared field
    return resource_field(LLMSettings, name)


class LLMResource(dg.ConfigurableResource):
    """Which LLM the stages call, and how hard.

    ``backend``: ``offline`` (default: deterministic stand-ins, no model),
    ``openai`` (any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama; key from
    the environment variable named by ``api_key_env``), or ``callable``
    (``callable_path`` = ``"package.module:function"``, a ``str -> str``
    function; ``vision_callable_path`` optionally for images).
    """

    # declared by strata.core.config.settings.LLMSettings (default, and a description naming the
    # variable); pipelines.definitions gives each field whose variable is set as dg.EnvVar
    backend: str = _D("backend")
    model: str = _D("model")
    base_url: str | None = _D("base_url")
    api_key_env: str = _D("api_key_env")
    temperature: float = _D("temperature")
    max_tokens: int = _D("max_tokens")
    concurrency: int = _D("concurrency")
    timeout_s: float = _D("timeout_s")
    max_retries: int = _D("max_retries")
    callable_path: str | None = _D("callable_path")
    vision_callable_path: str | None = _D("vision_callable_path")
    # What the endpoint charges (US dollars per million tokens), for the cost shown
    # with each materialization and `strata index --dry-run`. Strings because they
    # are usually set through dg.EnvVar (STRATA_LLM_USD_PER_M_*), which Dagster
    # only resolves into string and int fields; checked when a run starts.
    usd_per_million_prompt_tokens: str | None = None
    usd_per_million_completion_tokens: str | None = None

    def setup_for_execution(self, context) -> None:
        self.checked()  # a bad value (a price that is not a number) fails the run before any step

    def checked(self) -> LLMSettings:
        """The resource's values (its dg.EnvVar fields resolved) validated as
        :class:`LLMSettings` validates its variables: one line naming the variable
        when one cannot be used."""
        return check(LLMSettings, {f: getattr(self, f) for f in LLMSettings.model_fields
                                   if f in type(self).model_fields})

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
        from strata.core.llm import LLM, LLMConfig

        s = self.settings(overrides)
        if vision and s["backend"] == "callable" and not s["vision_callable_path"]:
            return LLM(LLMConfig(backend="offline"))
        config = LLMConfig.from_settings(self.checked(), backend=s["backend"], model=s["model"],
                                         base_url=s["base_url"], api_key_env=s["api_key_env"])
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
    """(prompt, completion) US dollars per million tokens, None where not set;
    :class:`strata.core.config.settings.SettingsError` (a ValueError) for a price that is not
    a number."""
    fields = ("usd_per_million_prompt_tokens", "usd_per_million_completion_tokens")
    s = check(LLMSettings, {f: getattr(resource, f, None) for f in fields})
    return s.usd_per_million_prompt_tokens, s.usd_per_million_completion_tokens
