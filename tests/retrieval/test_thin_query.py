"""The query side is a thin module: a querying process imports no torch,
transformers, sentence-transformers, lancedb or dagster, reads the arrays a
publish wrote instead of loading tables, measures a runtime's agreement once,
and still answers from an index published before those arrays existed."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import numpy as np
import pytest

from strata.core.encoders import query_runtime
from strata.core.encoders.embedding import EncoderSpec
from strata.core.storage.layout import IndexLayout
from strata.pipelines.cli import main
from strata.core.query_arrays import Graph, compute, open_arrays, present, save, write
from strata.retrieval import Index
from tests.conftest import REPO, SAMPLE, Builder, write_corpora

HEAVY = ("torch", "transformers", "sentence_transformers", "lancedb", "dagster")
QUESTIONS = ("how do I correct pressure readings for barometric drift?", "spike filter window",
             "read_csv", "which sensors are supported")


def _modules_after(code: str, watched: tuple[str, ...] = HEAVY) -> dict:
    """Run ``code`` in a fresh interpreter, then report which ``watched`` modules it loaded."""
    probe = code + (f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {watched!r} "
                    "if m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_query_module_loads_nothing_heavy():
    assert _modules_after("import strata.retrieval") == []


@pytest.mark.parametrize("mode", ["auto", "flat", "hybrid", "hierarchical", "keyword"])
def test_a_first_query_imports_no_torch_lancedb_or_dagster(sample_index, mode):
    code = (f"from strata.retrieval import Index\nidx = Index.open({str(sample_index)!r})\n"
            f"hits = idx.search({QUESTIONS[0]!r}, mode={mode!r}, k=5)\n"
            "assert len(hits) == 5, hits\n")
    # nor bm25s and scipy: the BM25 scores are read from the saved matrix with numpy
    assert _modules_after(code, HEAVY + ("bm25s", "scipy")) == []


def test_the_cli_search_imports_no_torch_lancedb_or_dagster(sample_index):
    code = ("import contextlib, io\nfrom strata.pipelines.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    rc = main(['search', '--index', {str(sample_index)!r}, '-k', '3', 'tide'])\n"
            "assert rc == 0 and '1. [' in out.getvalue(), out.getvalue()\n")
    assert _modules_after(code) == []
    # nor the MCP server's tools and their pydantic models (the parser only needs mcp's arguments)
    assert _modules_after(code, ("strata.service.mcp_tools", "strata.service.models")) == []


def test_the_published_arrays_are_what_the_tables_give(sample_index):
    """The memory-mapped arrays equal the arrays computed from the Parquet and
    Lance files (the path an index published before them takes)."""
    vdir = IndexLayout(sample_index).resolve()
    mapped = open_arrays(vdir)
    assert mapped is not None and mapped.mapped
    fresh = compute(vdir, mapped.vectors.shape[1])
    assert mapped.graph.ids == fresh.graph.ids
    for name in ("kind", "parent", "child_ptr", "child_idx", "indptr", "indices", "etype",
                 "weight"):
        assert np.array_equal(getattr(mapped.graph, name), getattr(fresh.graph, name)), name
    assert mapped.graph.relation == fresh.graph.relation
    assert np.array_equal(mapped.has_vector, fresh.has_vector)
    # the publish writes the vectors straight into the file, a run of rows at a time
    assert np.array_equal(mapped.vectors, fresh.vectors)
    assert np.abs(np.linalg.norm(mapped.vectors[mapped.has_vector], axis=1) - 1).max() < 1e-5
    assert mapped.nodes.column("text").to_pylist() == fresh.nodes.column("text").to_pylist()
    assert mapped.probe_texts == fresh.probe_texts
    assert len(mapped.probe_texts) > 0


def test_array_files_open_without_parsing_python(sample_index, tmp_path, monkeypatch):
    """np.load parses each header with ast, whose state CPython 3.11 shares between
    threads: a request thread opening a version while a build in the same process
    parses Python failed. The headers np.save writes are read without ast, to the
    same arrays; a truncated file is still named as damaged."""
    import ast

    from strata.core import query_arrays

    vdir = IndexLayout(sample_index).resolve()
    expected = {p.name: np.load(p) for p in (vdir / "query").rglob("*.npy")}

    def no_ast(*_a, **_k):
        raise AssertionError("a header was parsed with ast")

    monkeypatch.setattr(ast, "literal_eval", no_ast)
    assert open_arrays(vdir) is not None
    for path in (vdir / "query").rglob("*.npy"):
        for mmap in (True, False):
            got = query_arrays._npy(path, mmap=mmap)
            assert got.dtype == expected[path.name].dtype and np.array_equal(got, expected[path.name])
    odd = tmp_path / "odd.npy"
    np.save(odd, np.zeros((2, 0, 3), dtype=">i8"))
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    assert query_arrays._npy(odd).shape == (2, 0, 3)
    assert np.array_equal(query_arrays._npy(tmp_path / "fortran.npy"), np.arange(6.0).reshape(2, 3))
    cut = tmp_path / "cut.npy"
    cut.write_bytes((vdir / "query" / "vectors.npy").read_bytes()[:-7])
    for mmap in (True, False):
        with pytest.raises(query_arrays.DamagedArrays, match="cut.npy"):
            query_arrays._npy(cut, mmap=mmap)


def _results(index_dir, mode: str) -> list[list[tuple[str, float]]]:
    idx = Index.open(index_dir)
    return [[(r.node_id, round(r.score, 5)) for r in idx.search(q, mode=mode, k=5)]
            for q in QUESTIONS]


def test_an_index_from_before_the_arrays_answers_the_same_and_upgrades_in_place(
        sample_index, tmp_path, caplog, capsys):
    old = tmp_path / "old"
    shutil.copytree(sample_index, old)
    for q in old.glob("versions/*/query"):
        shutil.rmtree(q)
    vdir = IndexLayout(old).resolve()
    with caplog.at_level(logging.WARNING):
        before = {m: _results(old, m) for m in ("flat", "auto")}
    warning = [r.getMessage() for r in caplog.records if "no query arrays" in r.getMessage()]
    assert warning
    assert f"strata upgrade --index {old}" in warning[0]
    assert "\n" not in warning[0]
    assert not present(vdir)  # reading never writes into a published version

    assert main(["upgrade", "--index", str(old), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["arrays"] for r in rows] == ["written"]
    assert present(vdir)
    assert {m: _results(old, m) for m in ("flat", "auto")} == before
    assert before == {m: _results(sample_index, m) for m in ("flat", "auto")}
    assert main(["upgrade", "--index", str(old), "--json"]) == 0  # again: nothing to do
    assert [r["arrays"] for r in json.loads(capsys.readouterr().out)] == ["already there"]


class _Counting:
    """An encoder that counts what it is asked to encode."""

    def __init__(self, inner):
        self.inner, self.spec, self.dim, self.texts = inner, inner.spec, inner.dim, 0
        self.identity = inner.identity

    def encode(self, texts):
        self.texts += len(texts)
        return self.inner.encode(texts)


@pytest.fixture(scope="module")
def torch_index(tmp_path_factory):
    """The sample built with the torch runtime, whatever this CPU's default (``auto``
    builds with ONNX where there is no native bfloat16): its queries then run on
    another runtime than the build's, whose agreement must be measured."""
    import dagster as dg

    base = tmp_path_factory.mktemp("torch_sample")
    cfg = write_corpora(base / "corpora.yaml", {"sample": {
        "root": str(SAMPLE), "out": str(base / "index"), "embedding": {"runtime": "torch"}}})
    with dg.instance_for_test() as instance:
        Builder(instance, cfg).build("sample")
    return base / "index"


