"""The query module: opening an index without Dagster, dense search, model checks."""

from __future__ import annotations


import numpy as np
import pytest
import yaml

from strata.retrieval import EmbeddingModelMismatch, Index, IndexNotFound, Result
from tests.conftest import REPO


def test_open_reads_tables_as_polars(sample_index):
    idx = Index.open(sample_index)
    assert idx.corpus == "sample" and idx.version >= 1
    assert idx.nodes().columns[:3] == ["node_id", "corpus", "kind"]
    assert idx.edges().height > idx.nodes().height
    assert idx.manifest["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_search_returns_typed_results_that_answer_sample_questions(sample_index):
    idx = Index.open(sample_index)
    queries = yaml.safe_load((REPO / "data" / "sample_queries.yaml").read_text())
    hits = 0
    for q in queries:
        results = idx.search(q["question"], k=5)
        assert len(results) == 5 and all(isinstance(r, Result) for r in results)
        assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
        if any(r.path == q["path"] for r in results):
            hits += 1
    # Dense search alone already finds the right file for most questions.
    assert hits >= len(queries) * 0.75, hits
    top = idx.search("Which function converts feet to metres?", k=3)[0]
    assert top.node_path == "tidewater.units.feet_to_metres"
    assert (top.kind, top.path, top.relation) == ("code", "tidewater/units.py", "seed")
    assert top.start_line and top.end_line >= top.start_line
    assert "feet" in top.text and top.breadcrumb.startswith("tidewater/units.py")


def test_search_can_filter_kinds(sample_index):
    idx = Index.open(sample_index)
    res = idx.search("sensor models and sampling rates", k=4, kinds=["table"])
    assert res and {r.kind for r in res} == {"table"}


class _OtherModel:
    """A stand-in encoder of another model, to test the mismatch error."""

    def __init__(self, model, dim):
        from strata.core.encoders.embedding import EncoderSpec

        self.spec = EncoderSpec(model=model, dim=dim)
        self.dim = dim

    def encode(self, texts):
        return np.zeros((len(texts), self.dim), np.float32)


@pytest.mark.parametrize("mode", ["flat", "keyword", "hybrid"])
def test_fact_hits_come_back_as_facts_placed_at_their_chunk(sample_index, mode):
    """Facts are vectors, not graph nodes: a search over them returns each
    triple's text with the chunk it was extracted from (found by the service's
    schema fuzzing, where ``kinds: ["fact"]`` raised a KeyError)."""
    idx = Index.open(sample_index)
    results = idx.search("tide gauge calibration", mode=mode, k=5, kinds=["fact"])
    assert results and all(r.kind == "fact" for r in results)
    facts = idx.facts()
    for r in results:
        rows = facts.filter(facts["fact_id"] == r.node_id)
        assert r.text == rows["text"][0] and r.via in rows["chunk_id"].to_list()
        chunk = idx.node(r.via)
        assert r.path == chunk["path"] and r.breadcrumb.startswith(chunk["breadcrumb"])


def test_opening_with_another_model_is_a_clear_error(sample_index):
    with pytest.raises(EmbeddingModelMismatch, match="all-MiniLM-L6-v2"):
        Index.open(sample_index, encoder=_OtherModel("BAAI/bge-small-en-v1.5", 384))
    with pytest.raises(EmbeddingModelMismatch):
        Index.open(sample_index, encoder=_OtherModel("sentence-transformers/all-MiniLM-L6-v2", 768))


def test_missing_index_is_a_clear_error(tmp_path):
    with pytest.raises(IndexNotFound, match="strata index"):
        Index.open(tmp_path)


