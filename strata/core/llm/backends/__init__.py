"""The LLM's backends, by the name ``LLMConfig.backend`` gives, and how to add one.

A backend is one module here with a :class:`~strata.core.llm.backends.base.Backend`
subclass, plus one line in ``_REGISTRY`` below. Its module is imported only when
an LLM of that backend is made, so the query side pays for none it does not use
(the openai backend's SDK, tenacity)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strata.core.llm.backends.base import Backend

__all__ = ["BACKENDS", "backend_class"]

# name -> "module:class"
_REGISTRY = {
    "offline": "strata.core.llm.backends.offline:OfflineBackend",
    "openai": "strata.core.llm.backends.openai_backend:OpenAIBackend",
    "callable": "strata.core.llm.backends.callable_backend:CallableBackend",
}

BACKENDS = tuple(_REGISTRY)


def backend_class(name: str) -> type[Backend]:
    """The class of the backend named ``name`` (one of :data:`BACKENDS`)."""
    module, _, cls = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)
