"""Query side of Strata: open a built index and search it.

Never imports dagster: a notebook or service loads an index without the
orchestrator.
"""

from retrieval.index import Index
from retrieval.results import Result
from strata.embedding import EmbeddingModelMismatch
from strata.layout import IndexNotFound

__all__ = ["EmbeddingModelMismatch", "Index", "IndexNotFound", "Result"]
