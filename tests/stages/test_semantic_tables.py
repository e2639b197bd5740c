"""The facts step's tables are rewritten only when the OpenIE output moved, and
never trusted when they are not whole."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.stages.enrich.openie import OpenIEOut, run_openie
from strata.stages.enrich.semantic_graph import build_entities, passage_edges, semantic_edges
from strata.stages.enrich.semantic_tables import STAMP_SUFFIX, write_semantic_tables

PER_UNIT = {
    "chunk-a": OpenIEOut(entities=[("Barack Obama", ""), ("Honolulu", "a city in Hawaii")],
                         triples=[("Barack Obama", "born in", "Honolulu")]),
    "chunk-b": OpenIEOut(entities=[("barack  obama", "44th president")],
                         triples=[("Honolulu", "capital of", "Hawaii")]),
}


@pytest.fixture
def paths(tmp_path):
    return tmp_path / "entities.parquet", tmp_path / "facts.parquet", tmp_path / "semantic.parquet"


def _identity(paths) -> list[tuple[int, int]]:
    return [(os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths]


def test_the_tables_are_what_the_graph_functions_make(paths):
    result = write_semantic_tables("demo", PER_UNIT, *paths)
    entities, facts = build_entities("demo", PER_UNIT)
    assert pq.read_table(paths[0]).equals(entities)
    assert pq.read_table(paths[1]).equals(facts)
    semantic = pa.concat_tables([passage_edges(PER_UNIT, entities), semantic_edges(facts)])
    assert pq.read_table(paths[2]).equals(semantic)
    assert (result.entities, result.facts, result.reused) == (entities.num_rows, facts.num_rows,
                                                              False)


def test_the_same_output_leaves_the_files_alone(paths):
    first = write_semantic_tables("demo", PER_UNIT, *paths)
    before = _identity(paths)
    again = write_semantic_tables("demo", dict(reversed(PER_UNIT.items())), *paths)
    assert again.reused and (again.entities, again.facts) == (first.entities, first.facts)
    assert _identity(paths) == before


@pytest.mark.parametrize("change", ["a triple", "a description", "the corpus"])
def test_any_change_to_the_output_or_the_corpus_rewrites_them(paths, change):
    write_semantic_tables("demo", PER_UNIT, *paths)
    per_unit, corpus = dict(PER_UNIT), "demo"
    if change == "a triple":
        per_unit["chunk-b"] = replace(per_unit["chunk-b"], triples=[("Hawaii", "has", "Honolulu")])
    elif change == "a description":
        per_unit["chunk-a"] = replace(per_unit["chunk-a"],
                                      entities=[("Barack Obama", "a lawyer"), ("Honolulu", "")])
    else:
        corpus = "other"
    result = write_semantic_tables(corpus, per_unit, *paths)
    entities, facts = build_entities(corpus, per_unit)
    assert not result.reused
    assert pq.read_table(paths[0]).equals(entities) and pq.read_table(paths[1]).equals(facts)


def test_a_unit_that_lost_its_output_rewrites_them(paths):
    """A unit whose LLM call failed this time has no output: its facts go."""
    write_semantic_tables("demo", PER_UNIT, *paths)
    result = write_semantic_tables("demo", {"chunk-a": PER_UNIT["chunk-a"]}, *paths)
    assert not result.reused and result.facts == 1


@pytest.mark.parametrize("damage", ["truncated table", "missing table", "no stamp"])
def test_tables_that_are_not_whole_are_written_again(paths, damage):
    write_semantic_tables("demo", PER_UNIT, *paths)
    stamp = paths[1].with_name(paths[1].name + STAMP_SUFFIX)
    if damage == "truncated table":
        paths[2].write_bytes(paths[2].read_bytes()[:40])  # an interrupted copy: no footer
    elif damage == "missing table":
        paths[0].unlink()
    else:
        stamp.unlink()  # what a write interrupted before its end leaves
    result = write_semantic_tables("demo", PER_UNIT, *paths)
    assert not result.reused and stamp.is_file()
    assert all(pq.read_metadata(p).num_rows > 0 for p in paths)


def test_the_offline_cache_read_back_from_json_is_not_written_again():
    """The heuristic's cache compares equal to itself after a JSON round trip, so
    an unchanged corpus does not rewrite it on every build."""
    import polars as pl

    units = pl.DataFrame({"node_id": ["u1", "u2"], "path": ["a.md", "b.md"],
                          "title": ["Honolulu", "Hawaii"], "breadcrumb": ["", ""],
                          "text": ["Barack Obama was born in Honolulu, the capital of Hawaii.",
                                   "Hawaii is a state of the United States."]})
    first = run_openie(units, None)
    assert first.offline_cache
    stored = json.loads(json.dumps(first.offline_cache))
    again = run_openie(units, None, offline_cache=stored)
    assert again.offline_cache == stored
    assert again.per_unit == first.per_unit
