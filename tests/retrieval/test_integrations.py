"""Strata inside LangChain and LlamaIndex: each retriever is run by its
framework's own retrieval call (``invoke``/``ainvoke`` and an LCEL chain with
a callback handler; ``retrieve`` and a ``RetrieverQueryEngine``) on the shared
sample index, and what comes back is checked against the index itself. Skipped
only where the extra (``strata[langchain]``, ``strata[llamaindex]``) is not
installed; ``make install`` installs both."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from strata.retrieval import Index
from strata.core.tokens import estimate_tokens

QUERY = "how do I correct pressure readings for barometric drift?"
META = {"node_id", "kind", "path", "lines", "location", "breadcrumb", "relation", "score",
        "relevance", "corpus", "version"}


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ModuleNotFoundError, ValueError):  # its parent package is missing
        return True


# marks, not importorskip in the body: a missing extra skips before the index is built
needs_langchain = pytest.mark.skipif(
    _missing("langchain_core"), reason="strata[langchain] is not installed")
needs_llamaindex = pytest.mark.skipif(
    _missing("llama_index.core"), reason="strata[llamaindex] is not installed")


@pytest.fixture(scope="module")
def index(sample_index):
    return Index.open(sample_index)


# -- LangChain ----------------------------------------------------------------

@needs_langchain
def test_langchain_retriever_returns_documents_with_strata_metadata(index, sample_index):
    from langchain_core.documents import Document

    from strata.retrieval.integrations.langchain import StrataRetriever

    retriever = StrataRetriever(index=str(sample_index), k=5)  # a folder is opened
    docs = retriever.invoke(QUERY)
    direct = index.search(QUERY, k=5)
    assert [d.id for d in docs] == [r.node_id for r in direct] and len(docs) == 5
    for d, r in zip(docs, direct):
        assert isinstance(d, Document)
        assert d.page_content == r.text and d.page_content.strip()
        assert META <= set(d.metadata), set(d.metadata)
        m = d.metadata
        assert m["node_id"] == d.id and m["path"] == r.path and m["kind"] == r.kind
        assert m["score"] == pytest.approx(r.score) and m["relation"] == r.relation
        assert m["relevance"] == pytest.approx(r.relevance) and 0.0 <= m["relevance"] <= 1.0
        assert m["breadcrumb"].startswith(r.path) and m["location"] == r.location()
        if r.start_line is not None:
            assert m["lines"] in (f"{r.start_line}-{r.end_line}", str(r.start_line))
            assert m["start_line"] == r.start_line
    # the drift passage comes first, in its file's hierarchy, with where it sits
    top = docs[0].metadata
    assert "Barometric drift" in top["breadcrumb"] and top["corpus"] == "sample"
    assert any(c["relation"] == "parent" for c in top["context"])

    # async, as an async chain calls it
    adocs = asyncio.run(retriever.ainvoke(QUERY))
    assert [d.id for d in adocs] == [d.id for d in docs]


@needs_langchain
def test_langchain_retriever_in_a_chain_is_traced_and_feeds_the_prompt(index):
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from strata.retrieval.integrations.langchain import StrataRetriever

    class Seen(BaseCallbackHandler):
        def __init__(self):
            self.retrieved, self.prompts = [], []

        def on_retriever_end(self, documents, **kwargs):
            self.retrieved.append(documents)

        def on_chat_model_start(self, serialized, messages, **kwargs):
            self.prompts.append(messages[0][-1].content)

    def cite(docs):
        return "\n\n".join(f"[{d.metadata['location']}] {d.metadata['breadcrumb']}\n"
                           f"{d.page_content}" for d in docs)

    retriever = StrataRetriever(index=index, k=3, search_params={"kinds": ["section"]})
    prompt = ChatPromptTemplate.from_template("Sources:\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["Subtract the barometer's reading."])
    chain = ({"context": retriever | RunnableLambda(cite), "question": RunnablePassthrough()}
             | prompt | llm | StrOutputParser())
    seen = Seen()
    assert chain.invoke(QUERY, config={"callbacks": [seen]}) == \
        "Subtract the barometer's reading."
    [docs] = seen.retrieved
    assert len(docs) == 3 and all(d.metadata["kind"] == "section" for d in docs)
    [sent] = seen.prompts
    for d in docs:
        assert f"[{d.metadata['location']}]" in sent and d.page_content[:80] in sent
    assert "docs/calibration.md" in sent and "Barometric drift" in sent


@needs_langchain
def test_langchain_retriever_budget_and_bad_settings(index):
    from pydantic import ValidationError

    from strata.retrieval.integrations.langchain import StrataRetriever

    docs = StrataRetriever(index=index, budget_tokens=300).invoke(QUERY)
    assert docs and sum(estimate_tokens(d.page_content) for d in docs) <= 300
    assert any("drift" in d.page_content.lower() for d in docs)

    with pytest.raises(ValidationError, match="unknown mode 'fuzzy'"):
        StrataRetriever(index=index, mode="fuzzy")
    with pytest.raises(ValidationError, match="budget_tokens is a parameter of the auto mode"):
        StrataRetriever(index=index, mode="flat", budget_tokens=300)
    with pytest.raises(ValidationError, match="index must be a retrieval.Index"):
        StrataRetriever(index=42)
    with pytest.raises(ValidationError):
        StrataRetriever(index=index, k=0)
    flat = StrataRetriever(index=index, mode="keyword", k=2).invoke("barometric drift")
    assert len(flat) == 2 and all(d.metadata["relation"] for d in flat)
    with pytest.raises(ValidationError):
        StrataRetriever(index=index, min_relevance=1.5)


@needs_langchain
def test_langchain_retriever_min_relevance_is_the_floor(index):
    """``min_relevance`` reaches the search: every document is at or above it, and
    a floor nothing reaches yields no documents instead of the least bad ones."""
    from strata.retrieval.integrations.langchain import StrataRetriever

    everything = StrataRetriever(index=index, k=6, min_relevance=0.0).invoke(QUERY)
    assert len(everything) == 6
    floor = sorted(d.metadata["relevance"] for d in everything)[3]
    kept = StrataRetriever(index=index, k=6, min_relevance=floor).invoke(QUERY)
    assert kept and all(d.metadata["relevance"] >= floor for d in kept)
    assert {d.id for d in kept} == \
        {d.id for d in everything if d.metadata["relevance"] >= floor}
    assert StrataRetriever(index=index, k=6, min_relevance=1.0).invoke(
        "zzqx kubernetes helm chart qwertyuiop") == []


# -- LlamaIndex ---------------------------------------------------------------

@needs_llamaindex
def test_llamaindex_retriever_returns_nodes_with_scores(index, sample_index):
    from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

    from strata.retrieval.integrations.llamaindex import StrataRetriever

    retriever = StrataRetriever(sample_index, k=4)
    nodes = retriever.retrieve(QUERY)
    direct = index.search(QUERY, k=4)
    assert [n.node.node_id for n in nodes] == [r.node_id for r in direct] and len(nodes) == 4
    for n, r in zip(nodes, direct):
        assert isinstance(n, NodeWithScore) and isinstance(n.node, TextNode)
        # the score LlamaIndex sees (and its postprocessors cut on) is the relevance;
        # the mode's ranking score stays in the metadata
        assert n.score == pytest.approx(r.relevance) and 0.0 <= n.score <= 1.0
        assert n.node.metadata["relevance"] == pytest.approx(r.relevance)
        assert n.node.metadata["score"] == pytest.approx(r.score) and n.node.text == r.text
        assert META <= set(n.node.metadata)
        assert n.node.metadata["path"] == r.path and n.node.metadata["location"] == r.location()
        # what an LLM reads: the text with where it comes from, not ids and scores
        shown = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert f"location: {r.location()}" in shown and f"breadcrumb: {r.breadcrumb}" in shown
        assert "node_id:" not in shown and "score:" not in shown and "relevance:" not in shown
        assert n.node.get_content(metadata_mode=MetadataMode.EMBED) == r.text
    assert "Barometric drift" in nodes[0].node.metadata["breadcrumb"]


@needs_llamaindex
def test_llamaindex_retriever_in_a_query_engine(index):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from strata.retrieval.integrations.llamaindex import StrataRetriever

    retriever = StrataRetriever(index, k=3, search_params={"kinds": ["section", "code"]})
    # MockLLM answers with the prompt it was given, so the answer shows what the
    # engine put in front of the model
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUERY)
    sources = response.source_nodes
    assert len(sources) == 3
    assert {n.node.metadata["kind"] for n in sources} <= {"section", "code"}
    answer = str(response)
    for n in sources:
        assert f"location: {n.node.metadata['location']}" in answer
    assert "docs/calibration.md" in answer and "node_id" not in answer

    aresponse = asyncio.run(engine.aquery(QUERY))
    assert [n.node.node_id for n in aresponse.source_nodes] == \
        [n.node.node_id for n in sources]

    with pytest.raises(ValueError, match="budget_tokens is a parameter of the auto mode"):
        StrataRetriever(index, mode="hierarchical", budget_tokens=500)
    small = StrataRetriever(index, budget_tokens=250).retrieve(QUERY)
    assert small and sum(estimate_tokens(n.node.text) for n in small) <= 250


@needs_llamaindex
def test_llamaindex_relevance_cutoff_and_floor(index):
    """A ``SimilarityPostprocessor`` cutoff compares the relevance: it keeps the
    nodes whose relevance reaches it, as ``min_relevance`` does in the search."""
    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.schema import QueryBundle

    from strata.retrieval.integrations.llamaindex import StrataRetriever

    nodes = StrataRetriever(index, k=6, min_relevance=0.0).retrieve(QUERY)
    assert len(nodes) == 6
    relevances = sorted(n.score for n in nodes)
    cutoff = (relevances[2] + relevances[3]) / 2 if relevances[2] < relevances[3] \
        else relevances[3]
    cut = SimilarityPostprocessor(similarity_cutoff=cutoff).postprocess_nodes(
        nodes, QueryBundle(QUERY))
    assert {n.node.node_id for n in cut} == {n.node.node_id for n in nodes if n.score >= cutoff}
    floored = StrataRetriever(index, k=6, min_relevance=cutoff).retrieve(QUERY)
    assert {n.node.node_id for n in floored} == {n.node.node_id for n in cut}
    assert StrataRetriever(index, k=6, min_relevance=1.0).retrieve(
        "zzqx kubernetes helm chart qwertyuiop") == []
    with pytest.raises(ValueError, match="min_relevance must be within"):
        StrataRetriever(index, min_relevance=-0.1)
