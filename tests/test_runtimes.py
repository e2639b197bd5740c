"""The runtimes of the packaged model: torch-bf16 (bfloat16 weights and
matmuls, ~1.8x float32's speed on a CPU with AVX512-BF16 or AMX) is what ``auto``
(the default) takes on such a CPU, ONNX Runtime in float32 elsewhere (torch's
vectors without torch's import), torch where the model does not export; a rebuild
keeps the runtime an index was built with; a corpus that declares a runtime keeps
it; a bf16-built index is queried in float32 on a CPU without native bfloat16; and
on every runtime a text's vector depends on the text alone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from strata.core import embedding, query_runtime
from strata.core.embedding import AUTO, EncoderSpec, load_encoder, resolve_runtime
from strata.core.layout import IndexLayout
from strata.resources.embedder import EmbedderResource
from strata.retrieval import Index

TEXTS = ["How do I correct pressure readings for barometric drift?",
         "The harbour gauge reads the tide every minute.",
         "Calibration", "sensor offset table, hourly, against the reference station " * 6]


def test_bf16_vectors_agree_with_float32():
    fp32 = load_encoder(EncoderSpec(runtime="torch"))
    bf16 = load_encoder(EncoderSpec(runtime="torch-bf16"))
    assert (fp32.spec.runtime, bf16.spec.runtime) == ("torch", "torch-bf16")
    a, b = fp32.encode(TEXTS), bf16.encode(TEXTS)
    assert b.dtype == np.float32 and b.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-3)
    cos = (a * b).sum(1)
    assert cos.min() >= 0.999, cos
    assert not np.array_equal(a, b)  # really computed in bfloat16


def test_native_bf16_reads_the_cpu_flags_as_torch_probes_them(monkeypatch):
    import torch

    probed = bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    assert embedding.cpu_flags() is not None  # Linux: the kernel's flags, no torch needed
    assert embedding.native_bf16() is probed
    monkeypatch.setattr(embedding, "cpu_flags", lambda: {"fpu", "avx2"})
    assert embedding.native_bf16() is False
    monkeypatch.setattr(embedding, "cpu_flags", lambda: {"avx2", "amx_tile"})
    assert embedding.native_bf16() is True
    monkeypatch.setattr(embedding, "cpu_flags", lambda: None)  # no /proc: torch is asked
    assert embedding.native_bf16() is probed


def test_auto_takes_bf16_only_where_the_cpu_computes_it(monkeypatch):
    monkeypatch.setattr(embedding, "native_bf16", lambda: True)
    assert resolve_runtime(AUTO) == "torch-bf16"
    monkeypatch.setattr(embedding, "native_bf16", lambda: False)
    assert resolve_runtime(AUTO) == "onnx"  # the packaged model exports
    monkeypatch.setattr(embedding, "onnx_ready", lambda model: False)
    assert resolve_runtime(AUTO) == "torch"
    # a rebuild keeps what the index was built with, whatever the CPU
    assert resolve_runtime(AUTO, previous="torch-bf16") == "torch-bf16"
    assert resolve_runtime(AUTO, previous="onnx") == "onnx"
    assert resolve_runtime("torch", previous="torch-bf16") == "torch"  # asked for: itself


def test_the_resource_settles_auto_and_a_declared_runtime_wins(monkeypatch):
    monkeypatch.setattr(embedding, "native_bf16", lambda: True)
    res = EmbedderResource()
    assert res.runtime == AUTO  # the default
    undeclared = EncoderSpec(runtime=AUTO)
    assert res.spec_for(undeclared).runtime == "torch-bf16"
    assert res.spec_for(None).runtime == "torch-bf16"
    # built before with float32: kept, so a rebuild encodes nothing again
    assert res.spec_for(undeclared, EncoderSpec(runtime="torch")).runtime == "torch"
    # a corpus that declares float32 gets it on a bf16 CPU
    assert res.spec_for(EncoderSpec(runtime="torch")).runtime == "torch"
    # a resource configured for a runtime: that one
    assert EmbedderResource(runtime="onnx").spec_for(undeclared).runtime == "onnx"
    # another model's previous runtime does not count
    other = EncoderSpec(model="intfloat/e5-small-v2", runtime="onnx-int8")
    assert res.spec_for(undeclared, other).runtime == "torch-bf16"
    with pytest.raises(ValueError, match="unknown embedding runtime 'fp16'"):
        EncoderSpec(runtime="fp16")


def test_a_default_build_records_a_concrete_runtime(sample_index):
    manifest = json.loads((IndexLayout(sample_index).resolve() / "manifest.json").read_text())
    assert manifest["embedding"]["runtime"] == resolve_runtime(AUTO)
    # queries run the same weights on ONNX Runtime (no torch in a querying process),
    # admitted by the agreement the publish measured
    assert manifest["query"]["query_runtime"] == "onnx"
    idx = Index.open(sample_index)
    assert idx.encoder.spec.runtime == "onnx"
    if manifest["embedding"]["runtime"] != "onnx":  # another runtime's queries must agree
        assert idx.runtime_agreement is not None
        assert idx.runtime_agreement >= 0.999


def test_a_bf16_index_is_queried_in_float32_without_native_bf16(sample_index, monkeypatch):
    built = json.loads((IndexLayout(sample_index).resolve() / "manifest.json").read_text())
    if built["embedding"]["runtime"] != "torch-bf16":
        pytest.skip("this CPU has no native bfloat16: the sample was built in float32")
    monkeypatch.setattr(embedding, "native_bf16", lambda: False)
    monkeypatch.setattr(query_runtime, "onnx_ready", lambda model: False)  # torch queries
    idx = Index.open(sample_index)
    assert idx.encoder.spec.runtime == "torch"
    assert idx.runtime_agreement is not None and idx.runtime_agreement >= 0.999
    hits = idx.search("barometric drift correction", mode="flat", k=3)
    assert hits and hits[0].score > 0


@pytest.mark.parametrize("runtime", ["torch", "torch-bf16", "onnx", "onnx-int8"])
def test_a_texts_vector_does_not_depend_on_its_batch(runtime):
    """What makes an incremental build equal a fresh one: a text encoded alone, with
    texts of its own length (no padding in the batch at all), with longer ones, past
    the model's window, or among more texts of its length than one forward pass holds
    (on CPUs with AMX the number of rows in a pass changes the rounding) gets the
    same vector, bit for bit.

    Every text is encoded among others; the texts encoded alone (the expensive
    part: one whole pass each) are all those of distinct lengths, from one word to
    past the window, and the short ones on both sides of a full pass."""
    import random

    rng = random.Random(7)
    words = "tide gauge barometric drift sensor calibration of the harbour series".split()
    texts = [" ".join(rng.choice(words) for _ in range(n))
             for n in (1, 2, 5, 7, 12, 20, 33, 60, 95, 140, 190, 250, 320, 400)]
    texts += ["tide gauge"] * 4 + [texts[5]] * 2  # batch-mates of exactly the same length
    short = len(texts)  # then more texts of one short length than a pass has rows
    texts += [f"{rng.choice(words)} {rng.choice(words)} reading {n}" for n in range(70)]
    checked = list(range(short)) + [short + i for i in (0, 1, 31, 63, 64, 65, 69)]
    enc = load_encoder(EncoderSpec(runtime=runtime), batch_size=8)
    alone = np.concatenate([enc.encode([texts[i]]) for i in checked])
    order = list(range(len(texts)))
    rng.shuffle(order)
    mixed = np.zeros((len(texts), alone.shape[1]), dtype=alone.dtype)
    for start in range(0, len(order), 5):
        part = order[start:start + 5]
        mixed[part] = enc.encode([texts[i] for i in part])
    assert np.array_equal(enc.encode(texts)[checked], alone)
    assert np.array_equal(mixed[checked], alone)


@pytest.mark.parametrize("runtime", ["torch", "torch-bf16"])
def test_the_traced_model_is_the_eager_one_bit_for_bit(runtime, monkeypatch, tmp_path):
    """The torch runtimes encode through a TorchScript trace of the model (no
    sentence-transformers import); its vectors are the ones sentence-transformers'
    own model gives, so an index keeps its vectors whichever of the two made them."""
    from strata.core.torch_trace import TracedSentenceModel

    from strata.core.torch_trace import load_traced

    texts = [*TEXTS, "word " * 600, "  leading and trailing  ", "Ünïcödé ÀÉ mixed CASE", ""]
    monkeypatch.setenv("STRATA_MODEL_CACHE", str(tmp_path))
    location = embedding.model_location(embedding.DEFAULT_MODEL)
    just_traced = load_traced(location, runtime)  # traced in this process, kept in the cache
    assert just_traced.graph.is_file()
    read_back = load_traced(location, runtime)  # what every later process gets
    assert isinstance(read_back, TracedSentenceModel)
    monkeypatch.setattr(embedding, "traceable", lambda location: False)
    eager = embedding.SentenceTransformerEncoder(EncoderSpec(runtime=runtime), batch_size=3)
    assert type(eager.model).__name__ == "SentenceTransformer"
    expected = eager.encode(texts)
    for model in (just_traced, read_back):
        got = model.encode(texts, batch_size=3)
        got /= np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
        assert np.array_equal(got, expected)


def test_a_damaged_or_unwritable_trace_is_traced_again(tmp_path, monkeypatch, caplog):
    from strata.core.torch_trace import load_traced, module_path

    monkeypatch.setenv("STRATA_MODEL_CACHE", str(tmp_path / "cache"))
    location = embedding.model_location(embedding.DEFAULT_MODEL)
    first = load_traced(location, "torch").encode(TEXTS)
    path = module_path(location, "torch")
    path.write_bytes(b"not a module")
    with caplog.at_level("WARNING"):
        again = load_traced(location, "torch").encode(TEXTS)
    assert "cannot be read" in caplog.text and np.array_equal(first, again)
    assert path.stat().st_size > 1000  # traced and kept again
    (tmp_path / "ro").write_text("a file where the cache folder would be")
    monkeypatch.setenv("STRATA_MODEL_CACHE", str(tmp_path / "ro"))
    caplog.clear()
    with caplog.at_level("WARNING"):
        unkept = load_traced(location, "torch").encode(TEXTS)
    assert "could not keep the traced model" in caplog.text and np.array_equal(first, unkept)


def test_a_torch_encoder_loads_without_sentence_transformers(tmp_path):
    """A process that encodes with a torch runtime imports torch, not
    sentence-transformers or transformers, once the trace exists."""
    import subprocess
    import sys

    load_encoder(EncoderSpec(runtime="torch"))  # traced into the model cache if it was not
    code = ("import sys; from strata.core.embedding import EncoderSpec, load_encoder; "
            "e = load_encoder(EncoderSpec(runtime='torch')); v = e.encode(['tide gauge']); "
            "print(v.shape, sorted(m for m in ('sentence_transformers', 'transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True).stdout
    assert out.strip() == "(1, 384) []"


@pytest.mark.parametrize("runtime", ["torch", "torch-bf16"])
def test_passes_go_unfilled_only_where_this_cpu_gives_the_same_bytes(runtime, tmp_path,
                                                                       monkeypatch):
    """A pass's rows beyond its texts are filled with repeats unless the CPU's
    kernels give a row the same bytes whatever the row count (torch_trace.rows_free):
    measured once, kept under the CPU's digest, measured again for another CPU; and
    where the passes go unfilled, every vector is the filled passes' to the bit."""
    import random

    from strata.core import cpu, torch_trace

    model = torch_trace.load_traced(str(embedding.packaged_model_path()), runtime)
    model.graph = tmp_path / f"{runtime}.pt"  # its record lands here, not in the cache
    record = tmp_path / f"{runtime}.pt.rows.json"
    probes: list[int] = []
    real = model._encode
    monkeypatch.setattr(model, "_encode", lambda texts, fill: probes.append(1) or real(texts, fill))
    free = torch_trace.rows_free(model)
    assert probes and json.loads(record.read_text()) == {"cpu": cpu.cpu_fingerprint(),
                                                          "rows_free": free}
    probes.clear()
    assert torch_trace.rows_free(model) is free and not probes  # kept: not measured again
    monkeypatch.setattr(cpu, "cpu_fingerprint", lambda: "another-cpu")
    assert torch_trace.rows_free(model) is free and probes  # another CPU: measured again
    assert json.loads(record.read_text())["cpu"] == "another-cpu"

    rng = random.Random(5)
    words = " ".join(TEXTS).split()
    texts = [" ".join(rng.choices(words, k=rng.randint(1, 150))) for _ in range(40)]
    filled = real(texts, True)
    if free:  # this CPU: unfilled passes, the same bytes
        assert np.array_equal(real(texts, False), filled)
    record.write_text(json.dumps({"cpu": "another-cpu", "rows_free": False}))
    passes: list[int] = []
    shapes = torch_trace.shape_batches
    monkeypatch.setattr(torch_trace, "shape_batches", lambda counts, cap, fill: (
        passes.append(fill) or shapes(counts, cap, fill)))
    model.fill = not torch_trace.rows_free(model)  # as load_traced settles it
    assert np.array_equal(model.encode(texts), filled) and passes == [True]
