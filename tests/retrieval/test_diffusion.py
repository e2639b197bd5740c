"""Diffusion mode (the DualGraph four-stage retrieval) on real builds: modalities,
paths that reach text sharing no word with the query, fact seeds, budgets."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest

from strata.retrieval import Index, Result, diffuse, prepared
from strata.retrieval.graph_arrays import EDGE_CODE
from strata.retrieval.modes.diffusion import DiffusionConfig, retrieve
from strata.retrieval.results import Trace
from tests.conftest import write_corpora

STAGES = {"embed_query", "recall", "rerank", "diffusion", "final"}
STOPWORDS = set("""a an and are as at be by can do does for from how i in into is it its my no
not of on or that the their then there this to was what when which who why with you your""".split())
FINAL_K = {"chunk": 10, "code": 2, "table": 2, "image": 2}


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOPWORDS}


def modality(r: Result) -> str:
    return "chunk" if r.kind in ("chunk", "section") else r.kind


def stop_reason(trace: Trace) -> str:
    (note,) = [n for n in trace.notes if n.startswith("diffusion stop: ")]
    assert note.split(": ", 1)[1] == trace.diffusion["stop_reason"]
    return trace.diffusion["stop_reason"]


def assert_path_is_real(index, trace: Trace, r: Result) -> list[str]:
    """The result's path starts at a seed, follows graph out-edges, and ends at the
    result through its ``via``."""
    g = index.graph
    path = trace.diffusion["paths"][r.node_id]
    assert path[-1] == r.node_id
    if r.relation == "walk":  # ranked by the entity walk: explained by its strongest neighbour
        assert len(path) == 2 and r.via == path[0]
        nbrs, *_ = g.neighbours(g.index[path[0]])
        assert g.index[r.node_id] in nbrs
        return path
    assert path[0] in trace.diffusion["seeds"]
    for a, b in zip(path, path[1:]):
        nbrs, *_ = g.neighbours(g.index[a])
        assert g.index[b] in nbrs, (a, b)
    if r.relation == "diffused":
        assert len(path) >= 2 and r.via == path[-2]
    return path


@pytest.fixture(scope="module")
def idx(sample_index):
    return Index.open(sample_index)


# --------------------------------------------------------------------------- modalities

@pytest.mark.parametrize("query, kind, needle", [
    ("Which sensor models are supported and at what sampling rates?", "table", "Sensor models"),
    ("Show me the tide chart of the example station", "image", "tide curve"),
    ("How do I convert feet to metres in code?", "code", "feet_to_metres"),
])
def test_returns_each_modality_within_its_quota(idx, query, kind, needle):
    res = idx.search(query, mode="diffusion", k=20, final_fill=False)
    kinds = [modality(r) for r in res]
    for m, cap in FINAL_K.items():
        assert kinds.count(m) <= cap
    assert kinds.count("chunk") >= 1
    hits = [r for r in res if r.kind == kind]
    assert any(needle.lower() in (r.text + r.breadcrumb + r.node_path).lower() for r in hits), \
        [(r.kind, r.breadcrumb) for r in res]
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    for r in res:  # every result explains itself: a seed, or a real path from one
        assert r.relation in ("seed", "diffused")
        assert_path_is_real(idx, res.trace, r)


def test_k_caps_the_total_but_keeps_every_modality(idx):
    q = "Which sensor models are supported and at what sampling rates?"
    full = idx.search(q, mode="diffusion", k=100, final_fill=False)
    modalities = {modality(r) for r in full}
    assert modalities == {"chunk", "code", "table", "image"}
    assert len(full) == sum(FINAL_K.values())
    for k in (4, 6, 10):
        res = idx.search(q, mode="diffusion", k=k)
        assert len(res) == k and {modality(r) for r in res} == modalities
        kinds = [modality(r) for r in res]
        assert kinds.count("chunk") >= max(kinds.count(m) for m in ("code", "table", "image"))
    two = idx.search(q, mode="diffusion", k=2)
    assert len(two) == 2 and len({modality(r) for r in two}) == 2


def test_final_quotas_are_parameters(idx):
    res = idx.search("tide chart", mode="diffusion", k=50, final_chunk_k=3, final_code_k=0,
                     final_table_k=1, final_image_k=4, final_fill=False)
    kinds = [modality(r) for r in res]
    assert kinds.count("chunk") == 3 and kinds.count("code") == 0
    assert kinds.count("table") <= 1 and 1 <= kinds.count("image") <= 4


def test_fill_tops_up_past_the_quotas_with_the_best_of_the_rest(idx):
    q = "How do I convert feet to metres in code?"
    # the mode's own quotas and fill, without the relevance floor's (run_mode's) on top
    strict = idx.search(q, mode="diffusion", k=30, final_fill=False, min_relevance=0)
    full = idx.search(q, mode="diffusion", k=30, min_relevance=0)
    assert len(strict) <= sum(FINAL_K.values()) < len(full) <= 30
    assert full.trace.counts["final_filled"] == len(full) - len(strict)
    assert {r.node_id for r in strict} <= {r.node_id for r in full}
    assert [r.score for r in full] == sorted((r.score for r in full), reverse=True)
    # a code question on a code-heavy corpus is no longer capped at final_code_k = 2
    assert sum(modality(r) == "code" for r in full) > FINAL_K["code"]
    for r in full:
        assert_path_is_real(idx, full.trace, r)


# --------------------------------------------------------------------------- diffusion paths

def test_diffusion_reaches_text_sharing_no_word_with_the_query(idx):
    """On the sample: with the dense seeds cut to the best 3 chunks and files,
    diffusion still brings back chunks that share no content word with the
    question, through entities, links or the hierarchy, each with a real path."""
    import yaml

    from tests.conftest import REPO

    questions = [q["question"] for q in
                 yaml.safe_load((REPO / "data" / "sample_queries.yaml").read_text())]
    found = []
    for q in questions:
        res = idx.search(q, mode="diffusion", k=16, chunk_top_k=3, file_top_k=3)
        for r in res:
            path = assert_path_is_real(idx, res.trace, r)
            if r.relation == "diffused" and r.kind in ("chunk", "section") \
                    and not content_words(q) & content_words(r.text + " " + r.breadcrumb):
                found.append((q, r, path))
    assert found
    # at least one of them came through an entity (the semantic layer)
    assert any(p.startswith("entity-") for _, _, path in found for p in path[1:-1]), found


@pytest.fixture
def zorblax_index(builder, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "reactor.md").write_text(
        "# Zorblax reactor\n\nThe Zorblax reactor is the heart of the station. Its operators "
        "follow the\n[cooling procedure](cooling.md) during every start-up.\n")
    (docs / "cooling.md").write_text(
        "# Coolant pumps\n\nThree coolant pumps circulate chilled water through the heat "
        "exchangers.\nEach pump is rated for forty litres per second and runs on a separate "
        "feeder.\n")
    (docs / "garden.md").write_text(
        "# Garden\n\nTomatoes and basil grow in raised beds behind the visitor centre.\n"
        "Water the beds every morning in summer.\n")
    write_corpora(builder.config_path, {"z": {"root": str(docs), "out": str(tmp_path / "index")}})
    assert builder.build("z").success
    return Index.open(tmp_path / "index")


def test_a_link_carries_the_query_to_a_file_that_never_names_it(zorblax_index):
    idx = zorblax_index
    q = "Zorblax reactor"
    # Three files: every chunk is in the dense top 50, so by default all are seeds.
    res = idx.search(q, mode="diffusion")
    assert {r.relation for r in res} == {"seed"}
    # Seeded with the single best chunk and file, the coolant-pump section comes
    # back only through the link reactor.md → cooling.md.
    res = idx.search(q, mode="diffusion", chunk_top_k=1, file_top_k=1, min_relevance=0)
    by_path = {r.path: r for r in res}
    assert by_path["reactor.md"].relation == "seed"
    pumps = by_path["cooling.md"]
    assert pumps.relation == "diffused" and "coolant pumps" in pumps.text.lower()
    assert not content_words(q) & content_words(pumps.text + " " + pumps.breadcrumb)
    path = assert_path_is_real(idx, res.trace, pumps)
    g = idx.graph
    hops = []
    for a, b in zip(path, path[1:]):
        nbrs, types, _, _ = g.neighbours(g.index[a])
        hops.append(int(types[list(nbrs).index(g.index[b])]))
    assert EDGE_CODE["jump"] in hops
    assert idx.node(path[0])["path"] == "reactor.md"
    assert "garden.md" not in by_path  # no edge leads there


def test_best_fact_seeds_its_source_chunk(idx):
    """MuSiQue-style: the question matches a fact; with no dense chunk seeds at all,
    the fact's source chunk still comes back as a seed, via the fact."""
    facts = idx.facts()
    for q in ("What does fill_gaps do with a hole longer than max_gap?",
              "Which sentinel values mark a missing level in the CSV?"):
        (fid, _), = idx.dense(idx.embed_query(q), 1, ["fact"])
        rows = facts.filter(pl.col("fact_id") == fid)
        sources = set(rows["chunk_id"].to_list())
        res = idx.search(q, mode="diffusion", chunk_top_k=0)
        hit = [r for r in res if r.node_id in sources]
        assert hit and hit[0].relation == "seed" and hit[0].via == fid, [r.node_id for r in res]
        seeds = res.trace.diffusion["seeds"]
        assert set(rows["head_id"].to_list()) | set(rows["tail_id"].to_list()) <= set(seeds)
        assert res.trace.diffusion["seed_facts"][hit[0].node_id] == fid
        assert res.trace.counts["top_chunks"] == 0


