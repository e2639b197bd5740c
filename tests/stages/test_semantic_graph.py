"""Tests for stages.enrich.semantic_graph: entity nodes, facts, passage /
semantic / synonymy edges and edge redirection."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from strata.stages.enrich import semantic_graph as sg
from strata.stages.enrich.openie import OpenIEOut
from strata.stages.enrich.semantic_graph import (
    build_entities, entity_id, entity_id_map, fact_id, passage_edges, redirect_edges,
    semantic_edges, synonymy_benchmark, synonymy_edges,
)
from strata.core.config.schema import EDGES, FACTS, NODES, TABLE_FILES

PER_UNIT = {
    "chunk-a": OpenIEOut(entities=[("Barack Obama", ""), ("Honolulu", "a city in Hawaii")],
                         triples=[("Barack Obama", "born in", "Honolulu"),
                                  ("Barack Obama", "lived in", "Honolulu")]),
    "chunk-b": OpenIEOut(entities=[("barack  obama", "44th president of the United States")],
                         triples=[("barack  obama", "born in", "Honolulu"),
                                  ("Honolulu", "capital of", "Hawaii")]),
    "chunk-c": OpenIEOut(entities=[("Barack Obama", "")], triples=[]),
}


def test_schema_additions():
    assert TABLE_FILES["entities"] == "entities.parquet" and TABLE_FILES["facts"] == "facts.parquet"
    assert FACTS.names == ["fact_id", "head", "relation", "tail", "head_id", "tail_id",
                           "chunk_id", "text"]


def test_build_entities_dedupes_and_describes():
    entities, facts = build_entities("demo", PER_UNIT)
    assert entities.schema == NODES and facts.schema == FACTS
    df = pl.from_arrow(entities)
    assert sorted(df["title"].to_list()) == ["Barack Obama", "Hawaii", "Honolulu"]
    obama = df.filter(pl.col("title") == "Barack Obama").row(0, named=True)
    assert obama["node_id"] == entity_id("demo", "barack obama")
    assert obama["node_id"].startswith("entity-") and obama["kind"] == "entity"
    assert obama["node_path"] == "entity:barack obama" and obama["parent_id"] is None
    assert obama["text"] == "Barack Obama: 44th president of the United States"
    assert obama["embedded"] and obama["depth"] == 0 and obama["path"] == ""
    attrs = json.loads(obama["attrs"])
    assert attrs == {"mentions": 3, "aliases": ["barack obama"]}
    hawaii = df.filter(pl.col("title") == "Hawaii").row(0, named=True)
    assert hawaii["text"] == "Hawaii"  # only seen in a triple, no description
    assert entity_id_map(entities)["barack obama"] == obama["node_id"]

    f = pl.from_arrow(facts)
    assert f.height == 4
    born = f.filter(pl.col("relation") == "born in")
    assert born["fact_id"].n_unique() == 1  # same fact in two chunks: same id
    assert born["fact_id"][0] == fact_id("Barack Obama", "born in", "Honolulu")
    assert sorted(born["chunk_id"].to_list()) == ["chunk-a", "chunk-b"]
    assert set(born["head_id"].to_list()) == {obama["node_id"]}
    assert born["text"].to_list()[0] == "(Barack Obama, born in, Honolulu)"


def test_build_entities_empty():
    entities, facts = build_entities("demo", {})
    assert entities.num_rows == 0 and facts.num_rows == 0


def test_semantic_edge_weights_are_cooccurrence_counts():
    _, facts = build_entities("demo", PER_UNIT)
    edges = semantic_edges(facts)
    assert edges.schema == EDGES
    df = pl.from_arrow(edges)
    obama, honolulu, hawaii = (entity_id("demo", n) for n in ("Barack Obama", "Honolulu", "Hawaii"))
    assert df.height == 4  # two unordered pairs, both directions
    fwd = df.filter((pl.col("src") == obama) & (pl.col("dst") == honolulu)).row(0, named=True)
    back = df.filter((pl.col("src") == honolulu) & (pl.col("dst") == obama)).row(0, named=True)
    assert fwd["weight"] == back["weight"] == 3.0  # born in x2, lived in x1
    assert fwd["relation"] == back["relation"] == "born in"  # the most frequent
    assert fwd["type"] == "semantic"
    other = df.filter((pl.col("src") == hawaii) & (pl.col("dst") == honolulu))
    assert other["weight"].to_list() == [1.0] and other["relation"].to_list() == ["capital of"]
    assert semantic_edges(FACTS.empty_table()).num_rows == 0


def test_passage_edges_both_directions():
    entities, _ = build_entities("demo", PER_UNIT)
    edges = pl.from_arrow(passage_edges(PER_UNIT, entities))
    ids = entity_id_map(entities)
    mentions = edges.filter(pl.col("relation") == "mentions")
    back = edges.filter(pl.col("relation") == "mentioned_in")
    assert mentions.height == back.height == 6  # a: 2, b: 3 (Hawaii via a triple), c: 1
    assert set(edges["type"].to_list()) == {"passage"} and set(edges["weight"].to_list()) == {1.0}
    b = mentions.filter(pl.col("src") == "chunk-b")["dst"].to_list()
    assert sorted(b) == sorted([ids["barack obama"], ids["honolulu"], ids["hawaii"]])
    assert sorted(zip(back["dst"], back["src"])) == sorted(zip(mentions["src"], mentions["dst"]))
    assert passage_edges(PER_UNIT, ids).num_rows == edges.height


def _random_unit(n: int, dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_synonymy_finds_planted_pair_only():
    v = _random_unit(500, 64, 1)
    noise = np.random.default_rng(2).standard_normal(64).astype(np.float32) * 0.05
    v[7] = v[3] + noise
    v[7] /= np.linalg.norm(v[7])
    ids = [f"entity-{i}" for i in range(500)]
    edges = synonymy_edges(ids, v, threshold=0.8, k=10)
    assert edges.schema == EDGES
    df = pl.from_arrow(edges)
    assert sorted(zip(df["src"], df["dst"])) == [("entity-3", "entity-7"), ("entity-7", "entity-3")]
    assert set(df["relation"]) == {"similar_to"} and set(df["type"]) == {"synonymy"}
    expected = float(v[3] @ v[7])
    assert all(abs(w - expected) < 1e-4 for w in df["weight"]) and expected > 0.8
    assert synonymy_edges(ids, _random_unit(500, 64, 3)).num_rows == 0


def test_synonymy_ivf_path_and_edge_cases(monkeypatch):
    monkeypatch.setattr(sg, "FLAT_MAX", 100)  # force the IVF index on a small set
    v = _random_unit(3000, 32, 4)
    v[10] = v[20]  # an exact duplicate
    ids = [f"e{i}" for i in range(3000)]
    df = pl.from_arrow(synonymy_edges(ids, v, threshold=0.9))
    assert sorted(zip(df["src"], df["dst"])) == [("e10", "e20"), ("e20", "e10")]
    assert df["weight"].to_list() == pytest.approx([1.0, 1.0], abs=1e-5)
    assert synonymy_edges(["only"], v[:1]).num_rows == 0
    with pytest.raises(ValueError):
        synonymy_edges(["a", "b"], v[:3])


def test_the_ivf_knn_from_blocks_is_the_one_faiss_add_and_search_make(monkeypatch):
    """The IVF lists are given their room before the vectors go in, and vectors
    given as blocks are read in passes (the matrix let go before the index is
    filled): every neighbour and similarity is still the one faiss's own add and
    one search over the whole matrix make."""
    import faiss

    monkeypatch.setattr(sg, "FLAT_MAX", 100)
    v = _random_unit(4000, 32, 5)
    v[100:140] = v[0]  # one list far fuller than the rest
    nlist = min(int(4 * np.sqrt(len(v))), len(v) // 39)
    plain = faiss.IndexIVFFlat(faiss.IndexFlatIP(32), 32, nlist, faiss.METRIC_INNER_PRODUCT)
    plain.train(v)
    plain.nprobe = sg.NPROBE
    plain.add(v)
    assert max(plain.invlists.list_size(i) for i in range(nlist)) > 2 * len(v) / nlist
    want = plain.search(v, 11)
    passes = []

    def blocks():
        passes.append(1)
        return (v[a:a + 1000] for a in range(0, len(v), 1000))

    for vectors in (v, blocks):
        got = sg._knn_faiss(vectors, len(v), 11)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert len(passes) == 2  # train, fill: the queries are read back from the index
    with pytest.raises(ValueError, match="4001 entity ids but 4000 vectors"):
        sg._knn_faiss(blocks, len(v) + 1, 11)
    monkeypatch.setattr(sg, "FLAT_MAX", len(v))  # the exact index, filled from blocks
    monkeypatch.setattr(sg, "SEARCH_BATCH", 1500)  # batches that cut across the blocks
    exact = sg._knn_faiss(v, len(v), 11)
    assert all(np.array_equal(a, b) for a, b in zip(sg._knn_faiss(blocks, len(v), 11), exact))


def test_redirect_edges():
    edges = pa.Table.from_pylist([
        {"src": "img-dup", "dst": "sec-1", "type": "structural", "relation": "child_of", "weight": 1.0},
        {"src": "img-keep", "dst": "sec-1", "type": "structural", "relation": "child_of", "weight": 1.0},
        {"src": "sec-1", "dst": "img-dup", "type": "structural", "relation": "parent_of", "weight": 1.0},
        {"src": "img-dup", "dst": "img-keep", "type": "jump", "relation": "same_as", "weight": 1.0},
        {"src": "sec-2", "dst": "img-dup", "type": "structural", "relation": "parent_of", "weight": 1.0},
    ], schema=EDGES)
    out = redirect_edges(edges, {"img-dup": "img-keep"})
    assert out.schema == EDGES
    assert [(r["src"], r["dst"], r["relation"]) for r in out.to_pylist()] == [
        ("img-keep", "sec-1", "child_of"),  # the duplicate of this one is gone
        ("sec-1", "img-keep", "parent_of"),
        ("sec-2", "img-keep", "parent_of"),
    ]  # and the self-loop img-keep -> img-keep is dropped
    assert redirect_edges(edges, {}) is edges
    assert redirect_edges(EDGES.empty_table(), {"a": "b"}).num_rows == 0


@pytest.mark.slow
def test_synonymy_scaling_benchmark():
    for n in (10_000, 50_000, 100_000):
        r = synonymy_benchmark(n)
        print(f"synonymy kNN n={n:>7,} index={r['index']}: {r['seconds']:.2f}s, {r['edges']} edges")
        assert r["edges"] == 0  # random vectors are never near-synonyms


def test_synonymy_edges_are_cached_by_entities_and_vectors(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.normal(size=(6, 16)).astype(np.float32)
    vecs = np.concatenate([base, base + 0.01 * rng.normal(size=base.shape).astype(np.float32)])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"entity-{i}" for i in range(len(vecs))]
    first, hit1 = sg.synonymy_edges_cached(ids, vecs, tmp_path, threshold=0.9, k=3)
    again, hit2 = sg.synonymy_edges_cached(ids, vecs, tmp_path, threshold=0.9, k=3)
    assert (hit1, hit2) == (False, True) and first.num_rows == 12 and again.equals(first)
    assert again.equals(sg.synonymy_edges(ids, vecs, threshold=0.9, k=3))
    moved = vecs.copy()
    moved[0] = -moved[0]  # entity 0 no longer has a near-synonym
    fresh, hit3 = sg.synonymy_edges_cached(ids, moved, tmp_path, threshold=0.9, k=3)
    assert hit3 is False and fresh.num_rows == 10
    _, hit4 = sg.synonymy_edges_cached(ids, vecs, tmp_path, threshold=0.8, k=3)
    assert hit4 is False  # parameters are part of the key
