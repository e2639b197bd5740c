"""The ONNX Runtime runtimes of the packaged model: exported here from
the packaged weights, their vectors against torch's, the manifest naming the
runtime that built an index, and another runtime allowed to query it only when
its vectors agree with the index's own."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from strata.retrieval import EmbeddingModelMismatch, Index
from strata.core.encoders import embedding
from strata.core.encoders.embedding import (EncoderSpec, SentenceTransformerEncoder,
                              disagreement, load_encoder, packaged_model_path)
from strata.core.storage.layout import IndexLayout
from tests.conftest import REPO, SAMPLE

TEXTS = ["How do I correct pressure readings for barometric drift?",
         "The harbour gauge reads the tide every minute.",
         "Calibration", "sensor offset table, hourly, against the reference station " * 6]


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STRATA_MODEL_CACHE", str(folder))
        # encoders loaded earlier in this process read their graphs from another cache
        mp.setattr(embedding, "_CACHE", {})
        yield folder


def test_the_onnx_graphs_are_exported_locally_and_agree_with_torch(model_cache):
    torch_vectors = load_encoder(EncoderSpec()).encode(TEXTS)
    for runtime, floor in (("onnx", 0.9999), ("onnx-int8", 0.97)):
        enc = load_encoder(EncoderSpec(runtime=runtime))
        assert enc.spec.runtime == runtime and enc.dim == 384
        got = enc.encode(TEXTS)
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
        cos = (got * torch_vectors).sum(1)
        assert cos.min() >= floor, (runtime, cos)
    graphs = sorted(p.name for p in model_cache.rglob("*.onnx"))
    assert graphs == ["model.onnx", "model_int8.onnx"]  # exported once, into the cache


def _export_in_a_process_of_its_own(cache, int8: bool) -> subprocess.CompletedProcess:
    """The packaged model's ONNX graph got (exported, quantized) by a fresh process
    with the model cache ``cache``, printing the graph's name: what its terminal
    shows is what a user's first build shows (pytest's capture would hide it here)."""
    import os

    code = ("from strata.core.encoders.embedding import packaged_model_path as p\n"
            "from strata.core.encoders.onnx_runtime import exported_graph as g\n"
            f"print(g(str(p()), {int8}).name)")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "STRATA_MODEL_CACHE": str(cache)}, timeout=600)


def test_quantizing_prints_nothing_on_the_terminal(model_cache):
    """onnxruntime's quantizer logs advice for the graph's author on the root
    logger; a user whose first build exports the int8 graph must not see it (a
    process of its own: pytest's log capture would hide what a terminal shows)."""

    from strata.core.encoders.onnx_runtime import exported_graph

    exported_graph(str(packaged_model_path()), False)  # the float32 graph it quantizes
    for old in model_cache.rglob("model_int8.onnx"):
        old.unlink()
    proc = _export_in_a_process_of_its_own(model_cache, int8=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "model_int8.onnx", proc.stderr
    assert proc.stderr == "", proc.stderr


def test_exporting_prints_no_tracer_warnings(tmp_path):
    """A first build exports the query side's ONNX graph; torch's tracer notes about
    transformers' Python branches read as errors on a terminal, so they are one
    log line, and nothing reaches stderr (a process of its own, as a terminal sees it)."""
    proc = _export_in_a_process_of_its_own(tmp_path, int8=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "model.onnx", proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr


def test_disagreement_names_the_figures():
    assert disagreement(np.array([0.999, 0.995])) is None
    why = disagreement(np.array([0.999, 0.90]))
    assert "lowest 0.9000" in why and "\n" not in why
    assert disagreement(np.array([0.98, 0.98])).startswith("its vectors agree")


@pytest.fixture(scope="module")
def int8_index(tmp_path_factory, model_cache):
    """The sample corpus built with the onnx-int8 runtime (`strata index
    --embed-runtime onnx-int8`, remembered for the corpus)."""
    import os

    base = tmp_path_factory.mktemp("int8")
    env = {**os.environ, "DAGSTER_HOME": str(base / "dh"),
           "STRATA_CORPORA": str(base / "corpora.yaml"), "STRATA_MODEL_CACHE": str(model_cache)}
    (base / "dh").mkdir()
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(SAMPLE),
                           "--corpus", "sample", "--out", str(base / "index"),
                           "--embed-runtime", "onnx-int8", "-q"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # remembered for the corpus: its sensor and scheduled runs build with it too
    remembered = yaml.safe_load((base / "corpora.local.yaml").read_text())
    assert remembered["corpora"]["sample"]["embedding"]["runtime"] == "onnx-int8"
    return base / "index"


def test_the_manifest_records_the_runtime_that_built_the_index(int8_index):
    manifest = json.loads((IndexLayout(int8_index).resolve() / "manifest.json").read_text())
    assert manifest["embedding"]["runtime"] == "onnx-int8"
    idx = Index.open(int8_index)
    assert idx.encoder.spec.runtime == "onnx-int8"  # the manifest's runtime embeds queries
    assert idx.search("barometric drift correction", mode="flat", k=3)


def test_another_runtime_queries_only_when_its_vectors_agree(int8_index, sample_index,
                                                             model_cache, tmp_path):
    # torch on an int8-built index: the vectors agree, so it may embed the queries
    idx = Index.open(int8_index, encoder=load_encoder(EncoderSpec()))
    assert idx.runtime_agreement is not None and idx.runtime_agreement >= 0.99
    assert idx.search("barometric drift correction", mode="hierarchical", k=3)

    # an int8 graph quantised per tensor (cosine ~0.96 to torch) does not agree
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from strata.core.encoders.onnx_runtime import OnnxSentenceModel, exported_graph

    coarse = tmp_path / "per_tensor.onnx"
    quantize_dynamic(str(exported_graph(str(packaged_model_path()), False)), str(coarse),
                     weight_type=QuantType.QInt8)
    enc = SentenceTransformerEncoder.__new__(SentenceTransformerEncoder)
    enc._model = OnnxSentenceModel(str(packaged_model_path()), coarse, 1)
    enc.dim, enc.runtime, enc.threads, enc.batch_size = 384, "onnx-int8", 1, 64
    enc.spec = EncoderSpec(dim=384, runtime="onnx-int8")
    with pytest.raises(EmbeddingModelMismatch, match="built with sentence-transformers") as e:
        Index.open(sample_index, encoder=enc)
    assert "\n" not in str(e.value) and "mean cosine" in str(e.value)


def test_strata_search_embeds_with_the_runtime_asked_for_when_it_agrees(sample_index, model_cache):
    """STRATA_EMBED_RUNTIME on the query side: onnx agrees with the torch-built
    sample to 1.0000 and answers."""
    import os

    env = {**os.environ, "STRATA_EMBED_RUNTIME": "onnx", "STRATA_MODEL_CACHE": str(model_cache)}
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "search", "--index",
                           str(sample_index), "-k", "2", "--json", "tide gauge"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)
