"""How callers get an LLM: from what they were passed as ``llm=`` (:func:`as_llm`),
or from a query-side program's flags and environment (:func:`query_llm`)."""

from __future__ import annotations

from typing import Any

from strata.core.llm.client import LLM
from strata.core.llm.config import LLMConfig
from strata.core.config.settings import LLMSettings, load

__all__ = ["as_llm", "query_llm"]


def as_llm(llm: Any, **config: Any) -> tuple[LLM | None, bool]:
    """Accept what callers pass as ``llm=``: an :class:`LLM`, a plain
    ``str -> str`` callable (wrapped in a callable-backend LLM), or None.
    Returns (usable LLM or None, whether this call created it and must close
    it); an offline LLM counts as none."""
    if llm is None:
        return None, False
    if isinstance(llm, LLM):
        return (None, False) if llm.offline else (llm, False)
    if callable(llm):
        return LLM(LLMConfig(backend="callable", **config), fn=llm), True
    raise TypeError(f"llm must be a strata.core.llm.LLM or a str -> str callable, "
                    f"not {type(llm).__name__}")


def query_llm(backend: str | None = None, model: str | None = None,
              base_url: str | None = None, callable_path: str | None = None,
              max_tokens: int | None = None) -> LLM | None:
    """The LLM a query-side program (the CLI's search/ask, the HTTP service) uses:
    the given settings (flags), else :class:`strata.core.config.settings.LLMSettings` read from
    the environment (``$STRATA_LLM_*``); None when offline. ``callable_path`` is
    ``'package.module:function'`` and implies the callable backend. A bad setting
    raises :class:`strata.core.config.settings.SettingsError` (a ValueError), in one line."""
    import importlib

    s = load(LLMSettings, backend=backend or ("callable" if callable_path else None),
             model=model, base_url=base_url, callable_path=callable_path)
    if s.backend == "offline":
        return None
    fn = None
    if s.backend == "callable":
        module, _, name = (s.callable_path or "").partition(":")
        if not module or not name:
            raise ValueError("the callable LLM backend needs 'package.module:function' "
                             "(--llm-callable or $STRATA_LLM_CALLABLE)")
        fn = getattr(importlib.import_module(module), name)
    return LLM(LLMConfig.from_settings(s, max_tokens=max_tokens or s.answer_max_tokens), fn=fn)
