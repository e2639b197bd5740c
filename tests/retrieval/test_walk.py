"""The entity walk (diffusion's stage 3b): question-entity linking, the walk
itself on a hand-made graph, and a real build where the second hop of a
multi-hop question shares no word with it and only the walk finds it."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from strata.retrieval import Index
from strata.retrieval.graph_arrays import Graph
from strata.retrieval.walk import build, normalise
from tests.conftest import write_corpora


def _graph(edges: list[tuple[str, str, str, float]], kinds: dict[str, str]) -> Graph:
    nodes = pl.DataFrame({"node_id": list(kinds), "kind": list(kinds.values()),
                          "parent_id": [None] * len(kinds), "ordinal": [0] * len(kinds)})
    e = pl.DataFrame({"src": [a for a, *_ in edges], "dst": [b for _, b, *_ in edges],
                      "type": [t for _, _, t, _ in edges], "relation": ["r"] * len(edges),
                      "weight": [w for *_, w in edges]}, schema_overrides={"weight": pl.Float32})
    return Graph.build(nodes, e)


KINDS = {"A": "chunk", "B": "chunk", "C": "chunk", "x": "entity", "y": "entity", "z": "entity",
         "w": "entity"}
TITLES = {"x": "Green", "y": "Steve Hillage", "z": "Gong", "w": "the band"}


def _walk():
    edges = [("A", "x", "passage", 1.0), ("A", "y", "passage", 1.0),  # A names x and y
             ("B", "y", "passage", 1.0), ("C", "z", "passage", 1.0),
             ("z", "w", "synonymy", 0.9)]
    g = _graph(edges, KINDS)
    return g, build(g, [TITLES.get(i) for i in g.ids])


def test_link_takes_the_longest_span_and_skips_stopwords():
    _, walk = _walk()
    linked = walk.link("Who was the spouse of Steve Hillage, the performer of Green?")
    assert set(linked) == {"steve hillage", "green"}
    assert walk.link("the of and") == {}
    assert normalise("  Steve   HILLAGE!") == "steve hillage"


def test_mass_flows_from_a_named_entity_to_the_second_hop():
    g, walk = _walk()
    i = g.index
    reset = np.zeros(walk.n)
    reset[i["x"]] = 1.0  # the question names "Green"
    mass, iters = walk.run(reset)
    assert 1 < iters <= 30
    # A mentions x; B is reached only through y, which A also mentions; C never
    assert mass[i["A"]] > mass[i["B"]] > 0
    assert mass[i["C"]] == 0 and mass[i["z"]] == 0
    assert walk.passages[i["y"]] == 2 and walk.passages[i["x"]] == 1  # distinct passages
    assert walk.run(np.zeros(walk.n))[0].sum() == 0  # no reset, no mass


def test_no_passage_edges_no_walk():
    g = _graph([("A", "B", "structural", 1.0)], {"A": "file", "B": "chunk"})
    assert build(g, [None, None]) is None


DISTRACTORS = [  # dense-similar to the question: spouses and partners of other people
    ("Ada Brook", "Ada Brook married the painter Leo Marsh in 1961 and they lived in Leeds.",
     "married"),
    ("Tom Reyes", "Tom Reyes was the husband of the novelist Clara Dunn until her death.",
     "husband of"),
    ("Nina Holt", "Nina Holt and her long-time partner, the sculptor Ivo Berg, share a studio.",
     "partner"),
    ("Paul Craig", "Paul Craig's wife, Edith Lane, managed his tours and finances.", "wife"),
    ("Rosa Vance", "Rosa Vance wed the composer Felix Orr; the couple divorced in 1990.", "wed"),
    ("Hugo Strand", "Hugo Strand met his spouse, the architect Lena Dahl, at university.",
     "spouse"),
]
RIVERS = ["Avon", "Tamar", "Wye", "Severn", "Trent", "Ouse", "Tees", "Exe", "Dart", "Usk",
          "Eden", "Tyne", "Wear", "Lune", "Ribble", "Mersey", "Dee", "Clwyd", "Teifi", "Towy"]
FILLERS = [(f"River {r}", f"The River {r} rises in the Pennine Hills and flows into the North Sea "
            f"near Port {r}.", "flows into") for r in RIVERS]  # more facts: seeds must be chosen


@pytest.fixture
def multihop_index(builder, tmp_path):
    """Hop 1 names the performer; hop 2 (his partner) shares no content word with
    the question, while six passages about other people's spouses are closer to
    it in embedding space but connected to nothing it names. OpenIE comes from a
    HippoRAG-format file, as MuSiQue's does."""
    docs = tmp_path / "docs"
    docs.mkdir()
    pages = [("Green (album)", "Green is the fourth studio album by the English guitarist "
              "Steve Hillage, released in 1978.", "performer"),
             ("Steve Hillage", "Steve Hillage has lived with Miquette Giraudy since the 1970s; "
              "together they record ambient music as System 7.", "lives with")]
    pages += DISTRACTORS + FILLERS
    records = []
    for n, (title, text, relation) in enumerate(pages):
        (docs / f"p{n}.md").write_text(f"# {title}\n\n{text}\n")
        words = [w.strip(".,;'s") for w in text.split()]
        names = [" ".join(words[j:j + 2]) for j in range(len(words) - 1)
                 if words[j][:1].isupper() and words[j + 1][:1].isupper()]
        if n == 0:
            names = ["Green", "Steve Hillage"]
        if (title, text, relation) in DISTRACTORS:
            names = []  # similar words, but linked to nothing the question names
        triples = [[names[0], relation, o] for o in names[1:]]
        records.append({"idx": n, "passage": f"{title}\n{text}", "extracted_entities": names,
                        "extracted_triples": triples})
    openie = tmp_path / "openie.json"
    openie.write_text(json.dumps({"docs": records}))
    write_corpora(builder.config_path, {"mh": {"root": str(docs), "out": str(tmp_path / "index")}})
    result = builder.build("mh", run_config={"ops": {"facts": {"config": {
        "import_path": str(openie)}}}})
    assert result.success
    return Index.open(tmp_path / "index")


