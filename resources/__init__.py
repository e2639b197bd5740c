"""Dagster resources: thin configurable wrappers over plain Strata objects."""

from strata.resources.corpora import CorpusRegistry
from strata.resources.embedder import EmbedderResource
from strata.resources.llm import LLMResource

__all__ = ["CorpusRegistry", "EmbedderResource", "LLMResource"]
