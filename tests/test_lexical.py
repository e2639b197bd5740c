"""The lexical (BM25) side: the code-aware tokenizer and the one index over all
kinds, built by the real pipeline."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from strata.retrieval import Index
from strata.core.lexical.bm25 import LexicalIndex, tokenize
from strata.core.config.schema import LEXICAL_DIR


@pytest.mark.parametrize("text, expected", [
    ("read_chunked", {"read_chunked", "read", "chunk"}),
    ("HTTPResponse", {"httpresponse", "http", "respons"}),
    ("readChunked", {"readchunked", "read", "chunk"}),
    ("json.decoder.py_scanstring", {"json.decoder.py_scanstring", "json", "decod",
                                    "py_scanstring", "py", "scanstr"}),
    ("@State decorator", {"@state", "state", "decor"}),
    ("What does !! do in Kotlin and $$ in ArkTS?", {"!!", "$$", "kotlin", "arkts"}),
    ("state management V2 and utf8", {"state", "manag", "v2", "utf8", "utf"}),
])
def test_identifiers_are_indexed_whole_and_split(text, expected):
    toks = set(tokenize(text))
    assert expected <= toks, toks - expected
    assert not {"the", "what", "does", "and", "in"} & toks, "stop words are dropped"
    assert "2" not in toks, "a digit split off a name matches everywhere"


def test_prose_and_code_meet_on_stems():
    assert set(tokenize("encoding the body")) & set(tokenize("def encode_body(self):"))
    assert tokenize("") == [] and tokenize(None) == []


def test_one_index_scores_all_kinds_on_one_scale(tmp_path):
    ids = ["s1", "c1", "t1", "s2"]
    kinds = ["section", "code", "table", "section"]
    texts = ["how to read a chunked body", "def _read_chunked(self): pass",
             "| chunked | yes |", "nothing relevant here"]
    LexicalIndex.build(ids, kinds, texts).save(tmp_path / "lex")
    lex = LexicalIndex.load(tmp_path / "lex")
    every = dict(lex.search("read_chunked", 10))
    assert set(every) == {"s1", "c1", "t1"} and every["c1"] == max(every.values())
    # a kind filter is a mask over the same scores, never a separate index
    assert dict(lex.search("read_chunked", 10, kinds=["code", "table"])) == \
        {k: v for k, v in every.items() if k in ("c1", "t1")}
    assert lex.search("zebra", 10) == []
    assert not np.any(lex.scores("the of and"))  # stop words only: no evidence at all


def test_the_build_writes_one_lexical_index_per_version(sample_index):
    idx = Index.open(sample_index)
    folder = idx._vdir / LEXICAL_DIR
    units = LexicalIndex.load(folder / "units")
    graph = LexicalIndex.load(folder / "graph")
    nodes = idx.nodes().filter(pl.col("embedded") & (pl.col("kind") != "entity"))
    assert set(units.node_ids) == set(nodes["node_id"].to_list())
    assert set(graph.kinds.tolist()) <= {"entity", "fact"} and len(graph)
    # keyword mode reads it: results of several kinds, ranked together
    res = idx.search("correct_barometric_drift density", mode="keyword", k=8)
    assert res[0].node_path == "tidewater.calibration.correct_barometric_drift"
    assert len({r.kind for r in res}) >= 2
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)


def test_a_collection_of_stop_words_only_builds_saves_and_answers_nothing(tmp_path):
    """A corpus whose every word is dropped (a document of `x … y`) has no
    vocabulary: the index is still written and read, and matches nothing."""
    lex = LexicalIndex.build(["a", "b"], ["chunk", "chunk"], ["x y", "the of and"])
    lex.save(tmp_path / "units")
    back = LexicalIndex.load(tmp_path / "units")
    assert back.node_ids == ["a", "b"]
    assert back.search("x", 5) == []
    assert not back.scores("the x").any()


def test_the_saved_index_is_the_same_bytes_whatever_the_string_hashing(tmp_path):
    """Two processes with different string hashing save byte-identical indexes (an
    incremental build and a fresh one of the same corpus write the same files),
    and score as an index over the same tokens numbered another way does."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    texts = ["Harbour gauges drift with the tide", "The tide table of the harbour",
             "Buoys report swell and wind", "def read_csv(path): return rows"]
    code = ("import sys; from strata.core.lexical.bm25 import LexicalIndex; "
            f"LexicalIndex.build(['a', 'b', 'c', 'd'], ['section'] * 4, {texts!r})"
            ".save(sys.argv[1])")
    for seed in ("1", "2"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / seed)], cwd=REPO, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
    files = sorted(p.relative_to(tmp_path / "1") for p in (tmp_path / "1").rglob("*")
                   if p.is_file())
    assert files
    for f in files:
        assert (tmp_path / "1" / f).read_bytes() == (tmp_path / "2" / f).read_bytes(), f
    import bm25s

    plain = bm25s.BM25()
    plain.index([tokenize(t) for t in texts], show_progress=False)
    ours = LexicalIndex.load(tmp_path / "1")
    for q in ("harbour tide", "swell", "read_csv rows"):
        toks = ours.query_tokens(q)
        assert np.allclose(ours.scores(q), plain.get_scores(toks))


