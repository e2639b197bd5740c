"""Encoding at the model's own speed: every text sorted by length,
encoded in calls of one batch, written as it comes, threads shared by the
encoding processes. The real packaged model, real Parquet caches."""

from __future__ import annotations

import os
import random

import numpy as np
import polars as pl
import pytest

from strata.stages.embed import (_embedded, _rows_table, build_vectors, encode_shard,
                                 encode_sorted)
from strata.stages.stored_vectors import read_vector_cache
from strata.core import stop_request as stopping
from strata.core.encoders.embedding import EncoderSpec, encoder_threads, load_encoder

WORDS = ("tide gauge barometric drift pressure harbour reading sensor offset hourly reference "
         "correction datum survey station buoy wave swell anemometer").split()


def _corpus(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def _items(texts: list[str]) -> pl.DataFrame:
    n = len(texts)
    return pl.DataFrame({
        "node_id": [f"n{i:04d}" for i in range(n)], "kind": ["fact"] * n, "subkind": [""] * n,
        "path": [""] * n, "language": [None] * n, "depth": [0] * n, "title": [""] * n,
        "breadcrumb": [""] * n, "text": texts, "attrs": ["{}"] * n, "embedded": [True] * n,
        "summary": [None] * n}, schema_overrides={"language": pl.Utf8, "depth": pl.Int32,
                                                  "summary": pl.Utf8})


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(EncoderSpec())


def test_sorted_batches_give_the_vectors_one_text_at_a_time_gives(encoder):
    texts = _corpus(60)
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    got = np.zeros_like(alone)
    calls: list[list[int]] = []

    def emit(idx, vectors):
        calls.append(idx)
        got[idx] = vectors

    encode_sorted(texts, encoder, batch_size=16, emit=emit)
    assert [len(c) for c in calls] == [16, 16, 16, 12]
    counts = encoder.token_counts(texts)  # torch orders by tokens: a call fills whole passes
    lengths = [counts[i] for c in calls for i in c]
    assert lengths == sorted(lengths)  # shortest first, across calls
    assert sorted(i for c in calls for i in c) == list(range(len(texts)))
    # neither the padding nor the batch-mates change a vector, in its last bit
    assert np.array_equal(got, alone)


def test_calls_of_the_default_size_fill_the_passes_of_the_shortest_texts(encoder, monkeypatch):
    """On torch a call runs fixed-shape passes, the last of each padded length
    filled with repeats; the shortest texts have the widest passes. Calls of the
    default size, sorted, run those texts in as few passes as their count needs."""
    from strata.core.encoders import batch_shapes
    from strata.core.encoders import embedding
    from strata.stages.embed import ENCODE_BATCH

    rng = random.Random(3)
    texts = [" ".join(rng.sample(WORDS, 2)) + f" {i}" for i in range(3 * batch_shapes.MAX_ROWS)]
    counts = encoder.token_counts(texts)
    if counts is None:
        pytest.skip("an ONNX runtime: its calls are not fixed-shape passes")
    lengths = {batch_shapes.padded_length(n) for n in counts}
    assert len(lengths) == 1  # one padded length: the widest passes
    passes: list[int] = []
    real = batch_shapes.shape_batches

    def counted(counts, cap):
        for length, rows in real(counts, cap):
            passes.append(len(rows))
            yield length, rows

    monkeypatch.setattr(embedding, "shape_batches", counted)
    got = np.zeros((len(texts), encoder.dim), np.float32)
    encode_sorted(texts, encoder, batch_size=ENCODE_BATCH, emit=got.__setitem__)
    rows = batch_shapes.rows_per_pass(lengths.pop())
    assert len(passes) == -(-len(texts) // rows)  # no pass ran part-filled by a short call
    assert np.array_equal(got, encoder.encode(texts))


def test_token_counts_tokenize_a_bounded_batch_at_a_time(encoder, monkeypatch):
    """A first build's shard counts every text it encodes; the tokenizer's output
    for all of them at once was a peak that grew with the corpus. The counts are
    those of each text alone, whatever the batch boundaries."""
    from strata.core.encoders.embedding import COUNT_BATCH
    texts = _corpus(2 * COUNT_BATCH + 5, seed=11)
    model = encoder.model
    alone = [encoder.token_counts([t])[0] for t in texts]
    sizes: list[int] = []
    tokenizer_class = type(model.tokenizer)  # the model's own tokenizer: its calls are counted
    real = tokenizer_class.__call__
    monkeypatch.setattr(tokenizer_class, "__call__",
                        lambda self, part, **kw: sizes.append(len(part)) or real(self, part, **kw))
    assert encoder.token_counts(texts) == alone
    assert sizes == [COUNT_BATCH, COUNT_BATCH, 5]


def test_a_shard_writes_its_vectors_as_it_goes_and_resumes_where_it_stopped(encoder, tmp_path):
    texts = _corpus(90, seed=3)
    items = _items(texts)
    spec = EncoderSpec()
    parts: list[tuple[list[str], np.ndarray]] = []
    seen = []

    def stop_after_three_calls(done, total, work=None):
        seen.append(done)
        if len(seen) == 4:  # the first line, then three calls made
            stopping.request("test")

    try:
        with pytest.raises(stopping.StopRequested):
            encode_shard(items, spec, lambda: encoder, tmp_path / "lance", 0, 1,
                         sink=lambda h, v: parts.append((h, v)), batch_size=10,
                         progress=stop_after_three_calls, flush_texts=20)
    finally:
        stopping.clear()
    # a flush after two calls, and the third call's vectors when the stop came
    assert [len(h) for h, _ in parts] == [20, 10]
    known = {h for hs, _ in parts for h in hs}
    rest = encode_shard(items, spec, lambda: encoder, tmp_path / "lance", 0, 1,
                        sink=lambda h, v: parts.append((h, v)), batch_size=10, known=known,
                        flush_texts=1000)
    assert rest.computed == 60 and rest.dim == encoder.dim
    assert len(parts) == 3 and not known & set(parts[2][0])

    # the written pieces, read back as the embeddings asset does, equal a plain build's
    import pyarrow as pa

    from strata.core.storage.layout import write_parquet_atomic

    cache = tmp_path / "cache"
    for i, (hashes, vectors) in enumerate(parts):
        flat = pa.array(vectors.reshape(-1), pa.float32())
        write_parquet_atomic(pa.table({"text_hash": pa.array(hashes, pa.string()),
                                       "vector": pa.FixedSizeListArray.from_arrays(flat, 384)}),
                             cache / f"000-{i:05d}.parquet")
    cached = read_vector_cache(cache)
    rows = _rows_table(_embedded(items), spec)
    ordered, hashes = rows.column("text").to_pylist(), rows.column("text_hash").to_pylist()
    assert set(cached) == set(hashes)
    direct = encoder.encode(ordered)
    assert np.abs(np.stack([cached[h] for h in hashes]) - direct).max() < 1e-5

    loads = []
    result = build_vectors(items, spec, lambda: loads.append(1) or encoder, tmp_path / "lance",
                           precomputed=cached)
    assert result.computed == 0 and result.reused == 90 and not loads


def test_threads_are_the_cores_shared_by_the_encoding_processes(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("STRATA_TORCH_THREADS", raising=False)
    monkeypatch.delenv("STRATA_ENCODING_PROCESSES", raising=False)
    assert encoder_threads() == cores
    assert encoder_threads(2) == max(1, cores // 2)
    assert encoder_threads(64) == 1
    monkeypatch.setenv("STRATA_ENCODING_PROCESSES", "2")
    assert encoder_threads() == max(1, cores // 2)
    monkeypatch.setenv("STRATA_TORCH_THREADS", "3")  # an operator's explicit choice wins
    assert encoder_threads() == 3
    monkeypatch.setenv("STRATA_TORCH_THREADS", "many")
    with pytest.raises(ValueError, match="STRATA_TORCH_THREADS"):
        encoder_threads()


def test_the_shards_count_the_step_processes_the_executor_tagged(monkeypatch):
    from strata.assets.shards import STEP_PROCESSES_TAG, encoding_processes

    monkeypatch.delenv("STRATA_ENCODING_PROCESSES", raising=False)
    assert encoding_processes(2, {}) == 1  # in process: one shard after the other
    assert encoding_processes(2, {STEP_PROCESSES_TAG: "4"}) == 2  # never more than the shards
    assert encoding_processes(8, {STEP_PROCESSES_TAG: "3"}) == 3


def test_the_encoder_runs_with_the_threads_it_is_given(encoder):
    import torch

    before = torch.get_num_threads()
    try:
        encoder.set_threads(1)
        assert torch.get_num_threads() == 1
        encoder.encode(["one thread"])
    finally:
        encoder.set_threads(before)
