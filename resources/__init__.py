"""Dagster resources: thin configurable wrappers over plain Strata objects."""

from resources.corpora import CorpusRegistry
from resources.embedder import EmbedderResource
from resources.llm import LLMResource

__all__ = ["CorpusRegistry", "EmbedderResource", "LLMResource"]