def test_the_flat_build_is_the_matrix_bm25s_builds_itself(sample_index):
    """The lexical build hands bm25s every token as one array (memory and time that
    do not grow with a Python list per text); the matrix it saves must be, array for
    array and bit for bit, the one bm25s's own index makes of the same tokens. Real
    texts: the sample index's nodes, cut in pieces over several blocks of documents,
    with empty, stop-word-only and repeated-token documents among them. The
    tokens are numbered a batch of documents at a time (several batches here, the
    last one short, an empty document at a batch's start): the vocabulary must be
    the one a dict lookup per token, in corpus order, makes."""
    import bm25s

    from strata.core.lexical import bm25_matrix
    from strata.core.lexical import bm25 as lexical
    from strata.core.storage.layout import IndexLayout
    from strata.core.config.schema import TABLE_FILES

    nodes = pl.read_parquet(IndexLayout(sample_index).resolve() / TABLE_FILES["nodes"])
    texts = [t[i:i + 300] for t in nodes["text"].drop_nulls().to_list()
             for i in range(0, len(t), 300)]
    texts[5:5] = ["", "the of and", "tide " * 40 + "gauge"]
    tokens = [tokenize(t) for t in texts]
    assert len(tokens) > 2 * 16 and sum(map(len, tokens)) > 5000
    old_block, old_batch = bm25_matrix.BLOCK_DOCS, lexical.TOKEN_BATCH
    bm25_matrix.BLOCK_DOCS = 16  # several blocks, one of them short, over this small corpus
    lexical.TOKEN_BATCH = 5  # texts[5] is empty: the second batch starts with it
    assert len(tokens) % lexical.TOKEN_BATCH
    try:
        ours = LexicalIndex.from_tokens([str(i) for i in range(len(tokens))],
                                        ["chunk"] * len(tokens), iter(tokens))._bm25
    finally:
        bm25_matrix.BLOCK_DOCS, lexical.TOKEN_BATCH = old_block, old_batch
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokens]
    stock = bm25s.BM25()
    stock.index((ids, vocab), show_progress=False)
    for name in ("data", "indices", "indptr"):
        assert ours.scores[name].dtype == stock.scores[name].dtype, name
        assert np.array_equal(ours.scores[name], stock.scores[name]), name
    assert ours.scores["num_docs"] == stock.scores["num_docs"] == len(tokens)
    assert ours.vocab_dict == stock.vocab_dict


def test_a_lexical_build_leaves_no_memo_of_the_corpus_vocabulary(sample_index, tmp_path):
    """The tokenizer's memos fill with the corpus's words while a build tokenizes; the
    steps after it in the same process never look them up, so the build empties them."""
    from strata.assets.shard_cache import load_embedding_items
    from strata.core.storage.layout import IndexLayout
    from strata.core.lexical.bm25 import _identifier, _word
    from strata.stages.lexical import build_lexical

    items = load_embedding_items(IndexLayout(sample_index))
    tokenize("warm_memo WarmMemo warming")
    assert _word.cache_info().currsize and _identifier.cache_info().currsize
    result = build_lexical(items, tmp_path / "lexical")
    assert result.docs == items.filter(pl.col("embedded")).height and not result.unchanged
    assert _word.cache_info().currsize == _identifier.cache_info().currsize == 0
    # the index was written whole, and the tokenizer fills its memos again as it goes
    assert len(LexicalIndex.load(tmp_path / "lexical" / "units"))
    assert tokenize("read_chunked") == ["read_chunked", "read", "chunk"]
    assert _identifier.cache_info().currsize