def test_a_runtime_agreement_is_measured_once_and_then_read(torch_index, tmp_path, monkeypatch):
    from strata.core.encoders.embedding import load_encoder

    monkeypatch.setattr(query_runtime, "_agreements_dir", lambda: tmp_path / "agreements")
    manifest = json.loads((IndexLayout(torch_index).resolve() / "manifest.json").read_text())
    built = EncoderSpec.from_manifest(manifest["embedding"])
    spec = query_runtime.query_spec(built)
    assert spec.runtime == "onnx"
    encoder = _Counting(load_encoder(spec))
    texts, stored = Index.open(torch_index)._probe()
    first = query_runtime.agreement(built, encoder, texts, stored)
    assert encoder.texts == len(texts) > 0
    assert first[0] is not None and first[0] >= 0.999 and first[1] is None
    second = query_runtime.agreement(built, encoder, texts, stored)
    assert second == first
    assert encoder.texts == len(texts)  # read back, not measured again
    assert len(list((tmp_path / "agreements").glob("*.json"))) == 1
    # another probe (another version's content) is another decision, but a text measured
    # before against the same stored vector is not encoded again: only the new one is
    other = query_runtime.agreement(built, encoder, texts[:-1] + ["a text no probe had"],
                                    np.vstack([stored[:-1], stored[-1:]]))
    assert encoder.texts == len(texts) + 1
    assert len(list((tmp_path / "agreements").glob("*.json"))) == 2
    # the text's own cosine with a vector that is not its own disagrees, and decides
    assert other[0] is None and "lowest" in other[1]
    # measured whole, the same probe gives the same decision
    (tmp_path / "agreements" / "texts").rename(tmp_path / "forgotten")
    for f in (tmp_path / "agreements").glob("*.json"):
        f.unlink()
    assert query_runtime.agreement(built, encoder, texts, stored) == first
    assert encoder.texts == 2 * len(texts) + 1


