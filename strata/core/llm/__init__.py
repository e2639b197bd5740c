"""The LLM every enrichment stage (and ``ask``) shares: one model, three backends,
one cache, one retry mechanism.

Backends (:mod:`strata.core.llm.backends`, one module each plus a registry entry):

- ``openai``: the ``openai`` SDK against any OpenAI-compatible base URL
  (OpenAI, vLLM, Ollama, ...). Key read from the environment variable named by
  ``api_key_env``; never logged or written anywhere.
- ``callable``: a user-injected ``fn(prompt: str) -> str`` (and optionally
  ``vision_fn(prompt: str, image: bytes) -> str``).
- ``offline`` (default): no model at all. ``LLM.offline`` is True and each
  stage uses its own deterministic stand-in instead of calling ``run``.

The pieces: :mod:`~strata.core.llm.client` (:class:`LLM`: the item loop, the
cache, concurrency, parse retries, streaming), :mod:`~strata.core.llm.breaker`
(stops a stage whose endpoint stopped answering), :mod:`~strata.core.llm.retry`
(retries of transient failures, for every backend), :mod:`~strata.core.llm.throttle`
(requests in flight), :mod:`~strata.core.llm.cache`, :mod:`~strata.core.llm.parsing`
(tolerant JSON), :mod:`~strata.core.llm.prompts` and :mod:`~strata.core.llm.stats`.

Importing the package loads neither the SDK nor tenacity: the query side
imports it whether or not it asks a model.
"""

from __future__ import annotations

from strata.core.llm.endpoints import EndpointError
from strata.core.llm.client import LLM
from strata.core.llm.config import BACKENDS, JSON_MODES, LLMConfig, LLMRequest, LLMResult
from strata.core.llm.errors import LLMStreamError
from strata.core.llm.factory import as_llm, query_llm
from strata.core.llm.parsing import parse_json
from strata.core.llm.prompts import image_mime, quote_data
from strata.core.llm.stats import StageStats

__all__ = ["LLM", "LLMConfig", "LLMRequest", "LLMResult", "LLMStreamError", "StageStats",
           "parse_json", "image_mime", "quote_data", "EndpointError", "as_llm", "query_llm",
           "BACKENDS", "JSON_MODES"]