@pytest.mark.parametrize("damage", ["truncated scores", "broken vocabulary", "docs lost"])
def test_an_unchanged_lexical_index_is_kept_only_while_it_would_load(sample_index, tmp_path,
                                                                      damage):
    """A rebuild with nothing to re-index keeps the lexical index after a check that
    reads its files as data (no bm25s); a damaged file makes it index again, and
    what it writes loads."""
    from strata.assets.shard_cache import load_embedding_items
    from strata.core.storage.layout import IndexLayout
    from strata.stages.lexical import build_lexical

    items = load_embedding_items(IndexLayout(sample_index))
    folder = tmp_path / "lexical"
    assert not build_lexical(items, folder).unchanged
    assert build_lexical(items, folder).unchanged
    units = folder / "units"
    if damage == "truncated scores":
        f = units / "data.csc.index.npy"
        f.write_bytes(f.read_bytes()[:-8])
    elif damage == "broken vocabulary":
        (units / "vocab.index.json").write_text('{"tide": 0, "gau')
    else:
        (units / "docs.parquet").unlink()
    with pytest.raises((ValueError, OSError)):
        LexicalIndex.check(units)
    assert not build_lexical(items, folder).unchanged
    LexicalIndex.check(units)
    assert len(LexicalIndex.load(units)) > 0


def _units_and_facts(edit: str | None = None) -> pl.DataFrame:
    """Embedding items of both collections: sections, entities and facts; ``edit``
    replaces the first section's text."""
    words = "harbour tide gauge survey buoy swell datum station anemometer drift".split()
    kinds = ["section", "entity", "fact"] * 10
    texts = [" ".join(words[(i + j) % len(words)] for j in range(2 + i % 5))
             for i in range(len(kinds))]
    if edit is not None:
        texts[0] = edit
    n = len(kinds)
    return pl.DataFrame({"node_id": [f"n{i:03d}" for i in range(n)], "kind": kinds,
                         "title": [""] * n, "breadcrumb": ["a"] * n, "text": texts,
                         "attrs": ["{}"] * n, "summary": [None] * n, "embedded": [True] * n},
                        schema_overrides={"summary": pl.Utf8})


def _files(folder) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("graph_damaged", [False, True])
def test_an_edit_of_the_text_units_keeps_the_graph_collection_as_it_was(tmp_path, graph_damaged):
    """Each collection is indexed from its own documents: an edit of a section
    indexes the units again and links the entities' and facts' collection into
    the new folder as it was (the same files), unless that collection would not
    load, which is indexed again. Either way the folder is what a fresh build of
    the edited rows writes, file for file, and the edit is found."""
    from strata.stages.lexical import build_lexical

    folder, tokens = tmp_path / "lexical", tmp_path / "tokens"
    assert not build_lexical(_units_and_facts(), folder, tokens).unchanged
    graph, units = _files(folder / "graph"), _files(folder / "units")
    if graph_damaged:
        (folder / "graph" / "docs.parquet").write_bytes(b"not parquet")
    edited = _units_and_facts(edit="anemometer calibration drift")
    assert not build_lexical(edited, folder, tokens).unchanged
    now = _files(folder / "graph")
    if graph_damaged:
        assert all(now[name][0] != graph[name][0] for name in now)  # written again
    else:
        assert now == graph  # the same inodes: linked, not written
    assert all(_files(folder / "units")[name][0] != units[name][0] for name in units)
    build_lexical(edited, tmp_path / "fresh")
    for name in ("units", "graph"):
        assert {k: v[1] for k, v in _files(folder / name).items()} == \
            {k: v[1] for k, v in _files(tmp_path / "fresh" / name).items()}
    assert LexicalIndex.load(folder / "units").search("calibration", 1)[0][0] == "n000"
    assert build_lexical(edited, folder, tokens).unchanged