def test_a_publish_reads_a_recorded_agreement_without_loading_the_query_encoder(
        torch_index, tmp_path, monkeypatch):
    """A publish names the query encoder without loading it: when the probe's
    agreement is recorded (a rebuild that left the probe as it was) it loads no
    second runtime. The name it uses is the loaded encoder's own, for every runtime."""
    from dataclasses import replace

    monkeypatch.setattr(query_runtime, "_agreements_dir", lambda: tmp_path / "agreements")
    version = IndexLayout(torch_index).resolve()
    built = EncoderSpec.from_manifest(json.loads((version / "manifest.json").read_text())
                                      ["embedding"])
    real = query_runtime.load_encoder
    loads = []
    monkeypatch.setattr(query_runtime, "load_encoder",
                        lambda spec, *a: loads.append(spec) or real(spec, *a))
    first = query_runtime.prepare(version, built)
    assert first["query_runtime"] == "onnx" and first["query_runtime_agreement"] >= 0.999
    assert len(loads) == 1  # measured: the probe was never checked against this encoder
    second = query_runtime.prepare(version, built)
    assert second == first and len(loads) == 1  # read back: nothing loaded
    for runtime in ("onnx", "torch"):
        spec = replace(built, runtime=runtime)
        assert query_runtime._Deferred(spec).identity == real(spec).identity


def test_a_recorded_disagreement_sends_queries_to_the_built_runtime(torch_index, tmp_path,
                                                                     monkeypatch):
    """The record is what decides: one saying the ONNX graph disagrees makes the
    index query with the runtime that built it (and say so), never with
    vectors that do not match."""
    monkeypatch.setattr(query_runtime, "_agreements_dir", lambda: tmp_path / "agreements")
    idx = Index.open(torch_index)
    assert idx.encoder.spec.runtime == "onnx"
    (record,) = (tmp_path / "agreements").glob("*.json")
    rec = json.loads(record.read_text())
    rec.update(mean=None, why="its vectors agree to a mean cosine of 0.5")
    record.write_text(json.dumps(rec))
    again = Index.open(torch_index)
    built = again.manifest["embedding"]["runtime"]
    assert again.encoder.spec.runtime == built
    assert again.search("barometric drift", mode="flat", k=3)


