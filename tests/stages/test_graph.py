"""Tests for stages.structural_graph on node/reference tables produced by the real
discover → parse → finalize path over a small corpus in a temp folder."""

from __future__ import annotations


import polars as pl
import pytest

from strata.stages.discover import discover
from strata.stages.structural_graph import GraphResult, build_edges
from strata.stages.nodes import build_nodes

FILES = {
    "docs/index.md": """\
# Home

See [other](other.md#some-heading), [again](other.md#some-heading) and [sub](sub/).
Also [escape](../../outside.md), [missing](nope.md) and [details](#details).
A link to [myself](#home) and to [no anchor](other.md#no-such-heading).
Code: [util](../pkg/util.py).

## Details

More text here.
""",
    "docs/other.md": """\
# Other

Intro.

## Some Heading

Body of some heading, back to [home](index.md).
""",
    "docs/sub/README.md": """\
# Sub readme

Text with a [parent](../index.md#details) link.
""",
    "pkg/__init__.py": '''\
"""The package."""
from . import util
''',
    "pkg/util.py": '''\
"""Utilities."""


def helper(x):
    return x + 1


class Thing:
    def method(self):
        return helper(1)
''',
    "pkg/app.py": '''\
import os
import json as j
from pkg.util import helper
from pkg.util import Thing, helper


def main():
    return helper(os.getpid())
''',
}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    sources = discover(root)
    result = build_nodes("test", sources)
    nodes = pl.from_arrow(result.nodes)
    refs = pl.from_arrow(result.references)
    g = build_edges(nodes, refs)
    return nodes, refs, g


def _id(nodes: pl.DataFrame, node_path: str) -> str:
    hit = nodes.filter(pl.col("node_path") == node_path)
    assert hit.height == 1, (node_path, nodes["node_path"].to_list())
    return hit["node_id"][0]


def _edges(g: GraphResult) -> pl.DataFrame:
    return pl.from_arrow(g.edges)


def _out(g: GraphResult, src: str, typ: str) -> set[tuple[str, str]]:
    e = _edges(g).filter((pl.col("src") == src) & (pl.col("type") == typ))
    return set(zip(e["dst"].to_list(), e["relation"].to_list()))


def test_edges_table_schema(graph):
    _, _, g = graph
    assert g.edges.schema.names == ["src", "dst", "type", "relation", "weight"]
    assert set(_edges(g)["weight"].to_list()) == {1.0}


def test_structural_edges_both_ways_for_every_parent(graph):
    nodes, _, g = graph
    pairs = set(zip(*nodes.filter(pl.col("parent_id").is_not_null())
                    .select("parent_id", "node_id").to_dict(as_series=False).values()))
    with_parent = nodes.filter(pl.col("parent_id").is_not_null()).height
    # 5 sections + helper, Thing, Thing.method, main
    assert with_parent == len(pairs) == 9
    s = _edges(g).filter(pl.col("type") == "structural")
    assert s.height == 2 * with_parent
    contains = set(zip(*s.filter(pl.col("relation") == "contains").select("src", "dst")
                       .to_dict(as_series=False).values()))
    part_of = set(zip(*s.filter(pl.col("relation") == "part_of").select("src", "dst")
                      .to_dict(as_series=False).values()))
    assert contains == pairs
    assert part_of == {(c, p) for p, c in pairs}
    assert set(s["relation"].to_list()) == {"contains", "part_of"}


def test_link_with_anchor_lands_on_that_section(graph):
    nodes, _, g = graph
    home = _id(nodes, "docs/index.md#home")
    some = _id(nodes, "docs/other.md#other/some-heading")
    other_file = _id(nodes, "docs/other.md")
    jumps = _out(g, home, "jump")
    assert (some, "links_to") in jumps
    # the heading link goes to the section; the file node is only reached
    # through the link whose anchor does not exist
    assert (other_file, "links_to") in jumps


def test_link_with_unknown_anchor_falls_back_to_the_file(graph):
    nodes, refs, g = graph
    assert "other.md#no-such-heading" in refs["target"].to_list()
    home = _id(nodes, "docs/index.md#home")
    assert (_id(nodes, "docs/other.md"), "links_to") in _out(g, home, "jump")
    assert all(u["target"] != "other.md#no-such-heading" for u in g.unresolved)


def test_folder_link_resolves_to_its_readme(graph):
    nodes, _, g = graph
    home = _id(nodes, "docs/index.md#home")
    assert (_id(nodes, "docs/sub/README.md"), "links_to") in _out(g, home, "jump")


def test_relative_parent_link_with_anchor(graph):
    nodes, _, g = graph
    sub = _id(nodes, "docs/sub/README.md#sub-readme")
    assert _out(g, sub, "jump") == {(_id(nodes, "docs/index.md#home/details"), "links_to")}


def test_markdown_link_to_a_python_file(graph):
    nodes, _, g = graph
    home = _id(nodes, "docs/index.md#home")
    assert (_id(nodes, "pkg.util"), "links_to") in _out(g, home, "jump")


