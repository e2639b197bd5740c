"""Concurrent queries are embedded together by one thread (BatchingEncoder),
with the same vectors as one at a time."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from strata.core.encoders.embedding import BatchingEncoder, EncoderSpec, load_encoder


def test_concurrent_callers_share_batches_and_get_their_own_vectors():
    inner = load_encoder(EncoderSpec())
    enc = BatchingEncoder(inner)
    texts = [f"tide gauge question number {i} about barometric drift" for i in range(48)]
    expected = inner.encode(texts)
    got: dict[int, np.ndarray] = {}
    start = threading.Barrier(16)

    def caller(n: int) -> None:
        start.wait()
        for i in range(n, len(texts), 16):
            got[i] = enc.encode([texts[i]])[0]

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(48))
    for i, v in got.items():
        assert np.allclose(v, expected[i], atol=1e-5), i
    assert enc.batches < 48, "some calls were answered together"
    assert enc.encode([]).shape == (0, inner.dim)
    assert enc.spec == inner.spec and enc.dim == inner.dim


def test_a_failing_model_fails_every_waiting_caller():
    class Broken:
        spec, dim = EncoderSpec(), 3

        def encode(self, texts):
            raise RuntimeError("model went away")

    enc = BatchingEncoder(Broken())
    with pytest.raises(RuntimeError, match="model went away"):
        enc.encode(["a"])
    with pytest.raises(RuntimeError, match="model went away"):  # the thread lives on
        enc.encode(["b"])
