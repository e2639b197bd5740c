"""The vector tables' contents file: an unchanged rebuild learns what the Lance
tables hold without opening them, and falls back to reading them whenever the
file cannot be trusted. The real packaged model and real Lance tables."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

import strata.stages.embed as embed
from strata.core.encoders.embedding import TORCH_RUNTIMES, EncoderSpec, load_encoder
from strata.core.storage.lance_scan import connect, scan, table_names
from strata.stages.embed import build_vectors, encode_shard
from strata.stages.enrich.semantic_graph import synonymy_edges, synonymy_edges_cached
from strata.stages.vector_contents import contents_path, read_contents

WORDS = "harbour tide gauge survey buoy swell datum station anemometer drift".split()


def _items(n: int, seed: int = 5) -> pl.DataFrame:
    rng = random.Random(seed)
    kinds = ["section", "entity", "fact"]
    return pl.DataFrame({
        "node_id": [f"n{i:04d}" for i in range(n)], "kind": [kinds[i % 3] for i in range(n)],
        "subkind": [""] * n, "path": ["a.md"] * n, "language": [None] * n, "depth": [1] * n,
        "title": [""] * n, "breadcrumb": ["a"] * n,
        "text": [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) for _ in range(n)],
        "attrs": ["{}"] * n, "embedded": [True] * n, "summary": [None] * n},
        schema_overrides={"language": pl.Utf8, "depth": pl.Int32, "summary": pl.Utf8})


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(EncoderSpec())


@pytest.fixture
def built(encoder, tmp_path):
    items, lance = _items(30), tmp_path / "lance"
    first = build_vectors(items, EncoderSpec(), lambda: encoder, lance)
    assert first.computed == 30
    return items, lance


def _no_tables(monkeypatch):
    """Make any opening of the Lance tables fail the test."""
    def refuse(*_a, **_k):
        raise AssertionError("the Lance tables were opened")
    monkeypatch.setattr(embed, "connect", refuse)


def test_the_contents_file_lists_the_tables_rows_in_their_order(built):
    _, lance = built
    contents = read_contents(lance)
    assert contents is not None and contents.dim == 384
    db = connect(lance)
    for name in table_names(db):
        got = [(r["node_id"], r["text_hash"]) for b in scan(db.open_table(name),
                                                             ["node_id", "text_hash"])
               for r in b.to_pylist()]
        kind = name.removesuffix("_vectors")
        listed = contents.of_kind(kind)
        assert got == list(zip(listed.column("node_id").to_pylist(),
                               listed.column("text_hash").to_pylist()))


def test_an_unchanged_build_and_shard_never_open_the_tables(built, encoder, monkeypatch):
    items, lance = built
    _no_tables(monkeypatch)
    again = build_vectors(items, EncoderSpec(), lambda: pytest.fail("model loaded"), lance,
                          dim=384)
    assert again.unchanged and again.computed == 0 and again.reused == 30
    assert again.contents is not None and again.contents.rows.num_rows == 30  # for the check
    shard = encode_shard(items, EncoderSpec(), lambda: pytest.fail("model loaded"), lance, 0, 1,
                         sink=lambda h, v: pytest.fail("nothing to encode"))
    assert shard.computed == 0


def test_a_contents_file_that_changed_is_not_trusted_and_is_written_again(built, encoder):
    items, lance = built
    path = contents_path(lance)
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)  # one row short, the metadata kept as it was
    assert read_contents(lance) is None
    path.write_bytes(b"not parquet")
    assert read_contents(lance) is None
    again = build_vectors(items, EncoderSpec(), lambda: pytest.fail("model loaded"), lance,
                          dim=384)
    assert again.unchanged and read_contents(lance) is not None  # written for the next one
    assert read_contents(lance).rows.num_rows == 30


def test_a_damaged_table_makes_the_contents_unknown_and_its_vectors_are_encoded(built, encoder):
    items, lance = built
    data = sorted((lance / "fact_vectors.lance" / "data").glob("*.lance"))[0]
    with open(data, "r+b") as f:
        f.truncate(f.seek(0, 2) - 8)  # the Lance footer gone
    assert read_contents(lance) is None
    again = build_vectors(items, EncoderSpec(), lambda: encoder, lance, dim=384)
    assert again.computed == 10 and not again.unchanged  # the fact table's rows, encoded again
    assert read_contents(lance) is not None


def test_synonymy_keyed_by_text_hashes_reads_no_vector_on_a_hit(tmp_path):
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(8, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"e{i}" for i in range(8)]
    reads = []

    def read():  # a reader of the table: its rows in blocks, each time it is called
        reads.append(1)
        return iter((vecs[:5], vecs[5:]))

    first, hit1 = synonymy_edges_cached(ids, read, tmp_path, vectors_key="hashes-1")
    passes = len(reads)
    again, hit2 = synonymy_edges_cached(ids, read, tmp_path, vectors_key="hashes-1")
    assert (hit1, hit2) == (False, True) and passes > 0 and len(reads) == passes
    assert again.equals(first) and first.equals(synonymy_edges(ids, vecs))
    _, hit3 = synonymy_edges_cached(ids, read, tmp_path, vectors_key="hashes-2")
    assert hit3 is False and len(reads) == 2 * passes


def test_an_entity_table_shorter_than_its_contents_file_is_not_trusted_again(built):
    """The graph step reads the entity vectors in passes from a table its contents
    file vouches for; a table that lost its last rows since (changed by hand) fails
    the read with one line and is read from the tables on the next attempt."""
    from types import SimpleNamespace

    from strata.assets.graph import _entity_rows
    from strata.core.config.schema import ENTITY, vector_table_name

    _, lance = built
    connect(lance).open_table(vector_table_name(ENTITY)).delete("node_id = 'n0028'")
    ids, blocks, key = _entity_rows(SimpleNamespace(build_lance=lance))
    assert ids[-1] == "n0028" and key is not None
    with pytest.raises(RuntimeError, match="does not hold the rows its contents file lists"):
        list(blocks())
    assert read_contents(lance) is None
    ids, blocks, key = _entity_rows(SimpleNamespace(build_lance=lance))
    assert key is None and "n0028" not in ids and len(ids) == 9
    assert sum(len(block) for block in blocks()) == 9


def _data_files(lance, kind: str) -> dict[str, int]:
    """The inode of each data file of one kind's table."""
    folder = lance / f"{kind}_vectors.lance" / "data"
    return {p.name: p.stat().st_ino for p in folder.glob("*.lance")}


