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

from strata.core.encoders import embedding
from strata.core.encoders import query_runtime
from strata.core.encoders.embedding import AUTO, EncoderSpec, load_encoder, resolve_runtime
from strata.core.storage.layout import IndexLayout
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
    monkeypatch.setattr(embedding, "cpu_flags", lambda: None)  # no /proc: assumed absent
    assert embedding.native_bf16() is False


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


