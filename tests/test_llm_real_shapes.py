"""The answer shapes a real small model and a real local server produced in
``make e2e-llm`` (SmolLM2-135M behind llama.cpp's OpenAI-compatible server),
reproduced on the fake server (tests/fake_openai.py) through the real openai
SDK, each with what Strata does about it."""

from __future__ import annotations

import pytest

from strata.core.llm import LLM, LLMConfig, LLMRequest
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def cfg(server, **kw) -> LLMConfig:
    base = dict(backend="openai", model="fake-model", base_url=server.base_url,
                concurrency=2, timeout_s=5.0, max_retries=2, backoff_base_s=0.01,
                backoff_max_s=0.05)
    base.update(kw)
    return LLMConfig(**base)


def ask(text: str = "What is in the box?", **kw) -> LLMRequest:
    return LLMRequest(key="answer", template="answer/v1",
                      messages=({"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": text}), **kw)


# --------------------------------------------------------------------------- streaming


def test_a_streamed_answer_counts_the_servers_tokens(server, tmp_path):
    """Streamed answers asked for the server's usage (``stream_options``): the
    stats hold the server's counts, not a characters/4 estimate."""
    server.reply = lambda body: "The box holds three red apples and one green pear."
    with LLM(cfg(server), cache_path=tmp_path / "llm.sqlite") as llm:
        text = "".join(llm.stream(ask(), stage="answer"))
        st = llm.stats("answer")
    (rec,) = server.chat_requests()
    assert rec.body["stream_options"] == {"include_usage": True}
    assert text == "The box holds three red apples and one green pear."
    # the fake's usage: len(prompt) // 4 and len(content) // 4 (the estimate rounds up)
    assert (st.prompt_tokens, st.completion_tokens) == (len(rec.prompt) // 4, len(text) // 4)


def test_a_server_that_refuses_stream_options_is_asked_again_without(server, tmp_path):
    server.reject_stream_options = True
    server.reply = lambda body: "An answer without usage."
    with LLM(cfg(server), cache_path=tmp_path / "llm.sqlite") as llm:
        assert "".join(llm.stream(ask(), stage="answer")) == "An answer without usage."
        assert "".join(llm.stream(ask("Another question?"), stage="answer")) == \
            "An answer without usage."
        st = llm.stats("answer")
    sent = [("stream_options" in r.body) for r in server.chat_requests()]
    assert sent == [True, False, False]  # refused once, then never sent again
    assert st.failures == 0
    assert st.completion_tokens > 0  # estimated: the server sent none


# --------------------------------------------------------------------------- OpenIE


def test_openie_facts_written_into_the_entity_objects(server, tmp_path):
    """SmolLM2 in JSON mode put its facts inside the entity objects ("head" and
    "tail" keys, sometimes an object with a "tail" alone) and no "triples" list:
    the whole ones are kept as triples, the halves dropped and counted, the
    entities kept, and the unit is not a failure."""
    import polars as pl

    from strata.stages.enrich.openie import run_openie

    text = ("# Adweek\n\nAdweek is published by Prometheus Global Media, which also "
            "publishes The Hollywood Reporter and Billboard.")
    server.reply = lambda body: {"entities": [
        {"name": "Adweek", "description": "A trade magazine.", "head": "Adweek",
         "relation": "published by", "tail": "Prometheus Global Media"},
        {"name": "The Hollywood Reporter", "description": "A magazine.", "head": "Adweek"},
        {"tail": "Billboard"}]}
    units = pl.DataFrame({"node_id": ["u1"], "path": ["adweek.md"], "title": ["Adweek"],
                          "breadcrumb": ["Adweek"], "text": [text]})
    with LLM(cfg(server), cache_path=tmp_path / "llm.sqlite") as llm:
        res = run_openie(units, llm)
    out = res.per_unit["u1"]
    assert res.failures == []
    assert res.source["u1"] == "llm"
    assert [n for n, _ in out.entities] == ["Adweek", "The Hollywood Reporter"]
    assert out.triples == [("Adweek", "published by", "Prometheus Global Media")]
    assert res.dropped_triples == 1  # {"tail": "Billboard"}: half a triple, counted


# --------------------------------------------------------------------------- slow answers


def test_timeouts_lower_the_requests_in_flight(server, tmp_path, caplog):
    """llama.cpp's server answers one request at a time and queues the rest: with
    4 in flight and a slow model the queued ones time out, and each retry makes
    the queue longer. A timeout halves what the LLM sends at once (said in the
    log), and the items still get their answers."""
    import logging

    server.reply = lambda body: "A short answer."
    server.add_fault("slow", 1.5, match="item 0")  # the first answer comes too late
    reqs = [LLMRequest(key=f"k{i}", template="answer/v1",
                       messages=({"role": "user", "content": f"item {i}"},)) for i in range(12)]
    caplog.set_level(logging.WARNING, logger="strata.core.llm")
    with LLM(cfg(server, concurrency=4, timeout_s=0.5, max_retries=2),
             cache_path=tmp_path / "llm.sqlite") as llm:
        res = llm.run(reqs, stage="summarize")
        assert llm._throttle.limit == 2
        assert llm._throttle.active == 0
    assert all(r.ok for r in res), [r.error for r in res if not r.ok]
    assert "sending 2 request(s) at a time instead of 4" in caplog.text
    assert sum(r.attempts for r in res) == 13  # item 0 asked twice, the others once


def test_timeouts_from_a_busy_server_do_not_trip_the_breaker(server, tmp_path):
    """In make e2e-llm eight requests queued behind SmolLM2's first answers timed
    out before any answer came, and the breaker stopped the stage as if the
    server were down. A server that times out but answers ``GET /models`` is
    busy: the breaker leaves it alone and the items are answered on retry."""
    server.reply = lambda body: "A short answer."
    for i in range(4):
        server.add_fault("slow", 1.5, match=f"item {i}")
    reqs = [LLMRequest(key=f"k{i}", template="answer/v1",
                       messages=({"role": "user", "content": f"item {i}"},)) for i in range(6)]
    with LLM(cfg(server, concurrency=4, timeout_s=0.5, max_retries=2, breaker_failures=2),
             cache_path=tmp_path / "llm.sqlite") as llm:
        res = llm.run(reqs, stage="openie")
    assert all(r.ok for r in res), [r.error for r in res if not r.ok]


def test_openie_entities_the_passage_never_names_are_dropped_and_counted(server, tmp_path):
    """SmolLM2 in JSON mode named things that are not in the passage (a snake_case
    key, a "relation:title" label, people from elsewhere): well-formed JSON, wrong
    content. A model's entities must occur in the unit's text (case and punctuation
    aside); the rest are dropped and counted."""
    import polars as pl

    from strata.stages.enrich.openie import run_openie

    text = "# Water density\n\nThe default density of 1025 kg/m3 suits open coastal water."
    server.reply = lambda body: {"entities": [
        {"name": "salinity_index", "description": "made up"},
        {"name": "relation:title", "description": "made up"},
        {"name": "Marie Curie", "description": "not in the passage"},
        {"name": "open coastal water", "description": "in the passage"},
        {"name": "Water Density", "description": "the title, capitalised"}], "triples": []}
    units = pl.DataFrame({"node_id": ["u1"], "path": ["d.md"], "title": ["Water density"],
                          "breadcrumb": ["Water density"], "text": [text]})
    with LLM(cfg(server), cache_path=tmp_path / "llm.sqlite") as llm:
        res = run_openie(units, llm)
    assert [n for n, _ in res.per_unit["u1"].entities] == ["open coastal water", "Water Density"]
    assert res.dropped_entities == 3
    assert res.counts["dropped_entities"] == 3
    assert res.failures == []