def test_the_walk_finds_the_second_hop(multihop_index):
    idx = multihop_index
    q = "Who is the partner of the performer of Green?"
    paths = lambda res: [r.path for r in res]  # noqa: E731
    # the floor off: a second hop does not resemble the question (that is why it is a
    # second hop), so its relevance is low; this test is about what the walk finds
    without = idx.search(q, mode="diffusion", walk=False, k=2, min_relevance=0)
    with_walk = idx.search(q, mode="diffusion", k=2, min_relevance=0)
    assert "p1.md" not in paths(without), paths(without)  # dense + best-first miss it
    assert {"p0.md", "p1.md"} <= set(paths(with_walk)), paths(with_walk)
    hop2 = next(r for r in with_walk if r.path == "p1.md")
    assert hop2.relation in ("walk", "diffused", "seed")
    t = with_walk.trace
    assert "green" in t.diffusion["query_entities"]
    assert t.counts["walk_iterations"] > 0 and "walk" in t.timings_ms


def test_walk_is_off_by_default_on_heuristic_facts_and_can_be_forced(sample_index):
    """The sample corpus's facts come from the offline heuristic: "auto" skips the
    walk and says so; "on" runs it; a bad value is a clear error."""
    idx = Index.open(sample_index)
    sources = idx.manifest["stages"]["openie"]["units_by_source"]
    assert set(sources) == {"offline"}
    q = "How do I correct pressure readings for barometric drift?"
    auto = idx.search(q, mode="diffusion")
    assert "walk" not in auto.trace.timings_ms
    assert any(n.startswith("walk: off") for n in auto.trace.notes)
    forced = idx.search(q, mode="diffusion", walk="on")
    assert "walk" in forced.trace.timings_ms and forced.trace.counts["walk_iterations"] > 0
    with pytest.raises(ValueError, match="walk must be"):
        idx.search(q, mode="diffusion", walk="sometimes")

