"""The hierarchical mode: dense seeds plus their parent, siblings and children,
walked over the graph's arrays (never the node table) at query time."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from strata.retrieval import Index
from strata.retrieval.graph_arrays import Graph
from strata.retrieval.modes import hierarchical
from strata.retrieval.modes.hierarchical import HierarchicalConfig, expand_subtree

BAROMETER = "how are barometer timestamps aligned?"
FIT = "least squares fit of scale, offset and drift using matching timestamps"
CALIBRATOR = "what does the Calibrator class do?"  # brings parents, siblings and children


@pytest.fixture(scope="module")
def idx(sample_index) -> Index:
    return Index.open(sample_index)


@pytest.fixture(scope="module")
def parent_of(idx) -> dict:
    n = idx.nodes()
    return dict(zip(n["node_id"].to_list(), n["parent_id"].to_list()))


def _hier(idx, query, k=10, **params):
    """Seeds and their context only (``fill`` off), from dense seeds (``lexical``
    off): the expansion rules these tests pin down, on seeds they can predict.
    The fused seeds have their own tests below."""
    params.setdefault("fill", False)
    params.setdefault("lexical", False)
    return idx.search(query, mode="hierarchical", k=k, **params)


def _by_path(results, node_path):
    return next(r for r in results if r.node_path == node_path)


def _relations(results):
    return {r.relation for r in results}


# -- what a user relies on ------------------------------------------------------
def test_barometer_question_brings_its_section_parent_and_siblings(idx, parent_of):
    res = _hier(idx, BAROMETER)
    seed = res[0]
    assert (seed.title, seed.relation, seed.kind) == ("Aligning barometer timestamps", "seed",
                                                     "section")
    # The parent section is there (here it is also a dense hit, so it stays a seed).
    parent = next(r for r in res if r.title == "Correcting with a barometer")
    assert parent.node_id == parent_of[seed.node_id]
    assert any(r.relation == "sibling" and r.via == seed.node_id for r in res)
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)

    # With fewer seeds the parent is found by expansion: relation "parent", via the seed.
    res = _hier(idx, BAROMETER, seeds=2)
    assert res[0].node_id == seed.node_id
    parent = next(r for r in res if r.title == "Correcting with a barometer")
    assert (parent.relation, parent.via, parent.kind) == ("parent", seed.node_id, "section")
    sibs = [r for r in res if r.relation == "sibling" and r.via == seed.node_id]
    assert sibs and all(parent_of[r.node_id] == parent.node_id for r in sibs)


def test_siblings_nearest_in_document_order_first(idx):
    # "Aligning barometer timestamps" sits between a code block and "Water density"
    # under "Correcting with a barometer": both are one step away; the preceding wins.
    res = _hier(idx, BAROMETER, seeds=1, parents=False, max_siblings=1, k=50)
    assert [r.relation for r in res] == ["seed", "sibling"]
    assert res[1].kind == "code" and res[1].node_path.endswith("correcting-with-a-barometer/code-1")
    res = _hier(idx, BAROMETER, seeds=1, parents=False, max_siblings=2, k=50)
    assert {r.node_path.rsplit("/", 1)[-1] for r in res[1:]} == {"code-1", "water-density"}


def test_python_method_seed_brings_its_class(idx, parent_of):
    res = _hier(idx, FIT)
    fit = _by_path(res, "tidewater.calibration.Calibrator.fit")
    assert (fit.relation, fit.kind) == ("seed", "code")
    cls = _by_path(res, "tidewater.calibration.Calibrator")
    assert (cls.relation, cls.via, cls.kind) == ("parent", fit.node_id, "code")
    assert cls.node_id == parent_of[fit.node_id] and "class Calibrator" in cls.text
    # other methods of the class come as siblings of the seed method
    assert any(r.relation == "sibling" and r.via == fit.node_id
               and r.node_path.startswith("tidewater.calibration.Calibrator.") for r in res)


@pytest.mark.parametrize("flag,relation", [("parents", "parent"), ("siblings", "sibling"),
                                           ("children", "child")])
def test_toggles_remove_their_relation(idx, flag, relation):
    full = _hier(idx, CALIBRATOR, k=100)
    assert _relations(full) == {"seed", "parent", "sibling", "child"}
    off = _hier(idx, CALIBRATOR, k=100, **{flag: False})
    assert relation not in _relations(off)
    assert off.trace.counts[flag] == 0
    # the seeds do not depend on the expansion
    assert [r.node_id for r in off if r.relation == "seed"] == \
        [r.node_id for r in full if r.relation == "seed"]
    none = _hier(idx, CALIBRATOR, k=100, parents=False, siblings=False, children=False)
    assert _relations(none) == {"seed"} and none.trace.counts["expanded"] == 0


@pytest.mark.parametrize("cap", [0, 1, 3, 7])
def test_max_expand_caps_expanded_results(idx, cap):
    res = _hier(idx, CALIBRATOR, k=100, max_expand=cap, min_score=-1.0)
    expanded = [r for r in res if r.relation != "seed"]
    assert len(expanded) == res.trace.counts["expanded"] == min(cap, res.trace.counts["candidates"])
    assert res.trace.counts["candidates"] > 7
    # the cap keeps the best-scoring expansions
    every = _hier(idx, CALIBRATOR, k=100, max_expand=100, min_score=-1.0)
    best = sorted((r.score for r in every if r.relation != "seed"), reverse=True)[:cap]
    assert sorted((r.score for r in expanded), reverse=True) == pytest.approx(best)


def test_default_cap_and_per_seed_caps(idx):
    res = _hier(idx, CALIBRATOR, k=100, min_score=-1.0, max_siblings=1, max_children=2)
    assert res.trace.counts["expanded"] <= HierarchicalConfig().max_expand
    for seed in (r for r in res if r.relation == "seed"):
        mine = [r for r in res if r.via == seed.node_id]
        assert sum(r.relation == "sibling" for r in mine) <= 1
        assert sum(r.relation == "child" for r in mine) <= 2


def test_relations_and_via_are_consistent(idx, parent_of):
    for query in (BAROMETER, FIT, CALIBRATOR, "How do I export tide data?"):
        res = _hier(idx, query, k=100)
        seeds = {r.node_id for r in res if r.relation == "seed"}
        assert len({r.node_id for r in res}) == len(res)  # deduplicated
        for r in res:
            if r.relation == "seed":
                assert r.via is None
                continue
            assert r.via in seeds, (query, r.node_id)
            if r.relation == "parent":
                assert r.node_id == parent_of[r.via]
            elif r.relation == "sibling":
                assert parent_of[r.node_id] == parent_of[r.via] and r.node_id != r.via
            else:
                assert r.relation == "child" and parent_of[r.node_id] == r.via
        c = res.trace.counts
        assert c["expanded"] == c["parents"] + c["siblings"] + c["children"]


def test_scores_rescored_by_cosine_or_decayed(idx):
    qvec = np.asarray(idx.embed_query(CALIBRATOR), dtype=np.float32)
    g, vecs = idx.graph, idx.node_vectors
    res = _hier(idx, CALIBRATOR, k=100, min_score=-1.0)
    for r in res:
        if r.relation != "seed":
            v = vecs[g.index[r.node_id]]
            assert r.score == pytest.approx(float(v @ qvec / np.linalg.norm(v)
                                                  / np.linalg.norm(qvec)), abs=1e-5)
    res = _hier(idx, CALIBRATOR, k=100, rescore=False, decay=0.5, min_score=-1.0)
    seed_score = {r.node_id: r.score for r in res if r.relation == "seed"}
    for r in res:
        if r.relation != "seed":
            f = 0.5 if r.relation == "parent" else 0.25
            assert r.score == pytest.approx(seed_score[r.via] * f)


def test_min_score_and_k(idx):
    res = _hier(idx, CALIBRATOR, k=4)
    assert len(res) == 4 and [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    res = _hier(idx, CALIBRATOR, k=100, min_score=0.45)
    assert res and all(r.score >= 0.45 for r in res)


def test_params_and_kinds(idx):
    res = _hier(idx, FIT, k=100, seed_kinds=["code"])
    assert {r.kind for r in res if r.relation == "seed"} == {"code"}
    alias = _hier(idx, FIT, k=100, kinds=["code"])  # the flat modes' name
    assert [r.node_id for r in alias] == [r.node_id for r in res]
    assert _hier(idx, FIT, seeds=0) == []
    with pytest.raises(TypeError, match="max_expand"):
        _hier(idx, FIT, max_expnad=3)
    with pytest.raises(ValueError, match="seeds"):
        _hier(idx, FIT, seeds=-1)
    cfg = HierarchicalConfig(siblings=False)
    assert "sibling" not in _relations(hierarchical.search(idx, FIT, k=100, config=cfg))


def test_trace_has_stage_timings_and_counts(idx):
    res = _hier(idx, BAROMETER)
    t = res.trace.to_dict()
    assert t["mode"] == "hierarchical"
    assert {"embed_query", "seeds", "expand", "rescore"} <= set(t["timings_ms"])
    assert all(v >= 0 for v in t["timings_ms"].values())
    c = t["counts"]
    assert c["seeds"] == 5 and c["results"] == len(res) == 10
    assert c["expanded"] == c["parents"] + c["siblings"] + c["children"] > 0
    assert sum(r.relation == "seed" for r in res) <= c["seeds"]
    md = res.to_markdown()
    assert "parent, via " in md or "sibling, via " in md


# -- cost: the query path touches only what it expands ---------------------------
class _Exploding:
    def __getattr__(self, name):
        raise AssertionError(f"the query path touched the node table (.{name})")


def test_query_path_never_reads_the_node_table(sample_index, monkeypatch):
    idx = Index.open(sample_index)
    idx.graph, idx.node_vectors  # noqa: B018 - built once per index, then kept
    idx.node(idx.graph.ids[0])  # the per-node column cache used to build results
    idx.embed_query(CALIBRATOR)
    expected = [(r.node_id, r.relation, r.via) for r in _hier(Index.open(sample_index), CALIBRATOR,
                                                               k=100)]

    def refuse(*a, **k):
        raise AssertionError("the query path read a DataFrame")

    monkeypatch.setattr(idx, "nodes", refuse)
    monkeypatch.setattr(idx, "edges", refuse)
    idx.__dict__["_nodes"] = _Exploding()
    idx.__dict__["_edges"] = _Exploding()
    for name in ("filter", "__getitem__", "select", "to_dicts", "iter_rows", "rows",
                 "get_column", "join", "with_columns", "to_numpy"):
        monkeypatch.setattr(pl.DataFrame, name, refuse)
    got = _hier(idx, CALIBRATOR, k=100)
    assert [(r.node_id, r.relation, r.via) for r in got] == expected
    assert _relations(got) == {"seed", "parent", "sibling", "child"}


class _Counting(np.ndarray):
    """An array that counts the elements every read of it touches."""

    touched = 0

    def __getitem__(self, key):
        out = super().__getitem__(key)
        _Counting.touched += int(getattr(out, "size", 1))
        return out

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _Counting.touched += sum(x.size for x in inputs if isinstance(x, _Counting))
        inputs = tuple(x.view(np.ndarray) if isinstance(x, _Counting) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        _Counting.touched += sum(x.size for x in args if isinstance(x, _Counting))
        return super().__array_function__(func, types, args, kwargs)


def _tree_graph(extra_files: int) -> Graph:
    """file f → sections s0..s5 → chunks s{i}c0..c3, then ``extra_files`` unrelated
    files of ten sections each (appended, so the first ids are the same)."""
    ids, kinds, parents, ordinals = ["f"], ["file"], [None], [0]
    for i in range(6):
        ids.append(f"s{i}"), kinds.append("section"), parents.append("f"), ordinals.append(i)
        for j in range(4):
            ids.append(f"s{i}c{j}"), kinds.append("chunk"), parents.append(f"s{i}")
            ordinals.append(j)
    for f in range(extra_files):
        ids.append(f"x{f}"), kinds.append("file"), parents.append(None), ordinals.append(0)
        for j in range(10):
            ids.append(f"x{f}s{j}"), kinds.append("section"), parents.append(f"x{f}")
            ordinals.append(j)
    nodes = pl.DataFrame({"node_id": ids, "kind": kinds, "parent_id": parents,
                          "ordinal": ordinals}, schema_overrides={"ordinal": pl.Int32})
    edges = pl.DataFrame(schema={"src": pl.Utf8, "dst": pl.Utf8, "type": pl.Utf8,
                                 "weight": pl.Float32, "relation": pl.Utf8})
    g = Graph.build(nodes, edges)
    for name in ("kind", "parent", "child_ptr", "child_idx", "indptr", "indices", "etype",
                 "weight"):
        setattr(g, name, getattr(g, name).view(_Counting))
    return g


def test_expansion_cost_does_not_depend_on_corpus_size():
    small, big = _tree_graph(0), _tree_graph(20_000)
    assert len(big.ids) > 100 * len(small.ids)
    seeds = [small.index[s] for s in ("s3c1", "s0", "s5")]
    touched, found = [], []
    for g in (small, big):
        _Counting.touched = 0
        e = expand_subtree(SimpleNamespace(graph=g), seeds)
        touched.append(_Counting.touched)
        found.append([(g.ids[i], rel, g.ids[v]) for i, rel, v in
                      zip(e.ids.tolist(), e.relations, e.via.tolist())])
    assert found[0] == found[1]
    assert touched[0] == touched[1] < 200, touched


def test_expand_subtree_rules():
    g = _tree_graph(0)
    ix = SimpleNamespace(graph=g)

    def names(e):
        return [(g.ids[i], rel, g.ids[v]) for i, rel, v in
                zip(e.ids.tolist(), e.relations, e.via.tolist())]

    s = g.index
    # parent, nearest siblings (preceding first on a tie), children in document order
    assert names(expand_subtree(ix, [s["s3"]], max_siblings=3, max_children=2)) == [
        ("f", "parent", "s3"), ("s2", "sibling", "s3"), ("s4", "sibling", "s3"),
        ("s1", "sibling", "s3"), ("s3c0", "child", "s3"), ("s3c1", "child", "s3")]
    # a seed is never expanded; a node keeps its first role (from the better seed)
    got = names(expand_subtree(ix, [s["s3c1"], s["s3"]], max_siblings=1, max_children=1))
    assert got == [("s3c0", "sibling", "s3c1"), ("f", "parent", "s3"), ("s2", "sibling", "s3")]
    # max_expand stops the walk, exclude is never returned, roots have no parent/siblings
    assert len(expand_subtree(ix, [s["s3"], s["s0"]], max_expand=5)) == 5
    assert "f" not in [n for n, _, _ in names(expand_subtree(ix, [s["s3"]], exclude=[s["f"]]))]
    assert names(expand_subtree(ix, [s["f"]], max_children=2)) == [
        ("s0", "child", "f"), ("s1", "child", "f")]
    assert len(expand_subtree(ix, [])) == 0


# -- a real documentation corpus --------------------------------------------------
@pytest.fixture(scope="module")
def oh_index(oh_build):
    base, _, _ = oh_build
    return Index.open(base / "index")


def test_openharmony_hits_come_with_their_sections(oh_index):
    idx = oh_index
    n = idx.nodes()
    parent_of = dict(zip(n["node_id"].to_list(), n["parent_id"].to_list()))
    query = "how do I share state between a parent and child component?"
    res = _hier(idx, query, k=20)
    seeds = [r for r in res if r.relation == "seed"]
    assert len(seeds) == 5 and len(res) < 20  # nothing was cut at k
    assert {r.kind for r in seeds} & {"table", "code", "chunk"}
    # every hit (a table, a code block, a chunk of a long section) arrives with
    # the section it belongs to, breadcrumb included
    by_id = {r.node_id: r for r in res}
    for seed in seeds:
        parent = by_id[parent_of[seed.node_id]]
        assert parent.kind == "section" and seed.breadcrumb.startswith(parent.breadcrumb)
        assert parent.relation == "seed" or (parent.relation, parent.via) == ("parent",
                                                                             seed.node_id)
    for r in res:
        if r.relation != "seed":
            assert r.via in {s.node_id for s in seeds}
    # the walk visits only the seeds' own relatives, whatever the corpus size
    cfg = HierarchicalConfig()
    assert res.trace.counts["candidates"] <= cfg.seeds * (1 + cfg.max_siblings + cfg.max_children)


def test_fill_tops_a_short_list_up_with_the_next_dense_hits(oh_index):
    idx = oh_index
    query = "how do I share state between a parent and child component?"
    short = _hier(idx, query, k=20)
    full = idx.search(query, mode="hierarchical", k=20, lexical=False)
    assert len(short) < 20 and len(full) == 20
    assert full.trace.counts["filled"] == 20 - len(short)
    assert {r.node_id for r in short} <= {r.node_id for r in full}
    scores = [r.score for r in full]
    assert scores == sorted(scores, reverse=True)
    added = [r for r in full if r.node_id not in {x.node_id for x in short}]
    dense = [nid for nid, _ in idx.dense(idx.embed_query(query), 40)]
    # the additions are the next dense hits, in order, beyond the 5 expanded seeds
    assert all(r.relation == "seed" and r.via is None for r in added)
    assert [r.node_id for r in added] == [n for n in dense[5:] if n in {r.node_id for r in added}]


def test_similarity_order_picks_the_siblings_closest_to_the_query(idx):
    res = _hier(idx, BAROMETER, seeds=1, parents=False, children=False, max_siblings=1,
                context_order="similarity")
    sib = [r for r in res if r.relation == "sibling"]
    assert len(sib) == 1
    g = idx.graph
    seed = g.index[res[0].node_id]
    q = idx.embed_query(BAROMETER)
    vecs = idx.node_vectors
    def cos(j):
        v = vecs[j]
        n = float(np.linalg.norm(v))
        return float(v @ q) / (n * float(np.linalg.norm(q))) if n else -1.0
    best = max(g.siblings(seed).tolist(), key=cos)
    assert sib[0].node_id == g.ids[best]
    with pytest.raises(ValueError, match="context_order"):
        _hier(idx, BAROMETER, context_order="random")