# --------------------------------------------------------------------------- budgets

def test_max_expansions_is_respected(idx):
    res = idx.search("tide chart", mode="diffusion", max_expansions=5)
    c = res.trace.counts
    assert c["expansions"] <= 5 and c["max_expansions"] == 5
    assert stop_reason(res.trace) == "max_expansions"
    assert res  # the mandatory chunks are there whatever the budget


def test_zero_time_budget_stops_before_expanding(idx):
    res = idx.search("tide chart", mode="diffusion", time_budget_s=0.0)
    assert stop_reason(res.trace) == "time_budget"
    assert res.trace.counts["expansions"] == 0 and res.trace.counts["time_budget_ms"] == 0
    assert res and {r.relation for r in res} == {"seed"}


def test_high_min_enqueue_score_leaves_only_seeds(idx):
    res = idx.search("tide chart", mode="diffusion", min_enqueue_score=10)
    assert res.trace.counts["enqueued"] == 0
    assert res and {r.relation for r in res} == {"seed"}
    assert {r.kind for r in res} <= {"chunk", "section", "code", "table", "image"}
    seeds = res.trace.diffusion["seeds"]
    assert all(r.node_id in seeds for r in res)


def test_default_budgets_and_stop_reason_are_traced(idx):
    res = idx.search("How do I correct pressure readings for barometric drift?", mode="diffusion")
    t = res.trace
    assert STAGES <= set(t.timings_ms)
    c = t.counts
    assert c["max_expansions"] == 12000 and c["time_budget_ms"] == 2000
    assert c["max_frontier_size"] == 20000 and c["per_node_neighbor_limit"] == 96
    assert c["expansions"] > 0 and c["enqueued"] > 0 and c["seeds"] > 0
    assert c["recall_facts"] > 0 and c["recall_files"] > 0 and c["recall_chunks"] > 0
    assert stop_reason(t) in diffuse.STOP_REASONS
    assert t.diffusion["config"] == {**DiffusionConfig().__dict__}