def test_link_outside_root_is_unresolved(graph):
    _, _, g = graph
    hits = [u for u in g.unresolved if u["target"] == "../../outside.md"]
    assert len(hits) == 1
    assert hits[0]["reason"] == "points outside the corpus root"
    assert hits[0]["path"] == "docs/index.md"


def test_link_to_missing_file_is_unresolved(graph):
    nodes, _, g = graph
    hits = [u for u in g.unresolved if u["target"] == "nope.md"]
    assert len(hits) == 1
    assert hits[0]["reason"] == "target file not in corpus"
    assert hits[0]["src"] == _id(nodes, "docs/index.md#home")
    assert sorted(u["target"] for u in g.unresolved) == ["../../outside.md", "nope.md"]


def test_same_file_anchor_resolves_to_the_section(graph):
    nodes, _, g = graph
    home = _id(nodes, "docs/index.md#home")
    details = _id(nodes, "docs/index.md#home/details")
    assert (details, "links_to") in _out(g, home, "jump")


def test_home_jumps_exactly(graph):
    nodes, _, g = graph
    home = _id(nodes, "docs/index.md#home")
    assert _out(g, home, "jump") == {
        (_id(nodes, "docs/other.md#other/some-heading"), "links_to"),
        (_id(nodes, "docs/other.md"), "links_to"),
        (_id(nodes, "docs/sub/README.md"), "links_to"),
        (_id(nodes, "docs/index.md#home/details"), "links_to"),
        (_id(nodes, "pkg.util"), "links_to"),
    }


def test_from_import_yields_symbol_and_module_edges(graph):
    nodes, _, g = graph
    app = _id(nodes, "pkg.app")
    util = _id(nodes, "pkg.util")
    helper = _id(nodes, "pkg.util.helper")
    thing = _id(nodes, "pkg.util.Thing")
    assert _out(g, app, "import") == {
        (helper, "imports_symbol"),
        (thing, "imports_symbol"),
        (util, "imports"),
    }
    assert nodes.filter(pl.col("node_id") == helper)["kind"][0] == "code"
    assert nodes.filter(pl.col("node_id") == util)["kind"][0] == "file"


def test_relative_import_in_package_init_reaches_the_module_file(graph):
    nodes, refs, g = graph
    init = _id(nodes, "pkg")
    assert nodes.filter(pl.col("node_id") == init)["path"][0] == "pkg/__init__.py"
    assert refs.filter(pl.col("src") == init)["target"].to_list() == ["pkg"]
    assert _out(g, init, "import") == {(_id(nodes, "pkg.util"), "imports")}


def test_external_imports_are_counted_not_linked(graph):
    nodes, _, g = graph
    # ``import os`` and ``import json as j`` in pkg/app.py
    assert g.external_imports == 2
    ids = set(nodes["node_id"].to_list())
    e = _edges(g)
    assert set(e["src"].to_list()) <= ids
    assert set(e["dst"].to_list()) <= ids


def test_no_self_loops(graph):
    nodes, refs, g = graph
    home = _id(nodes, "docs/index.md#home")
    # the ``[myself](#home)`` link exists as a reference but makes no edge
    assert refs.filter((pl.col("src") == home) & (pl.col("target") == "#home")).height == 1
    e = _edges(g)
    assert e.filter(pl.col("src") == pl.col("dst")).height == 0


def test_no_duplicate_edges(graph):
    nodes, refs, g = graph
    home = _id(nodes, "docs/index.md#home")
    # two links to the same heading, two imports of helper: one edge each
    assert refs.filter((pl.col("src") == home)
                       & (pl.col("target") == "other.md#some-heading")).height == 2
    e = _edges(g)
    assert e.height == e.unique(subset=["src", "dst", "type", "relation"]).height
    some = _id(nodes, "docs/other.md#other/some-heading")
    assert e.filter((pl.col("src") == home) & (pl.col("dst") == some)).height == 1


def test_edge_count_by_type(graph):
    nodes, _, g = graph
    counts = dict(_edges(g).group_by("type").len().iter_rows())
    with_parent = nodes.filter(pl.col("parent_id").is_not_null()).height
    # jumps: home → 5 targets, some-heading → index file, sub readme → details
    assert counts == {"structural": 2 * with_parent, "jump": 7, "import": 4}


def test_links_resolve_against_files_added_later(tmp_path):
    """Resolution needs no re-parse: refs from one build, nodes from another."""
    root = tmp_path / "c"
    root.mkdir()
    (root / "a.md").write_text("# A\n\n[b](b.md#bee)\n")
    first = build_nodes("t", discover(root))
    g1 = build_edges(pl.from_arrow(first.nodes), pl.from_arrow(first.references))
    assert [u["target"] for u in g1.unresolved] == ["b.md#bee"]

    (root / "b.md").write_text("# Bee\n\ntext\n")
    second = build_nodes("t", discover(root))
    nodes = pl.from_arrow(second.nodes)
    g2 = build_edges(nodes, pl.from_arrow(first.references))
    assert g2.unresolved == []
    jumps = _edges(g2).filter(pl.col("type") == "jump")
    assert jumps.select("src", "dst").rows() == [(_id(nodes, "a.md#a"), _id(nodes, "b.md#bee"))]
