"""What rendering a hostile node's Markdown costs the service: a document made
to be slow to parse (a 200 KB line of unclosed links) is indexed by the real
pipeline and served; its HTML must still be safe, be rendered once however
often it is asked for, and only a bounded prefix of it may be parsed as
Markdown. Work is counted (calls, characters), never timed."""

from __future__ import annotations

from html.parser import HTMLParser
from types import SimpleNamespace

import pytest

from tests.serving.helpers import make_client, settings_for

HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
STORM = ("# Link storm\n\nA page whose one long line is an unclosed link, over and over.\n\n"
         + "[a](" * 25_000 + HOSTILE + "[a](" * 25_000 + "\n")


@pytest.fixture(scope="module")
def storm_index(tmp_path_factory):
    import dagster as dg

    from tests.conftest import Builder, write_corpora

    base = tmp_path_factory.mktemp("storm")
    root = base / "corpus" / "docs"
    root.mkdir(parents=True)
    (root / "storm.md").write_text(STORM)
    (root / "guide.md").write_text("# Guide\n\nSome **bold** prose about barometers.\n")
    cfg = write_corpora(base / "corpora.yaml", {"storm": {
        "root": str(base / "corpus"), "out": str(base / "index")}})
    with dg.instance_for_test() as instance:
        Builder(instance, cfg).build("storm")
    return base / "index"


@pytest.fixture(scope="module")
def api(storm_index):
    with make_client(settings_for(f"storm={storm_index}")) as client:
        yield client


@pytest.fixture(scope="module")
def storm_node(storm_index) -> str:
    """The section that holds the whole long line."""
    import polars as pl

    from strata.retrieval import Index

    nodes = Index.open(str(storm_index)).table("nodes")
    rows = nodes.filter((pl.col("kind") == "section") & (pl.col("path") == "docs/storm.md")
                        & (pl.col("text").str.len_chars() > 150_000))
    assert rows.height == 1, nodes.select("node_id", "kind", "path")
    return rows["node_id"][0]


@pytest.fixture
def render(monkeypatch):
    """The render module with a cold cache, counting calls of ``markdown_html``
    and the length of each text given to the Markdown parser."""
    from strata.service import render

    render._cache.clear()
    calls, parsed = [], []
    real_html, real_md = render.markdown_html, render._markdown

    def counted(text):
        calls.append(len(text or ""))
        return real_html(text)

    class Parser:
        def render(self, text):
            parsed.append(len(text))
            return real_md().render(text)

    monkeypatch.setattr(render, "markdown_html", counted)
    monkeypatch.setattr(render, "_markdown", lambda: Parser())
    yield SimpleNamespace(module=render, calls=calls, parsed=parsed)
    render._cache.clear()


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs


def test_a_pathological_node_is_rendered_safely_from_a_bounded_prefix(api, storm_node, render):
    r = api.get(f"/indexes/storm/nodes/{storm_node}")
    assert r.status_code == 200, r.text
    node = r.json()["node"]
    html = node["html"]
    assert html and len(node["text"]) > 150_000
    # (a) produced, and safe: only allow-listed tags, no handler, the script is text
    parsed = Tags()
    parsed.feed(html)
    assert parsed.tags <= render.module.TAGS, parsed.tags - render.module.TAGS
    assert not [a for a, _ in parsed.attrs if a.startswith("on")]
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img" in html  # in the tail
    assert "<h1>Link storm</h1>" in html  # the prefix is Markdown ...
    assert "formatting stops here" in html and "<pre>" in html  # ... the rest plain text
    assert html.count("[a](") >= 49_000  # nothing of the text is lost
    # (c) the parser saw a bounded prefix, not the 200 KB
    assert render.parsed and max(render.parsed) <= render.module.MARKDOWN_MAX_CHARS
    assert sum(render.parsed) <= render.module.MARKDOWN_MAX_CHARS * len(render.calls)


def test_a_node_is_rendered_once_however_often_it_is_asked_for(api, storm_node, render):
    for _ in range(3):
        r = api.get(f"/indexes/storm/nodes/{storm_node}")
        assert r.status_code == 200 and r.json()["node"]["html"]
    assert render.calls == [len(r.json()["node"]["text"])]  # (b) once, on the first request

    render.calls.clear()
    search = {"query": "link storm unclosed link", "mode": "flat", "k": 5, "index": "storm"}
    first = api.post("/search", json=search)
    assert first.status_code == 200, first.text
    hits = [h for h in first.json()["results"] + first.json()["below"] if h["html"]]
    assert any(len(h["text"]) > 150_000 for h in hits)  # the storm, as a hit
    assert 0 < len(render.calls) <= len({h["text"] for h in hits})
    rendered = list(render.calls)
    again = [api.post("/search", json=search) for _ in range(3)]
    assert [r.json()["results"] for r in again] == [first.json()["results"]] * 3
    assert render.calls == rendered  # later searches render nothing
