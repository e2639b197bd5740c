"""A LangChain retriever over a Strata index (``pip install 'strata[langchain]'``).

::

    from strata.retrieval.integrations.langchain import StrataRetriever

    retriever = StrataRetriever(index="data/indexes/sample", k=6)
    docs = retriever.invoke("how do I correct for barometric drift?")
    docs[0].metadata["path"], docs[0].metadata["lines"], docs[0].metadata["relevance"]
    chain = retriever | format_docs | prompt | llm        # any LCEL chain

Each ``Document`` has the unit's text as ``page_content``, its node id as
``id`` and :func:`retrieval.integrations.metadata` as ``metadata``. The
search is :meth:`retrieval.Index.search`: ``mode`` (default: the default
mode), ``k`` (at most that many documents), ``budget_tokens`` (the best
context that fits, siblings merged into their parent, still at most ``k``),
``min_relevance`` (documents whose estimated relevance is lower are left out,
so a question the index cannot answer yields no documents rather than the
least bad ones; default: the index's floor) and any mode parameter in
``search_params``.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("the LangChain retriever needs langchain-core: "
                      "pip install 'strata[langchain]'") from e
from pydantic import Field, field_validator, model_validator

from strata.retrieval.integrations import check, metadata, open_index, search


class StrataRetriever(BaseRetriever):
    """Strata's search as a LangChain ``BaseRetriever``."""

    index: Any = Field(description="a retrieval.Index, an index folder or an object-storage URI")
    mode: str | None = Field(default=None, description="retrieval mode (default: auto)")
    k: int = Field(default=8, ge=1, description="results at most")
    budget_tokens: int | None = Field(
        default=None, ge=1, description="the best context within this many estimated tokens, "
                                        "at most k results (default mode)")
    min_relevance: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="relevance floor: documents less likely to be relevant are left out "
                    "(default: the index's, STRATA_MIN_RELEVANCE; 0 keeps all)")
    search_params: dict[str, Any] = Field(default_factory=dict,
                                          description="the mode's own parameters")

    @field_validator("index", mode="before")
    @classmethod
    def _open(cls, value: Any) -> Any:
        try:
            return open_index(value)
        except TypeError as e:  # pydantic reports ValueErrors as a ValidationError
            raise ValueError(str(e)) from None

    @model_validator(mode="after")
    def _check(self) -> StrataRetriever:
        check(self.mode, self.k, self.budget_tokens, self.min_relevance)
        return self

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        results = search(self.index, query, self.mode, self.k, self.budget_tokens,
                         self.search_params, self.min_relevance)
        return [Document(page_content=r.text, id=r.node_id, metadata=metadata(self.index, r))
                for r in results]