def test_a_large_index_searches_an_approximate_index_and_scores_exactly(sample_index, tmp_path):
    copy = tmp_path / "ann"
    shutil.copytree(sample_index, copy)
    vdir = IndexLayout(copy).resolve()
    save(compute(vdir, 384), vdir, ann_min_vectors=1)  # every index counts as large
    assert (vdir / "query" / "ann.faiss").exists()
    approx, exact = Index.open(copy), Index.open(sample_index)
    assert approx._ann is not None
    assert exact._ann is None
    for q in QUESTIONS:
        a = approx.search(q, mode="flat", k=5)
        e = exact.search(q, mode="flat", k=5)
        assert [r.node_id for r in a] == [r.node_id for r in e]  # a small index: all probed
        assert [round(r.score, 5) for r in a] == [round(r.score, 5) for r in e]
    code_only = approx.search("read_csv", mode="flat", k=3, kinds=["code"])
    assert [r.kind for r in code_only] == ["code"] * 3


def test_the_ann_index_of_the_streamed_vectors_is_the_in_memory_one(sample_index, tmp_path,
                                                                    monkeypatch):
    """A publish writes the vectors into the file first and builds the approximate
    index from that file (positioned reads, none of it resident): the index is the
    one built from the same vectors held in memory, byte for byte."""
    copies = []
    for name in ("streamed", "in_memory"):
        shutil.copytree(sample_index, tmp_path / name)
        copies.append(IndexLayout(tmp_path / name).resolve())
    monkeypatch.setenv("STRATA_ANN_MIN_VECTORS", "1")
    write(copies[0], 384)
    save(compute(copies[1], 384), copies[1])
    files = sorted(p.relative_to(copies[0] / "query") for p in (copies[0] / "query").rglob("*")
                   if p.is_file())
    assert "ann.faiss" in {f.name for f in files}
    for f in files:
        assert (copies[0] / "query" / f).read_bytes() == (copies[1] / "query" / f).read_bytes(), f


def test_the_graph_keeps_what_a_dict_of_ids_would():
    """Dense rows come from joins, with what a dict built in order gives: an id
    given twice maps to its last row, a parent or edge end that is not a node
    (or null) is no parent and no edge, an unknown edge type gets the spare code."""
    import polars as pl

    from strata.core.query_arrays import EDGE_CODE, KIND_CODE

    nodes = pl.DataFrame({"node_id": ["f", "s1", "s2", "s1", "x"],
                          "kind": ["file", "section", "section", "chunk", "no-such-kind"],
                          "parent_id": [None, "f", "f", "s2", "gone"],
                          "ordinal": [0, 2, 1, 0, None]})
    edges = pl.DataFrame({"src": ["f", "s1", "s2", "nowhere", "x"],
                          "dst": ["s2", "f", "s1", "f", None],
                          "type": ["structural", "structural", "made-up", "jump", "jump"],
                          "weight": [1.0, 0.5, 2.0, 1.0, 1.0],
                          "relation": ["contains", "part_of", "r", "j", "k"]})
    g = Graph.build(nodes, edges)
    assert g.ids == ["f", "s1", "s2", "s1", "x"]
    assert g.kind.tolist() == [KIND_CODE["file"], KIND_CODE["section"], KIND_CODE["section"],
                               KIND_CODE["chunk"], -1]
    assert g.parent.tolist() == [-1, 0, 0, 2, -1]
    assert g.children(0).tolist() == [2, 1]  # by ordinal
    # "s1" is row 3 (its last row): the edge from s1 leaves row 3 and the edge to s1 ends there
    assert [(i, g.indices[g.indptr[i]:g.indptr[i + 1]].tolist()) for i in range(len(g))] == \
        [(0, [2]), (1, []), (2, [3]), (3, [0]), (4, [])]
    assert g.etype.tolist() == [EDGE_CODE["structural"], len(EDGE_CODE), EDGE_CODE["structural"]]
    assert g.weight.tolist() == [1.0, 2.0, 0.5]
    assert g.relation == ["contains", "r", "part_of"]


