"""The relevance background is written at publish as its own small array
(``query/background.npy``) and read from there, not sampled from rows spread
over the whole vector file; a version whose arrays predate it (format 1)
samples the same rows from its vectors and answers the same."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from strata.core import query_arrays
from strata.core.config.schema import EMBEDDED_KINDS
from strata.core.storage.layout import IndexLayout
from strata.pipelines.cli import main
from strata.retrieval import Index
from strata.retrieval.relevance import Background

QUESTION = "how do I correct pressure readings for barometric drift?"


def _expected(vectors, has_vector, kind, limit: int) -> np.ndarray:
    """The even sample relevance measures against, computed here on its own terms."""
    codes = [query_arrays.KIND_CODE[k] for k in EMBEDDED_KINDS]
    rows = np.nonzero(np.asarray(has_vector) & np.isin(kind, codes))[0]
    if len(rows) > limit:
        rows = rows[np.linspace(0, len(rows) - 1, limit).astype(np.int64)]
    return np.asarray(vectors[rows], np.float32)


class _Unread:
    """Vectors that must not be read."""

    shape = (0, 0)

    def __getitem__(self, _):
        raise AssertionError("the background was sampled from the vector file")


def _as_format_1(folder) -> None:
    """``folder``'s arrays as a Strata before the background file wrote them."""
    q = IndexLayout(folder).resolve() / "query"
    (q / query_arrays.BACKGROUND_FILE).unlink()
    meta = json.loads((q / "arrays.json").read_text())
    (q / "arrays.json").write_text(json.dumps({**meta, "format": 1}))


def test_the_publish_writes_the_background_and_relevance_reads_it(sample_index):
    vdir = IndexLayout(sample_index).resolve()
    assert json.loads((vdir / "query" / "arrays.json").read_text())["format"] == 2
    arrays = query_arrays.open_arrays(vdir)
    stored = np.load(vdir / "query" / query_arrays.BACKGROUND_FILE)
    expected = _expected(arrays.vectors, arrays.has_vector, arrays.graph.kind,
                         query_arrays.BACKGROUND_ROWS)
    assert len(expected) and np.array_equal(stored, expected)

    idx = Index.open(sample_index)
    _, own, kind = idx._unit_vectors
    idx.__dict__["_unit_vectors"] = (_Unread(), own, kind)
    sample = Background(idx).sample
    assert np.array_equal(sample, expected)
    assert isinstance(sample, np.memmap) and sample.filename.endswith(query_arrays.BACKGROUND_FILE)


def test_the_sample_is_even_over_the_embedded_units_with_a_vector(monkeypatch):
    rng = np.random.default_rng(0)
    n, dim = 1000, 8
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    has = rng.random(n) < 0.8
    kind = rng.integers(0, len(query_arrays.KIND_CODE), n).astype(np.int8)
    monkeypatch.setattr(query_arrays, "BACKGROUND_ROWS", 50)
    got = query_arrays.background_sample(vectors, has, kind)
    assert got.shape == (50, dim) and got.dtype == np.float32
    assert np.array_equal(got, _expected(vectors, has, kind, 50))
    none = query_arrays.background_sample(vectors, np.zeros(n, bool), kind)
    assert none.shape == (0, dim)


def test_arrays_without_the_background_still_answer_the_same_and_upgrade(sample_index, tmp_path,
                                                                         capsys):
    old = tmp_path / "old"
    shutil.copytree(sample_index, old)
    _as_format_1(old)
    vdir = IndexLayout(old).resolve()
    assert query_arrays.present(vdir)  # read as they are, not recomputed from the tables
    a, b = Index.open(old), Index.open(sample_index)
    assert a._arrays.mapped and a._arrays.background is None
    assert np.array_equal(Background(a).sample, Background(b).sample)
    for mode in ("flat", "auto"):
        got = [(r.node_id, r.relevance) for r in a.search(QUESTION, mode=mode, k=5)]
        assert got == [(r.node_id, r.relevance) for r in b.search(QUESTION, mode=mode, k=5)]
        assert got

    assert main(["upgrade", "--index", str(old), "--json"]) == 0
    assert [r["arrays"] for r in json.loads(capsys.readouterr().out)] == ["written"]
    assert (vdir / "query" / query_arrays.BACKGROUND_FILE).exists()
    assert query_arrays.arrays_format(vdir) == query_arrays.ARRAYS_FORMAT


def test_a_background_of_another_dimension_is_named_as_damage(sample_index, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(sample_index, copy)
    q = IndexLayout(copy).resolve() / "query"
    np.save(q / query_arrays.BACKGROUND_FILE, np.zeros((3, 5), np.float32))
    with pytest.raises(query_arrays.DamagedArrays, match="background.npy"):
        query_arrays.open_arrays(q.parent, 384)


def test_bm25_scores_are_bm25s_own_without_importing_it(sample_index):
    """The saved score matrix read with numpy gives bm25s's scores, bit for bit."""
    import bm25s

    from strata.core.lexical.bm25 import LexicalIndex

    folder = IndexLayout(sample_index).resolve() / "lexical" / "units"
    ours, theirs = LexicalIndex.load(folder), bm25s.BM25.load(str(folder), mmap=True)
    for q in ("barometric drift", "read_csv", "tide gauge spike filter", "zzqx"):
        toks = ours.query_tokens(q)
        want = theirs.get_scores(toks) if toks else np.zeros(len(ours), np.float32)
        got = ours.scores(q)
        assert got.dtype == np.float32 and np.array_equal(got, want), q
    term = ours.query_tokens("barometric")[0]
    assert np.array_equal(ours.term_documents(term), theirs.get_scores([term]) > 0)