def _rows(lance, kind: str) -> list[tuple]:
    table = connect(lance).open_table(f"{kind}_vectors")
    return [(r["node_id"], r["text_hash"], tuple(r["vector"]))
            for b in scan(table, ["node_id", "text_hash", "vector"]) for r in b.to_pylist()]


def test_an_edit_rewrites_only_the_tables_of_the_kinds_it_touched(built, encoder):
    """A changed section text rewrites the section table; the entity and fact
    tables, whose rows did not change, are the same files (hard links), and the
    tables read back as a fresh build of the edited rows writes them."""
    items, lance = built
    before = {kind: _data_files(lance, kind) for kind in ("section", "entity", "fact")}
    edited = items.with_columns(pl.when(pl.col("node_id") == "n0003")
                                .then(pl.lit("a changed tide gauge survey"))
                                .otherwise(pl.col("text")).alias("text"))
    again = build_vectors(edited, EncoderSpec(), lambda: encoder, lance, dim=384)
    assert again.computed == 1 and not again.unchanged
    assert again.tables_kept == ["entity", "fact"]
    for kind in ("entity", "fact"):
        assert _data_files(lance, kind) == before[kind]  # not written again: linked
    assert set(_data_files(lance, "section").values()).isdisjoint(before["section"].values())
    contents = read_contents(lance)
    assert contents is not None and set(contents.kinds) == {"section", "entity", "fact"}
    # what the tables hold is what a build of the edited rows from nothing writes
    fresh = lance.parent / "fresh"
    build_vectors(edited, EncoderSpec(), lambda: encoder, fresh)
    assert read_contents(fresh).kinds == contents.kinds
    exact = encoder.runtime in TORCH_RUNTIMES  # ONNX: a vector carries its batch's float noise
    for kind in ("section", "entity", "fact"):
        kept, written = _rows(lance, kind), _rows(fresh, kind)
        assert [r[:2] for r in kept] == [r[:2] for r in written]
        x, y = (np.array([r[2] for r in rows], np.float32) for rows in (kept, written))
        assert np.array_equal(x, y) if exact else np.allclose(x, y, atol=1e-4)
    # and nothing is left to do: the next build with the same rows opens no table
    assert build_vectors(edited, EncoderSpec(), lambda: pytest.fail("model loaded"), lance,
                         dim=384).unchanged


