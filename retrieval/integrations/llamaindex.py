"""A LlamaIndex retriever over a Strata index (``pip install 'strata[llamaindex]'``).

::

    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.query_engine import RetrieverQueryEngine
    from strata.retrieval.integrations.llamaindex import StrataRetriever

    retriever = StrataRetriever("data/indexes/sample", k=6)
    nodes = retriever.retrieve("how do I correct for barometric drift?")
    nodes[0].score, nodes[0].node.metadata["path"], nodes[0].node.metadata["lines"]
    engine = RetrieverQueryEngine.from_args(
        retriever, llm=my_llm,
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.5)])

Each ``NodeWithScore`` holds a ``TextNode`` (the unit's text, its node id as
``id_``, :func:`retrieval.integrations.metadata` as ``metadata``) and, as its
``score``, the unit's estimated *relevance*: the probability that it is
relevant to the query, comparable across queries, so that a postprocessor's
cutoff (``SimilarityPostprocessor(similarity_cutoff=0.5)``) means the same
thing for every query. The mode's ranking score, which only orders one
query's results, stays in the metadata as ``score``. What an LLM sees of the
metadata is the part that helps it cite: breadcrumb, location, kind and url;
the ids, scores and context stay out of the prompt and out of any embedding
(``excluded_*_metadata_keys``).
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("the LlamaIndex retriever needs llama-index-core: "
                      "pip install 'strata[llamaindex]'") from e

from strata.retrieval.integrations import check, metadata, open_index, search

SHOWN_TO_LLM = ("breadcrumb", "location", "kind", "url")


class StrataRetriever(BaseRetriever):
    """Strata's search as a LlamaIndex ``BaseRetriever``: ``mode`` (default:
    the default mode), ``k`` (nodes at most), ``budget_tokens`` (a second cap),
    ``min_relevance`` (nodes less likely to be relevant are left out; default:
    the index's floor, 0 keeps all), and the mode's own parameters as
    ``search_params``."""

    def __init__(self, index: Any, mode: str | None = None, k: int = 8,
                 budget_tokens: int | None = None,
                 search_params: dict[str, Any] | None = None,
                 min_relevance: float | None = None, **kwargs: Any) -> None:
        check(mode, k, budget_tokens, min_relevance)
        self.index = open_index(index)
        self.mode = mode
        self.k = int(k)
        self.budget_tokens = budget_tokens
        self.min_relevance = min_relevance
        self.search_params = dict(search_params or {})
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = search(self.index, query_bundle.query_str, self.mode, self.k,
                         self.budget_tokens, self.search_params, self.min_relevance)
        out = []
        for r in results:
            meta = metadata(self.index, r)
            hidden = [key for key in meta if key not in SHOWN_TO_LLM]
            node = TextNode(text=r.text, id_=r.node_id, metadata=meta,
                            excluded_llm_metadata_keys=hidden,
                            excluded_embed_metadata_keys=list(meta))
            # the relevance, not the ranking score: postprocessor cutoffs compare it
            out.append(NodeWithScore(node=node, score=r.relevance))
        return out
