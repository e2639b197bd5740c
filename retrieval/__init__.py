"""Query side of Strata: open a built index and search it.

Never imports dagster: a notebook or service loads an index without the
orchestrator.
"""

from strata.retrieval.index import Index
from strata.retrieval.results import Result
from strata.core.encoders.embedding import EmbeddingModelMismatch
from strata.core.storage.layout import IndexNotFound

__all__ = ["EmbeddingModelMismatch", "Index", "IndexNotFound", "Result"]