def test_an_edit_reads_the_stored_vectors_of_the_kinds_it_touched_only(built, encoder,
                                                                      monkeypatch):
    """The tables an edit keeps are not read: a small edit of a section pays for
    the section table's vectors, not for every entity's and fact's. Which tables
    are scanned is recorded at both readers (the stored hashes and vectors, and
    the fill of the rows to write); the result is the table a fresh build writes."""
    import strata.stages.stored_vectors as stored

    items, lance = built
    scanned: list[str] = []

    def recording(table, columns, *a, **k):
        scanned.append(table.name)
        return scan(table, columns, *a, **k)

    monkeypatch.setattr(embed, "scan", recording)
    monkeypatch.setattr(stored, "scan", recording)
    edited = items.with_columns(pl.when(pl.col("node_id") == "n0003")
                                .then(pl.lit("a changed tide gauge survey"))
                                .otherwise(pl.col("text")).alias("text"))
    again = build_vectors(edited, EncoderSpec(), lambda: encoder, lance, dim=384)
    assert again.computed == 1 and again.reused == 29 and again.tables_kept == ["entity", "fact"]
    assert scanned and set(scanned) == {"section_vectors"}
    monkeypatch.undo()
    fresh = lance.parent / "fresh"
    build_vectors(edited, EncoderSpec(), lambda: encoder, fresh)
    exact = encoder.runtime in TORCH_RUNTIMES
    for kind in ("section", "entity", "fact"):
        kept, written = _rows(lance, kind), _rows(fresh, kind)
        assert [r[:2] for r in kept] == [r[:2] for r in written]
        x, y = (np.array([r[2] for r in rows], np.float32) for rows in (kept, written))
        assert np.array_equal(x, y) if exact else np.allclose(x, y, atol=1e-4)


def test_a_contents_file_without_the_kinds_fingerprints_keeps_no_table(built, encoder):
    """A contents file written before it named each kind's fingerprint: every table
    is written again, and the file written then names them."""
    import pyarrow.parquet as pq

    items, lance = built
    path = contents_path(lance)
    table = pq.read_table(path)
    meta = {k: v for k, v in table.schema.metadata.items() if k != b"kinds"}
    pq.write_table(table.replace_schema_metadata(meta), path)
    assert read_contents(lance) is not None and read_contents(lance).kinds == {}
    edited = items.with_columns(pl.when(pl.col("node_id") == "n0003")
                                .then(pl.lit("a changed tide gauge survey"))
                                .otherwise(pl.col("text")).alias("text"))
    again = build_vectors(edited, EncoderSpec(), lambda: encoder, lance, dim=384)
    assert again.tables_kept == [] and again.computed == 1
    assert set(read_contents(lance).kinds) == {"section", "entity", "fact"}


def test_texts_made_a_slice_at_a_time_give_the_rows_of_one_slice(built, encoder, monkeypatch,
                                                                 tmp_path):
    """The encoder texts are made ``TEXT_SLICE`` rows at a time; the tables, their
    contents file and fingerprint must not depend on it, or a rebuild after a
    change of slice would rewrite every table (and two builds of one corpus would
    disagree)."""
    items, lance = built
    one_slice = read_contents(lance)
    monkeypatch.setattr(embed, "TEXT_SLICE", 4)  # 30 rows: 8 slices, the last short
    rows = embed._rows_table(embed._embedded(items), EncoderSpec())
    assert all(column.num_chunks == 1 for column in rows.columns)
    again = build_vectors(items, EncoderSpec(), lambda: encoder, lance)
    assert again.unchanged and again.computed == 0  # the same fingerprint: nothing rewritten
    fresh = build_vectors(items, EncoderSpec(), lambda: encoder, tmp_path / "sliced")
    sliced = read_contents(tmp_path / "sliced")
    assert fresh.computed == 30 and sliced.fingerprint == one_slice.fingerprint
    assert sliced.rows.equals(one_slice.rows)
