"""The OpenAI-compatible embedding endpoint's retries
(strata.core.llm.retry): the server's Retry-After is waited out, a stopping
build does not sit out the wait, a server that stays down fails with one clear
error. Real HTTP (tests/fake_openai.py)."""

from __future__ import annotations

import logging

import pytest

from strata.core import stop_request as stopping
from tests.waiting import stopped_while
from strata.core.encoders.embedding import EmbeddingError, EncoderSpec, OpenAIEncoder
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def server():
    with FakeOpenAI(embedding_dim=8) as s:
        yield s


def _encoder(server, **kw) -> OpenAIEncoder:
    spec = EncoderSpec(backend="openai", model="fake-embed", base_url=server.base_url, dim=8)
    return OpenAIEncoder(spec, **kw)


def _embedding_requests(server):
    return [r for r in server.requests if r.path.endswith("/embeddings")]


def test_retry_after_is_waited_out_then_the_batch_is_embedded(server, caplog):
    """The wait is the 2 s the server asked for, asked of the encoder's sleep (a fake
    here, so the test reads no clock and waits for nothing)."""
    caplog.set_level(logging.INFO, logger="strata.core.encoders.embedding")
    waits: list[float] = []
    enc = _encoder(server, sleep=lambda s, why_not: waits.append(s))
    server.add_fault("429", 2, path="/embeddings")
    v = enc.encode(["tide gauge", "barometric drift"])
    assert v.shape == (2, 8)
    first, second = _embedding_requests(server)
    assert first.fault == "429"
    assert second.fault is None
    assert waits == [2.0]
    assert "HTTP 429; retry 1/3 in 2.00s" in caplog.text


def test_a_server_that_stays_down_fails_with_its_status_after_the_retries(server):
    enc = _encoder(server, max_retries=2)
    server.add_fault("500", times=None, path="/embeddings")
    with pytest.raises(EmbeddingError, match="answered HTTP 500"):
        enc.encode(["tide gauge"])
    assert len(_embedding_requests(server)) == 3  # the first and two retries


def test_a_stop_request_ends_the_retry_wait_with_an_interrupt(server, caplog):
    """The server asks for a minute; the build's stop flag ends the wait at once
    and the caller sees StopRequested (an interrupt, as Ctrl-C is). No clock is
    read: without the cut the join would take a minute and a second request
    would reach the server."""
    caplog.set_level(logging.INFO, logger="strata.core.encoders.embedding")
    enc = _encoder(server)
    server.add_fault("429", 60, times=None, path="/embeddings")
    raised = stopped_while(lambda: enc.encode(["tide gauge"]),
                           lambda: "retry 1/3 in 60.00s" in caplog.text,
                           "the encoder never waited to retry")
    assert raised and isinstance(raised[0], stopping.StopRequested)
    assert len(_embedding_requests(server)) == 1
