"""The default backend: no model at all. ``LLM.offline`` is True and each stage
uses its own deterministic stand-in (extractive summaries, heuristic OpenIE,
captions from alt text and context) instead of calling the LLM."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strata.core.llm.backends.base import Backend

if TYPE_CHECKING:
    from strata.core.llm.config import LLMRequest

__all__ = ["OfflineBackend"]


class OfflineBackend(Backend):
    offline = True

    @property
    def name(self) -> str:
        return "offline"

    def call(self, req: LLMRequest) -> tuple[str | None, int, int]:
        raise RuntimeError("offline backend: the stage must use its offline stand-in")
