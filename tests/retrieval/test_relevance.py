"""Relevance, the floor and k, on a real build of the sample corpus.

The sample is built with the default embedding model, so its results are
scored by the fitted weights (retrieval/calibration.json): these tests check
what a user meets — an out-of-corpus question answered "nothing relevant",
a real one answered with confident hits, k holding in every mode — not the
weights themselves.
"""

from __future__ import annotations

import pytest

from strata.retrieval import Index
from strata.retrieval.facets import place, split
from strata.retrieval.modes import MODES
from strata.retrieval.relevance import calibration_for

IN_CORPUS = ["how do I correct pressure readings for barometric drift?",
             "how are tide gauge readings smoothed before export?",
             "which settings configure the sensor sampling interval?"]
OUT_OF_CORPUS = ["zzqx kubernetes helm chart",
                 "Who was the president of France in 1990?",
                 "What is the recommended dose of ibuprofen for a child?"]


@pytest.fixture(scope="module")
def idx(sample_index):
    return Index.open(sample_index)


def test_every_mode_gives_each_result_a_relevance_in_0_1(idx):
    for mode in MODES:
        res = idx.search(IN_CORPUS[0], mode=mode, k=5, min_relevance=0)
        assert res, mode
        for r in res:
            assert r.relevance is not None and 0.0 <= r.relevance <= 1.0, (mode, r)


def test_out_of_corpus_questions_get_nothing_relevant_and_the_closest(idx):
    for q in OUT_OF_CORPUS:
        res = idx.search(q, k=10)
        assert len(res) == 0 and res.nothing_relevant, (q, [(r.path, r.relevance) for r in res])
        assert res.below and res.below[0].relevance < res.min_relevance
        assert res.note.startswith(f"no result above relevance {res.min_relevance:g}; closest: ")
        assert res.below[0].location() in res.note


def test_in_corpus_questions_keep_confident_results(idx):
    for q in IN_CORPUS:
        res = idx.search(q, k=5)
        assert res and not res.nothing_relevant, q
        # the top hit of a question the corpus answers stands far above the floor,
        # above every out-of-corpus question's best
        worst_outside = max(idx.search(o, k=5, min_relevance=0)[0].relevance
                            for o in OUT_OF_CORPUS)
        assert res[0].relevance > max(0.3, worst_outside), (q, res[0].relevance)


def test_the_floor_cuts_and_keeps_what_it_cut(idx):
    everything = idx.search(IN_CORPUS[0], k=10, min_relevance=0)
    assert len(everything) == 10 and not everything.below
    floor = sorted(r.relevance for r in everything)[5]  # half of them fall below
    cut = idx.search(IN_CORPUS[0], k=10, min_relevance=floor)
    assert all(r.relevance >= floor for r in cut)
    assert all(r.relevance < floor for r in cut.below)
    assert {r.node_id for r in cut} | {r.node_id for r in cut.below} == \
        {r.node_id for r in everything}
    assert cut.note and "below relevance" in cut.note
    with pytest.raises(ValueError, match="min_relevance"):
        idx.search(IN_CORPUS[0], min_relevance=1.5)


def test_relevance_does_not_depend_on_k(idx):
    a = idx.search(IN_CORPUS[1], k=3, min_relevance=0)
    b = idx.search(IN_CORPUS[1], k=10, min_relevance=0)
    assert [r.node_id for r in a] == [r.node_id for r in b][:3]
    assert [r.relevance for r in a] == [r.relevance for r in b][:3]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_k_is_a_hard_cap_in_every_mode(idx, k):
    for mode in MODES:
        res = idx.search(IN_CORPUS[0], mode=mode, k=k, min_relevance=0)
        assert len(res) <= k, (mode, len(res))
    # a large token budget caps, it does not fill: at most k blocks
    res = idx.search(IN_CORPUS[0], k=k, budget_tokens=20000, min_relevance=0)
    assert 1 <= len(res) <= k
    assert res.trace.counts["tokens_used"] <= 20000
    # per-kind quotas never pad a small k
    res = idx.search("hampel filter", mode="diffusion", k=k, min_relevance=0)
    assert len(res) <= k


def test_budget_reports_the_tokens_it_used(idx):
    from strata.core.tokens import estimate_tokens

    res = idx.search(IN_CORPUS[0], k=8, budget_tokens=600)
    used = res.trace.counts["tokens_used"]
    assert used == sum(estimate_tokens(r.text) for r in res)
    assert 0 < used <= 600


def test_one_section_is_one_place_in_the_default_list(idx):
    """Hits inside one section come back as that section (the hits in its
    context), so the top places are distinct sections."""
    for q in IN_CORPUS:
        res = idx.search(q, k=5, min_relevance=0)
        holders = []
        for r in res:
            node = idx.node(r.node_id)
            cur, seen = node, 0
            while cur["kind"] not in ("section", "file") and cur.get("parent_id") and seen < 32:
                cur, seen = idx.node(cur["parent_id"]), seen + 1
            holders.append(cur["node_id"] if cur["kind"] == "section" else r.node_id)
        assert len(holders) == len(set(holders)), (q, [r.node_id for r in res])
    gathered = [c for q in IN_CORPUS for r in idx.search(q, k=5, min_relevance=0)
                for c in (r.context or []) if c["relation"] == "hit"]
    for c in gathered:
        assert c["location"] and c["node_id"]


def test_a_comparison_is_split_into_its_two_sides():
    assert split("What is the difference between a HAP and a HSP?") == ["a HAP", "a HSP"]
    assert split("@State vs @Local") == ["@State", "@Local"]
    assert split("Can I persist a Map directly instead of a class object?") == \
        ["Can I persist a Map directly", "a class object"]
    # a plain "and" joins one request's parts: no split
    assert split("How do I enable drift correction, and can I cap it?") == []
    assert split("What is X?") == []


def test_each_side_gets_a_place_without_moving_the_lead():
    rows = [10, 11, 12, 13, 14, 15, 16]
    assert place(rows, [11, 16], window=5) == [10, 11, 12, 13, 16, 14, 15]
    assert place(rows, [20, 21], window=5) == [10, 11, 12, 20, 21, 13, 14, 15, 16]
    assert place(rows, [12, 13], window=5) == rows


def test_other_models_fall_back_to_the_generic_fit():
    own = calibration_for("sentence-transformers/all-MiniLM-L6-v2")
    other = calibration_for("some/other-model")
    assert "cosine" in own.features and own.name.endswith("all-MiniLM-L6-v2")
    assert other.name == "generic" and "cosine" not in other.features


def test_gathering_never_returns_a_kind_that_was_not_asked_for(idx):
    """A search restricted to code gathers hits of one section without
    returning the section itself."""
    for q in ["tide readings and gauges", *IN_CORPUS]:
        res = idx.search(q, kinds=["code"], k=10, min_relevance=0)
        assert res and {r.kind for r in res} == {"code"}, (q, [r.kind for r in res])


def test_a_list_with_nothing_in_it_has_the_types_of_one_with_hits(idx):
    import dataclasses

    import polars as pl

    from strata.retrieval.results import Result

    found = idx.search(IN_CORPUS[0], k=5).to_polars()
    empty = idx.search(OUT_OF_CORPUS[0], k=5).to_polars()
    assert empty.height == 0 and found.height
    assert empty.schema == found.schema
    assert set(empty.columns) == {f.name for f in dataclasses.fields(Result)}
    # what a notebook does with a frame works on both
    for frame in (found, empty):
        frame.with_columns(pl.col("score").round(4)).filter(pl.col("kind") == "code")