def test_vectors_written_a_run_at_a_time_equal_the_matrix_in_memory(tmp_path):
    """Batches in any row order, a row given twice (the later wins), an empty batch
    and rows never given (zeros): the file equals the matrix filled in memory, and
    reads back as np.load reads it."""
    from strata.core.query_arrays import _VectorRows

    batches = [(np.array([], np.int64), np.zeros((0, 3), np.float32)),
               (np.array([4, 1, 2, 4]), np.arange(12, dtype=np.float32).reshape(4, 3)),
               (np.array([0]), np.ones((1, 3), np.float32))]
    streamed, held = _VectorRows(6, 3, tmp_path / "v.npy"), _VectorRows(6, 3, None)
    for rows, vecs in batches:
        streamed.put(rows, vecs)
        held.put(rows, vecs)
    mapped, matrix = streamed.close(), held.close()
    assert np.array_equal(mapped, matrix) and np.array_equal(np.load(tmp_path / "v.npy"), matrix)
    assert matrix[4].tolist() == [9.0, 10.0, 11.0] and not matrix[[3, 5]].any()


def _linked_copy(src, dst) -> None:
    from strata.core.storage.layout import link_or_copy

    shutil.copytree(src, dst, copy_function=link_or_copy)


def _same_arrays(a, b) -> None:
    assert a.graph.ids == b.graph.ids
    assert np.array_equal(a.has_vector, b.has_vector)
    assert np.array_equal(np.asarray(a.vectors), np.asarray(b.vectors))
    assert a.fact_ids.to_pylist() == b.fact_ids.to_pylist()
    assert np.array_equal(np.asarray(a.fact_vectors), np.asarray(b.fact_vectors))
    assert a.probe_texts == b.probe_texts


def test_a_publish_copies_the_vectors_of_the_tables_a_build_kept_from_the_last_version(
        sample_index, tmp_path, monkeypatch):
    """A vector table the build kept as it was (hard links of the published
    version's files) is not read again: its unit vectors come from the last
    version's arrays, by node id, so they land on the right rows even when the
    nodes moved. A table with other files is read. Either way the arrays are
    those computed from the tables alone."""
    import polars as pl

    from strata.core.config.schema import LANCE_DIR, TABLE_FILES

    version = IndexLayout(sample_index).resolve()
    dim = open_arrays(version).vectors.shape[1]
    previous, build = tmp_path / "previous", tmp_path / "build"
    _linked_copy(version, previous)
    _linked_copy(version, build)
    # the nodes in another order: every graph row moves
    nodes_file = build / TABLE_FILES["nodes"]
    nodes = pl.read_parquet(nodes_file)
    nodes_file.unlink()
    nodes.reverse().write_parquet(nodes_file)
    tables = sorted(p.name.removesuffix(".lance") for p in (build / LANCE_DIR).iterdir())
    assert len(tables) >= 2
    rewritten = tables[0]  # same bytes, new files: not the version's table any more
    shutil.rmtree(build / LANCE_DIR / f"{rewritten}.lance")
    shutil.copytree(version / LANCE_DIR / f"{rewritten}.lance",
                    build / LANCE_DIR / f"{rewritten}.lance")
    scanned: list[str] = []
    import strata.core.storage.lance_scan as lance_scan

    real_scan = lance_scan.scan

    def recording(table, columns, *a, **k):
        scanned.append(table.name)
        return real_scan(table, columns, *a, **k)

    monkeypatch.setattr(lance_scan, "scan", recording)
    reused = compute(build, dim, previous=previous)
    assert scanned == [rewritten]
    scanned.clear()
    from_tables = compute(build, dim)
    assert sorted(scanned) == tables
    _same_arrays(reused, from_tables)
    assert reused.graph.ids != open_arrays(version).graph.ids  # the rows did move
    # no arrays where the last version should be: every table is read
    scanned.clear()
    _same_arrays(compute(build, dim, previous=tmp_path / "nowhere"), from_tables)
    assert sorted(scanned) == tables
