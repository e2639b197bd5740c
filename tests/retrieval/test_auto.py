"""The default mode: fused lexical + dense recall, no nested duplicates, every hit
with its place in the document, and a context assembled to a token budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from strata.retrieval import Index
from strata.core.tokens import estimate_tokens
from strata.retrieval.context import ancestors
from strata.retrieval.modes import DEFAULT_MODE
from tests.conftest import REPO

DEFINED = "where is correct_barometric_drift defined?"
OH_QUERIES = [
    "how do I share state between a parent and child component?",
    "Can the @Type decorator be applied to a string property?",
    "What does the !! syntax expand to for two-way binding?",
    "How many levels of nested data should a @Prop carry?",
    "configure the app icon and label in app.json5",
]


@pytest.fixture(scope="module")
def idx(sample_index) -> Index:
    return Index.open(sample_index)


@pytest.fixture(scope="module")
def oh(oh_build) -> Index:
    base, _, _ = oh_build
    return Index.open(base / "index")


def test_the_default_mode_is_auto_everywhere(idx):
    assert DEFAULT_MODE == "auto"
    res = idx.search("barometer drift")
    assert res.trace.mode == "auto" and res
    assert idx.ask("How is barometric drift corrected?").mode == "auto"


def test_an_exact_identifier_finds_its_definition_first(idx):
    """The encoder sees "where ... defined" as prose; BM25 sees the name."""
    res = idx.search(DEFINED, k=5)
    assert res[0].node_path == "tidewater.calibration.correct_barometric_drift"
    # its file gave way to it, and is named as its context instead of taking a slot
    assert "tidewater/calibration.py" not in [r.path for r in res if r.kind == "file"]
    assert any(c["kind"] == "file" for c in res[0].context)
    dense = idx.search(DEFINED, mode="flat", k=5)
    assert dense[0].node_path != res[0].node_path, "the dense signal alone misses it"


@pytest.mark.parametrize("query", OH_QUERIES)
def test_a_container_never_outranks_nothing_but_its_own_part(oh, query):
    """A section listed below its own subsection (its part answers better) is
    not listed: it is the part's context. A section listed above its part stays
    (its own text is the better match, and a section's text is not its
    subsections'). A whole file never takes a place when a part of it is listed."""
    res = oh.search(query, k=10)
    assert len(res) == 10
    g = oh.graph
    pos = {g.index[r.node_id]: i for i, r in enumerate(res)}
    for i, r in enumerate(res):
        j = g.index[r.node_id]
        for a in ancestors(g, j):
            assert pos.get(a, -1) < i, f"{r.breadcrumb} is listed above its container"
            if a in pos:
                assert res[pos[a]].kind != "file", "a file gave way to its listed part"
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    # the displaced containers are named as their parts' context
    for r in res:
        for c in r.context:
            if c["relation"] == "container":
                assert g.index[c["node_id"]] in ancestors(g, g.index[r.node_id])


@pytest.mark.parametrize("query", OH_QUERIES[:3])
def test_every_hit_comes_with_its_parent_and_siblings(oh, query):
    n = oh.nodes()
    parent_of = dict(zip(n["node_id"].to_list(), n["parent_id"].to_list()))
    for r in oh.search(query, k=8):
        ctx = r.context
        parents = [c["node_id"] for c in ctx if c["relation"] == "parent"]
        assert parents == ([parent_of[r.node_id]] if parent_of[r.node_id] else [])
        for c in ctx:
            if c["relation"] == "sibling":
                assert parent_of[c["node_id"]] == parent_of[r.node_id] != None  # noqa: E711
            if c["relation"] == "child":
                assert parent_of[c["node_id"]] == r.node_id


def test_context_costs_no_result_slots_and_can_be_turned_off(oh):
    q = OH_QUERIES[0]
    with_ctx, without = oh.search(q, k=6), oh.search(q, k=6, context=False)
    assert [r.node_id for r in with_ctx] == [r.node_id for r in without]
    assert all(r.context is None for r in without)
    assert all(r.relation == "seed" for r in with_ctx)


def test_the_walk_is_off_for_heuristic_facts_and_can_be_forced(idx):
    res = idx.search("barometer drift", k=5)
    assert any("walk: off" in n for n in res.trace.notes)
    assert "walk" not in res.trace.timings_ms
    forced = idx.search("barometer drift", k=5, walk="on")
    assert "walk" in forced.trace.timings_ms and forced


@pytest.mark.parametrize("budget", [150, 500, 1500])
def test_a_token_budget_assembles_the_best_context_that_fits(oh, budget):
    q = OH_QUERIES[0]
    res = oh.search(q, budget_tokens=budget)
    assert res and sum(estimate_tokens(r.text) for r in res) <= budget
    g = oh.graph
    merged = {g.index[r.node_id] for r in res if r.relation == "merged"}
    for r in res:  # no block repeats text a merged block already holds
        assert not merged & set(ancestors(g, g.index[r.node_id])), r.breadcrumb
    assert res.trace.counts["budget_tokens"] == budget


def test_siblings_merge_into_their_parent_when_that_is_as_cheap(oh):
    merged = []
    for q in OH_QUERIES:
        merged += [r for r in oh.search(q, budget_tokens=4000) if r.relation == "merged"]
    assert merged, "some query's hits share a parent cheap enough to take whole"
    n = oh.nodes()
    kids = n.filter(n["parent_id"] == merged[0].node_id)
    # the merged block is the parent's whole text: its children's text is in it
    assert all(t[:60] in merged[0].text for t in kids["text"].to_list() if t)


def test_hierarchical_hits_carry_their_context_at_small_k(sample_index):
    """`strata search --mode hierarchical -k 5`: five places, and each one still
    says which section it sits in and what is next to it."""
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "search", "--index",
                           str(sample_index), "--mode", "hierarchical", "-k", "5", "--json",
                           "how are barometer timestamps aligned?"], cwd=REPO,
                          env=os.environ.copy(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = json.loads(proc.stdout)
    assert body["mode"] == "hierarchical" and len(body["results"]) == 5
    for hit in body["results"]:
        rels = {c["relation"] for c in hit["context"]}
        assert "parent" in rels, hit["breadcrumb"]
    assert any("sibling" in {c["relation"] for c in h["context"]} for h in body["results"])
    plain = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "search", "--index",
                            str(sample_index), "-k", "3", "how are barometer timestamps aligned?"],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and " in " in plain.stdout  # "in <parent> · next to ..."


def test_budget_flag_needs_the_auto_mode(sample_index):
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "search", "--index",
                           str(sample_index), "--mode", "flat", "--budget-tokens", "300", "tides"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "--budget-tokens works with --mode auto" in proc.stderr
