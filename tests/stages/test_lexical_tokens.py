"""A lexical rebuild tokenizes only the texts that changed, and its index is the
one a build from nothing makes, byte for byte."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

from strata.stages import lexical_tokens
from strata.stages.lexical import build_lexical
from strata.core.config.schema import LEXICAL_DIR, LEXICAL_UNITS
from tests.index_equality import lexical_differences


def _items(texts: dict[str, str]) -> pl.DataFrame:
    """Items as :func:`embedding_items` gives them: chunks, plus an entity and a fact."""
    rows = [{"node_id": nid, "kind": "chunk", "text": text} for nid, text in texts.items()]
    rows += [{"node_id": "entity-1", "kind": "entity", "text": "Honolulu: a city in Hawaii"},
             {"node_id": "fact-1", "kind": "fact", "text": "(Obama, born in, Honolulu)"}]
    return pl.DataFrame(rows).with_columns(
        title=pl.lit("A title"), breadcrumb=pl.lit("Guide > Part"), attrs=pl.lit("{}"),
        summary=pl.lit(None, pl.Utf8), embedded=pl.lit(True))


TEXTS = {f"chunk-{i:03d}": f"Paragraph {i} reads chunked bodies with read_chunked and "
                            f"HTTPResponse number {i}." for i in range(40)}


@pytest.fixture
def counted(monkeypatch):
    """How many texts the build tokenizes itself."""
    calls = []
    real = lexical_tokens.tokenize

    def tokenize(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(lexical_tokens, "tokenize", tokenize)
    return calls


def _build(items: pl.DataFrame, root, cache=None) -> None:
    """The lexical index of ``items`` where a version folder ``root`` keeps it."""
    build_lexical(items, root / LEXICAL_DIR, cache)


def test_an_edit_tokenizes_only_what_changed_and_gives_a_fresh_builds_index(tmp_path, counted):
    cache = tmp_path / "cache"
    _build(_items(TEXTS), tmp_path / "kept", cache)
    assert len(counted) == len(TEXTS) + 2  # the first build tokenizes everything
    edited = dict(TEXTS)
    edited["chunk-007"] += " One more sentence about gzip."
    del edited["chunk-020"]
    edited["chunk-100"] = "A new paragraph on trailers."
    counted.clear()
    _build(_items(edited), tmp_path / "kept", cache)
    assert len(counted) == 2 and all("gzip" in t or "trailers" in t for t in counted)
    _build(_items(edited), tmp_path / "fresh")  # no cache at all
    assert lexical_differences(tmp_path / "kept", tmp_path / "fresh") == []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "another tokenizer", "another key"])
def test_a_cache_that_cannot_be_trusted_is_not_used(tmp_path, counted, damage):
    cache = tmp_path / "cache"
    _build(_items(TEXTS), tmp_path / "first", cache)
    units = cache / f"{LEXICAL_UNITS}.parquet"
    if damage == "garbage":
        units.write_bytes(b"not parquet at all")
    elif damage == "truncated":
        units.write_bytes(units.read_bytes()[:200])
    else:  # the same rows, written by a tokenizer of another format
        table = pq.read_table(units)
        meta = {**table.schema.metadata, b"format": b"strata-lexical/0"}
        pq.write_table(table.replace_schema_metadata(meta), units)
    if damage == "another key":  # digests made from other fields, or texts made another way
        table = pq.read_table(units)
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata,
                                                      b"key": b"fields/0"}), units)
    edited = {**TEXTS, "chunk-001": "Changed so that the index is built again."}
    counted.clear()
    _build(_items(edited), tmp_path / "kept", cache)
    assert len(counted) == len(TEXTS)  # every unit tokenized again, the graph's reused
    _build(_items(edited), tmp_path / "fresh")
    assert lexical_differences(tmp_path / "kept", tmp_path / "fresh") == []
    assert pq.read_metadata(units).num_rows == len(TEXTS)  # whole again for the next build


def test_a_cache_that_cannot_be_written_only_costs_the_tokenizing(tmp_path, caplog):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    _build(_items(TEXTS), tmp_path / "kept", blocked)
    _build(_items(TEXTS), tmp_path / "fresh")
    assert lexical_differences(tmp_path / "kept", tmp_path / "fresh") == []
    assert "lexical tokens are not kept" in caplog.text


def _docs(texts: dict[str, str]):
    """(node id, digest, source) in id order, a text standing for its own source."""
    return [(i, lexical_tokens.source_digest([texts[i]]), texts[i]) for i in sorted(texts)]


def test_only_a_changed_source_has_its_text_made(tmp_path):
    path = tmp_path / "units.parquet"
    made = []

    def text(source: str) -> str:
        made.append(source)
        return source

    first = list(lexical_tokens.cached_tokens(path, _docs(TEXTS), text, "k"))
    assert len(made) == len(TEXTS)
    made.clear()
    edited = {**TEXTS, "chunk-003": "Changed: trailers and gzip."}
    again = list(lexical_tokens.cached_tokens(path, _docs(edited), text, "k"))
    assert made == ["Changed: trailers and gzip."]
    assert again[3] != first[3] and again[:3] == first[:3] and again[4:] == first[4:]
    made.clear()
    list(lexical_tokens.cached_tokens(path, _docs(edited), text, "another key"))
    assert len(made) == len(TEXTS)  # tokens kept under another key are never taken


def test_a_tokenizing_that_stops_early_leaves_the_old_cache(tmp_path):
    path = tmp_path / "units.parquet"
    list(lexical_tokens.cached_tokens(path, _docs(TEXTS), str, "k"))
    before = path.read_bytes()
    tokens = lexical_tokens.cached_tokens(path, _docs(dict.fromkeys(TEXTS, "changed")), str, "k")
    next(tokens)
    tokens.close()  # the consumer stopped (a failed build)
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))


def test_no_token_holds_whitespace_so_joining_by_spaces_is_lossless():
    from strata.core.lexical.bm25 import tokenize

    text = ("@State and read_chunked !! utf8 V2 no\u00a0break thin\u2009space tab\tbed "
            "line\u2028sep ideographic\u3000space json.decoder.scan => $$x")
    tokens = tokenize(text)
    assert tokens and not any(c.isspace() for t in tokens for c in t)
    joined = " ".join(tokens)
    assert joined.split(" ") == tokens