def test_spread_buckets_full_stops_early(idx):
    res = idx.search("tide chart", mode="diffusion", spread_chunk_k=1, spread_code_k=1,
                     spread_table_k=1, spread_image_k=1, chunk_top_k=1)
    assert stop_reason(res.trace) == "buckets_full"
    c = res.trace.counts
    assert c["collected_code"] == c["collected_table"] == c["collected_image"] == 1
    # mandatory seeds (the dense top content node, the top facts' sources) are kept past
    # the cap: all of them are collected, in their own modality
    assert c["collected_chunk"] >= 1
    assert sum(c[f"collected_{b}"] for b in prepared.BUCKETS) - c["mandatory_chunks"] <= 3


def _random_prepared(n: int, degree: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    indptr = np.arange(0, n * degree + 1, degree, dtype=np.int64)
    nbr = rng.integers(0, n, n * degree).astype(np.int32)
    cost = np.full(n * degree, 0.2)
    return prepared.Prepared(
        n=n, unit=np.zeros((n, 1), np.float32), sim_src=np.arange(n, dtype=np.int32),
        bucket=np.zeros(n, np.int8), bucket_size=np.array([n, 0, 0, 0]), indptr=indptr,
        nbr=nbr, cost=cost, edge_pos=np.arange(n * degree), facts={}, fact_text={}), rng


def test_time_budget_is_honest_on_a_large_graph(monkeypatch):
    """The loop reads the clock every TIME_CHECK_EVERY pops and stops at the first
    reading past the budget. A fake clock (1 ms per reading) makes that exact and
    independent of the machine's load."""
    prep, rng = _random_prepared(200_000, 12)
    sims = rng.uniform(0.5, 1.0, prep.n)
    seeds = {int(i): (1.0, None) for i in rng.choice(prep.n, 50, replace=False)}
    cfg = DiffusionConfig(time_budget_s=0.05, max_expansions=10**9, max_frontier_size=10**9,
                          min_enqueue_score=0.0, spread_chunk_k=10**9)
    reads = []
    monkeypatch.setattr(diffuse.time, "perf_counter", lambda: len(reads.append(1) or reads) * 1e-3)
    run = diffuse.diffuse(prep, sims, seeds, set(), cfg, t0=0.0)
    assert run.stop_reason == "time_budget" and run.expansions > 100
    # 50 readings of 1 ms reach the budget; each reading follows TIME_CHECK_EVERY pops
    assert len(reads) == 50
    assert run.pops == 49 * diffuse.TIME_CHECK_EVERY


def test_frontier_is_capped_and_neighbours_limited():
    prep, rng = _random_prepared(50_000, 40, seed=1)
    sims = rng.uniform(0.5, 1.0, prep.n)
    seeds = {int(i): (1.0, None) for i in rng.choice(prep.n, 20, replace=False)}
    cfg = DiffusionConfig(max_expansions=300, max_frontier_size=200, per_node_neighbor_limit=3,
                          min_enqueue_score=0.0, spread_chunk_k=10**9)
    run = diffuse.diffuse(prep, sims, seeds, set(), cfg)
    assert run.stop_reason == "max_expansions" and run.expansions == 300
    assert run.enqueued <= 3 * 300
    assert run.frontier_peak <= 200 + 200 // 4 + 3 and run.frontier_dropped > 0


def test_edge_costs_follow_the_design():
    t = np.array([EDGE_CODE[x] for x in ("synonymy", "synonymy", "semantic", "semantic",
                                         "passage", "structural", "jump", "import")], np.int8)
    w = np.array([0.95, 1.2, 2.0, 0.01, 1.0, 1.0, 1.0, 1.0], np.float32)
    np.testing.assert_allclose(prepared.edge_costs(t, w),
                               [0.05, 0.01, 0.25, 5.0, 0.2, 0.3, 0.5, 0.5], rtol=1e-6)


def test_cheapest_neighbours_first_and_vectorless_nodes_borrow_a_sim(idx):
    prep = prepared.prepare(idx)
    g = idx.graph
    for i in range(len(g.ids)):
        c = prep.cost[g.indptr[i]:g.indptr[i + 1]]
        assert np.all(np.diff(c) >= 0)
    sims = prepared.query_sims(prep, idx.embed_query("tide chart"))
    assert sims.min() >= 0 and sims.max() <= 1.0 + 1e-6
    novec = np.nonzero(np.abs(idx.node_vectors).sum(1) == 0)[0]
    for i in novec:  # the nearest ancestor with a vector lends its sim, else NO_VECTOR_SIM
        j = g.parent[i]
        while j >= 0 and not np.abs(idx.node_vectors[j]).sum():
            j = g.parent[j]
        assert sims[i] == pytest.approx(sims[j] if j >= 0 else prepared.NO_VECTOR_SIM)


# --------------------------------------------------------------------------- rerankers

class _ReverseCE:
    """A stand-in cross-encoder: prefers shorter texts."""

    def __init__(self):
        self.calls = 0

    def predict(self, pairs):
        self.calls += 1
        return np.array([-len(t) for _, t in pairs], dtype=np.float32)


def test_cross_encoder_rerank_and_missing_configuration(idx):
    q = "How do I correct pressure readings for barometric drift?"
    res = idx.search(q, mode="diffusion", rerank="cross-encoder")
    assert any("no cross-encoder configured" in n for n in res.trace.notes)
    ce = _ReverseCE()
    res2 = idx.search(q, mode="diffusion", rerank="cross-encoder", chunk_top_k=5,
                      final_rerank="cross-encoder", cross_encoder=ce)
    assert ce.calls >= 3 and not any("no cross-encoder" in n for n in res2.trace.notes)
    # stage 2 kept the 5 shortest of the 100 recalled chunks: they are the dense seeds
    recalled = idx.dense(idx.embed_query(q), 100, ["chunk", "section", "code", "table", "image"])
    shortest = sorted(recalled, key=lambda h: len(idx.node(h[0])["text"]))[:5]
    seeds = res2.trace.diffusion["seeds"]
    assert all(seeds.get(nid) == 1.0 for nid, _ in shortest)
    assert res2.trace.counts["top_chunks"] == 5
    # the final cross-encoder orders each modality (here: shortest first)
    for m in FINAL_K:
        lengths = [len(r.text) for r in res2 if modality(r) == m]
        assert lengths == sorted(lengths)


def test_llm_final_rerank(idx):
    from strata.core.llm import LLM, LLMConfig

    q = "tide chart"
    base = idx.search(q, mode="diffusion", walk=False)
    res = idx.search(q, mode="diffusion", final_rerank="llm", walk=False)
    assert any("no LLM" in n for n in res.trace.notes)
    assert [r.node_id for r in res] == [r.node_id for r in base]

    def reverse(prompt: str) -> str:
        ids = re.findall(r'"id": "([^"]+)"', prompt)
        return json.dumps({"ranking": ids[::-1]})

    with LLM(LLMConfig(backend="callable"), fn=reverse) as llm:
        res = idx.search(q, mode="diffusion", final_rerank="llm", llm=llm, k=100, walk=False,
                         final_fill=False)
    assert res.trace.counts["final_llm_reranked"] == 4
    # the LLM chose among the 3 × final_chunk_k best chunks: reversed, the last 10 win
    _, run = retrieve(idx, q, k=100, walk=False)
    pool = sorted(run.buckets[0], key=lambda i: (-run.score(i), i))[:30]
    chunks_after = [r.node_id for r in res if modality(r) == "chunk"]
    assert chunks_after == [idx.graph.ids[i] for i in pool[::-1][:10]]
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    top_scores = sorted((run.score(i) for i in pool), reverse=True)[:10]
    assert [r.score for r in res if modality(r) == "chunk"] == pytest.approx(top_scores)
    # a plain str -> str callable works too
    again = idx.search(q, mode="diffusion", final_rerank="llm", llm=reverse, k=100, walk=False,
                       final_fill=False)
    assert [r.node_id for r in again] == [r.node_id for r in res]


def test_bad_parameters_are_clear_errors(idx):
    with pytest.raises(TypeError, match="unknown diffusion parameter"):
        idx.search("tide chart", mode="diffusion", spread_k=3)
    with pytest.raises(ValueError, match="final_rerank"):
        idx.search("tide chart", mode="diffusion", final_rerank="magic")


def test_retrieve_returns_the_run(idx):
    res, run = retrieve(idx, "tide chart", k=5, walk=False)  # chunk scores from the walk otherwise
    assert len(res) == 5 and run.stop_reason in diffuse.STOP_REASONS
    for r in res:
        i = idx.graph.index[r.node_id]
        assert r.score == pytest.approx(run.score(i))

