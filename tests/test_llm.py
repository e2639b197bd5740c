"""strata.core.llm against a real HTTP server (tests/fake_openai.py) through the real
openai SDK: ordering, caching and resume, retries, timeouts, JSON repair,
response_format fallback, images, the callable backend and key redaction.

A server's Retry-After is never waited out here: those tests give the LLM a
fake clock's ``sleep`` (:class:`FakeClock`), which records the wait each retry
asked for and returns at once, and assert on those waits, not on wall time."""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
import threading
import time

import pytest

from strata.core.llm import LLM, LLMConfig, LLMRequest, image_mime, parse_json
from tests.waiting import stopped_while, wait_until
from tests.fake_openai import FakeOpenAI

KEY = "sk-test-SECRET-123"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("STRATA_TEST_KEY", KEY)


class FakeClock:
    """Stands in for :func:`strata.core.stop_request.sleep` (the wait before a retry):
    records each wait asked for and returns at once, or with the reason to stop
    when there is one, as the real one does."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float, why_not=lambda: None) -> str | None:
        self.waits.append(seconds)
        return why_not()


def cfg(server, **kw) -> LLMConfig:
    base = dict(backend="openai", model="fake-model", base_url=server.base_url,
                api_key_env="STRATA_TEST_KEY", concurrency=4, timeout_s=5.0, max_retries=3,
                backoff_base_s=0.01, backoff_max_s=0.05)
    base.update(kw)
    return LLMConfig(**base)


def req(i, *, json_mode=True, image=None, template="summarize/v1") -> LLMRequest:
    return LLMRequest(
        key=f"node-{i}",
        messages=({"role": "system", "content": "Reply with JSON."},
                  {"role": "user", "content": f"Summarize item {i:03d}."}),
        template=template, json_mode=json_mode, image=image)


def test_happy_path_order_usage_cache_and_persistence(server, tmp_path):
    cache = tmp_path / "cache" / "llm.sqlite"
    reqs = [req(i) for i in range(12)]
    seen = []
    with LLM(cfg(server), cache_path=cache) as llm:
        res = llm.run(reqs, stage="summarize", parse=parse_json,
                      progress=lambda d, t: seen.append((d, t)))
        assert [r.key for r in res] == [r.key for r in reqs]
        assert all(r.ok for r in res)
        assert not any(r.cached for r in res)
        assert [r.attempts for r in res] == [1] * 12
        for i, r in enumerate(res):
            assert r.value["echo"].endswith(f"Summarize item {i:03d}.")
        st = llm.stats("summarize")
        assert st.calls == 12
        assert st.cache_hits == 0
        assert st.failures == 0
        assert st.prompt_tokens == sum(r.prompt_tokens for r in res) > 0
        assert st.completion_tokens > 0
        assert seen[-1] == (12, 12)
        n = len(server.chat_requests())
        assert n == 12
        # response_format was sent for json requests
        assert all(r.body.get("response_format") == {"type": "json_object"}
                   for r in server.chat_requests())

        again = llm.run(reqs, stage="summarize", parse=parse_json)
        assert all(r.ok for r in again)
        assert all(r.cached for r in again)
        assert [r.attempts for r in again] == [0] * 12
        assert [r.value for r in again] == [r.value for r in res]
        assert len(server.chat_requests()) == n
        st = llm.stats("summarize")
        assert st.calls == 12
        assert st.cache_hits == 12
        assert llm.estimate(reqs, "summarize")["calls_needed"] == 0

    with LLM(cfg(server), cache_path=cache) as llm2:
        est = llm2.estimate(reqs + [req(99)], "summarize")
        assert est["requests"] == 13
        assert est["cached"] == 12
        assert est["calls_needed"] == 1
        assert est["est_prompt_tokens"] > 0
        res2 = llm2.run(reqs, stage="summarize", parse=parse_json)
        assert all(r.cached for r in res2)
        assert len(server.chat_requests()) == n
        assert llm2.stats("summarize").cache_hits == 12


def test_duplicates_call_once_and_key_covers_template(server):
    with LLM(cfg(server)) as llm:
        res = llm.run([req(1), req(1), req(2), req(1, template="summarize/v2")], stage="s")
        assert all(r.ok for r in res)
        assert len(server.chat_requests()) == 3
        assert res[0].text == res[1].text
        assert res[1].cached
        assert llm.stats("s").calls == 3


def test_429_retry_after_is_honoured(server):
    server.add_fault("429", 2)
    clock = FakeClock()
    with LLM(cfg(server, backoff_max_s=5.0), sleep=clock.sleep) as llm:
        (r,) = llm.run([req(1)], stage="s", parse=parse_json)
    assert r.ok
    assert r.attempts == 2
    first, second = server.chat_requests()
    assert first.fault == "429"
    assert second.fault is None
    assert clock.waits == [2.0]  # the server's wait, not the backoff
    assert llm.stats("s").retries == 1


def test_retry_after_capped_by_backoff_max(server):
    server.add_fault("429", 30)
    clock = FakeClock()
    with LLM(cfg(server, backoff_max_s=0.2), sleep=clock.sleep) as llm:
        (r,) = llm.run([req(1)], stage="s")
    assert r.ok
    assert len(server.chat_requests()) == 2
    assert clock.waits == [0.2]  # 30 s asked, backoff_max_s waited


def test_500_twice_then_ok(server):
    server.add_fault("500", times=2)
    with LLM(cfg(server)) as llm:
        (r,) = llm.run([req(1)], stage="s", parse=parse_json)
        assert r.ok
        assert r.attempts == 3
        assert llm.stats("s").retries == 2
        assert llm.stats("s").calls == 1


def test_dropped_connection_is_retried(server):
    server.add_fault("drop")
    with LLM(cfg(server)) as llm:
        (r,) = llm.run([req(1)], stage="s")
    assert r.ok
    assert r.attempts == 2


def test_timeout_retried_and_isolated(server):
    server.add_fault("slow", 2, match="item 001")  # once: the retry succeeds
    server.add_fault("slow", 2, match="item 002", times=None)  # always
    with LLM(cfg(server, timeout_s=0.5, max_retries=2)) as llm:
        res = llm.run([req(i) for i in range(5)], stage="s", parse=parse_json)
        st = llm.stats("s")
    assert res[1].ok
    assert res[1].attempts == 2
    bad = res[2]
    assert not bad.ok
    assert bad.attempts == 3
    assert "timeout" in bad.error.lower()
    assert bad.text is None
    assert all(res[i].ok for i in (0, 1, 3, 4))
    assert st.failures == 1
    assert st.failed_keys == ["node-2"]
    assert st.retries >= 3


def test_truncated_json_is_repaired(server):
    server.add_fault("truncated")
    with LLM(cfg(server)) as llm:
        (r,) = llm.run([req(1)], stage="s", parse=parse_json)
    assert r.ok
    assert r.value == {"summary": "abc"}
    assert r.attempts == 1


def test_malformed_retried_then_failed_and_not_cached(server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    server.add_fault("malformed", match="item 003", times=None)
    reqs = [req(i) for i in range(5)]
    with LLM(cfg(server), cache_path=cache) as llm:
        res = llm.run(reqs, stage="s", parse=parse_json)
        bad = res[3]
        assert not bad.ok
        assert bad.attempts == 3
        assert "parse error" in bad.error
        assert llm.stats("s").failed_keys == ["node-3"]
        assert sum(r.ok for r in res) == 4
    assert len(server.chat_requests()) == 4 + 3
    server.faults.clear()
    before = len(server.chat_requests())
    with LLM(cfg(server), cache_path=cache) as llm:
        res = llm.run(reqs, stage="s", parse=parse_json)
        assert all(r.ok for r in res)
        assert [r.cached for r in res] == [True, True, True, False, True]
        assert llm.stats("s").calls == 1
    new = server.chat_requests()[before:]
    assert len(new) == 1
    assert "item 003" in new[0].prompt


def test_interrupted_run_resumes_with_only_missing_calls(server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    reqs = [req(i) for i in range(20)]
    for i in range(15, 20):
        server.add_fault("400", match=f"item {i:03d}", times=None)
    with LLM(cfg(server), cache_path=cache) as llm:
        res = llm.run(reqs, stage="s", parse=parse_json)
        assert [r.ok for r in res] == [True] * 15 + [False] * 5
        assert [r.attempts for r in res[15:]] == [1] * 5  # not retried
        assert all("400" in r.error for r in res[15:])
    assert len(server.chat_requests()) == 20
    server.faults.clear()
    with LLM(cfg(server), cache_path=cache) as llm:
        res = llm.run(reqs, stage="s", parse=parse_json)
        assert all(r.ok for r in res)
        assert llm.stats("s").calls == 5
        assert llm.stats("s").cache_hits == 15
    assert len(server.chat_requests()) == 25


def test_response_format_rejected_in_auto_mode(server):
    server.reject_response_format = True
    with LLM(cfg(server, concurrency=1)) as llm:
        res = llm.run([req(i) for i in range(3)], stage="s", parse=parse_json)
    assert all(r.ok for r in res)
    assert res[0].attempts == 2
    assert res[1].attempts == 1
    sent = [("response_format" in r.body) for r in server.chat_requests()]
    assert sent == [True, False, False, False]


def test_response_format_fault_once_and_off_mode(server):
    server.add_fault("400_response_format")
    with LLM(cfg(server, concurrency=1)) as llm:
        (r,) = llm.run([req(1)], stage="s")
    assert r.ok
    server.requests.clear()
    with LLM(cfg(server, json_mode="off")) as llm:
        llm.run([req(2)], stage="s")
    with LLM(cfg(server, json_mode="on")) as llm:
        llm.run([req(3, json_mode=False)], stage="s")
    assert not any("response_format" in r.body for r in server.chat_requests())


def test_image_request_sends_data_url(server):
    with LLM(cfg(server)) as llm:
        res = llm.run([req(1, image=PNG, json_mode=False), req(2, image=JPEG, json_mode=False)],
                      stage="caption")
    assert all(r.ok for r in res)
    by_prompt = {r.prompt: r.body for r in server.chat_requests()}
    for i, (img, mime) in enumerate([(PNG, "image/png"), (JPEG, "image/jpeg")], start=1):
        body = next(b for p, b in by_prompt.items() if f"item {i:03d}" in p)
        parts = body["messages"][-1]["content"]
        assert parts[0] == {"type": "text", "text": f"Summarize item {i:03d}."}
        url = parts[1]["image_url"]["url"]
        assert parts[1]["type"] == "image_url"
        assert url == f"data:{mime};base64," + base64.b64encode(img).decode()


def test_image_mime_detection():
    assert image_mime(PNG) == "image/png"
    assert image_mime(JPEG) == "image/jpeg"
    assert image_mime(b"GIF89a....") == "image/gif"
    assert image_mime(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"


def test_callable_backend():
    prompts, vision = [], []

    def fn(prompt):
        prompts.append(prompt)
        return json.dumps({"n": len(prompt)})

    def see(prompt, image):
        vision.append((prompt, image))
        return "a caption"

    with LLM(LLMConfig(backend="callable"), fn=fn, vision_fn=see) as llm:
        assert llm.name.startswith("callable:")
        assert "fn" in llm.name
        res = llm.run([req(1), req(2, image=PNG, json_mode=False)], stage="s")
    assert all(r.ok for r in res)
    assert "Reply with JSON.\n\nSummarize item 001." in prompts
    assert vision == [("Reply with JSON.\n\nSummarize item 002.", PNG)]
    assert res[1].text == "a caption"


def test_callable_system_first_and_missing_vision_fn():
    got = []
    msgs = ({"role": "user", "content": "question"}, {"role": "system", "content": "rules"})
    with LLM(LLMConfig(backend="callable"), fn=lambda p: got.append(p) or "ok") as llm:
        res = llm.run([LLMRequest("a", msgs, "t/v1"), req(2, image=PNG)], stage="s")
    assert got == ["rules\n\nquestion"]
    assert res[0].ok
    assert not res[1].ok
    assert res[1].error == "no vision_fn configured"


def test_callable_retries_exceptions():
    calls = {"n": 0}
    lock = threading.Lock()

    def flaky(prompt):
        with lock:
            calls["n"] += 1
            if calls["n"] <= 2:
                raise ConnectionError("backend hiccup")
        return "fine"

    c = LLMConfig(backend="callable", backoff_base_s=0.01, backoff_max_s=0.02, max_retries=3)
    clock = FakeClock()
    with LLM(c, fn=flaky, sleep=clock.sleep) as llm:
        (r,) = llm.run([req(1)], stage="s")
        assert r.ok
        assert r.text == "fine"
        assert r.attempts == 3
        assert llm.stats("s").retries == 2
    assert len(clock.waits) == 2
    assert all(0 <= w <= 0.02 for w in clock.waits)  # full jitter, at most backoff_max_s

    def broken(prompt):
        raise RuntimeError("always")

    c = LLMConfig(backend="callable", backoff_base_s=0.001, backoff_max_s=0.002, max_retries=2)
    with LLM(c, fn=broken, sleep=FakeClock().sleep) as llm:
        (r,) = llm.run([req(1)], stage="s")
        assert not r.ok
        assert r.attempts == 3
        assert "always" in r.error


def test_parse_value_error_retried_then_ok():
    outputs = iter(["nope", "nope", '{"ok": 1}'])
    c = LLMConfig(backend="callable", backoff_base_s=0.001)
    with LLM(c, fn=lambda p: next(outputs)) as llm:
        (r,) = llm.run([req(1)], stage="s", parse=parse_json)
    assert r.ok
    assert r.value == {"ok": 1}
    assert r.attempts == 3


def test_key_is_redacted_from_errors_and_cache(server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "llm.sqlite"
    server.add_fault("401", match="item 000", times=None)
    with LLM(cfg(server), cache_path=cache) as llm:
        assert KEY not in repr(llm)
        assert KEY not in repr(llm.config)
        res = llm.run([req(0), req(1)], stage="s", parse=parse_json)
    bad = res[0]
    assert not bad.ok
    assert bad.attempts == 1  # 401 is not retried
    assert "401" in bad.error
    assert "***" in bad.error
    assert KEY not in bad.error
    # the server did receive the key, and echoed it
    (echoed,) = [r for r in server.chat_requests() if r.fault == "401"]
    assert KEY in echoed.headers["authorization"]
    assert KEY not in caplog.text
    assert res[1].ok
    for p in tmp_path.iterdir():
        assert KEY.encode() not in p.read_bytes(), p


def test_offline_backend():
    llm = LLM(LLMConfig())
    assert llm.offline
    assert llm.name == "offline"
    with pytest.raises(RuntimeError, match="offline stand-in"):
        llm.run([req(1)], stage="s")
    assert llm.estimate([req(1)], "s")["calls_needed"] == 1
    llm.close()


def test_config_validation():
    with pytest.raises(ValueError):
        LLMConfig(backend="nope")
    with pytest.raises(ValueError):
        LLM(LLMConfig(backend="callable"))


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('Here you go: {"a": {"b": "}"}} hope that helps', {"a": {"b": "}"}}),
    ('[{"s": "x", "p": "y", "o": "z"}]', [{"s": "x", "p": "y", "o": "z"}]),
    ('{"summary": "abc', {"summary": "abc"}),
    ('{"a": 1,}', {"a": 1}),
    ("{}", {}),
])
def test_parse_json(text, expected):
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "Sure! Here is the summary: ...", "42"])
def test_parse_json_rejects(text):
    with pytest.raises(ValueError):
        parse_json(text)


def test_fake_embeddings(server):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    a = client.embeddings.create(model="m", input=["alpha", "beta"])
    b = client.embeddings.create(model="m", input=["beta"])
    assert [d.index for d in a.data] == [0, 1]
    assert len(a.data[0].embedding) == 8
    assert a.data[1].embedding == pytest.approx(b.data[0].embedding)
    assert a.usage.prompt_tokens > 0
    client.close()


def test_cache_file_is_sqlite_wal(server, tmp_path):
    cache = tmp_path / "deep" / "dir" / "llm.sqlite"
    with LLM(cfg(server), cache_path=cache) as llm:
        llm.run([req(1)], stage="s")
        # committed at once: visible to another connection before close
        n = sqlite3.connect(cache).execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        assert n == 1
        mode = sqlite3.connect(cache).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_bounded_concurrency(server):
    """At most ``concurrency`` requests in flight, and that many really do run
    together: the first ones wait for each other at the server (behaviour, not
    wall time: a loaded machine can be as slow as it likes)."""
    state = {"now": 0, "max": 0}
    cond = threading.Condition()

    def reply(body):
        with cond:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            cond.notify_all()
            # hold until four are in at once (or give up after a long while)
            cond.wait_for(lambda: state["max"] >= 4, timeout=30)
        with cond:
            state["now"] -= 1
        return '{"ok": true}'

    server.reply = reply
    with LLM(cfg(server, concurrency=4, timeout_s=60)) as llm:
        res = llm.run([req(i) for i in range(12)], stage="s", parse=parse_json)
    assert all(r.ok for r in res)
    assert state["max"] == 4  # four together, never five


def test_retry_after_as_an_http_date_or_in_milliseconds_is_honoured(server):
    """The server's wait as an HTTP date, then as retry-after-ms."""
    from email.utils import formatdate

    server.add_fault("429", {"Retry-After": formatdate(time.time() + 3, usegmt=True)})
    server.add_fault("429", {"retry-after-ms": "1500"})
    clock = FakeClock()
    with LLM(cfg(server, backoff_max_s=10.0), sleep=clock.sleep) as llm:
        (r,) = llm.run([req(1)], stage="s", parse=parse_json)
        assert r.ok
        assert r.attempts == 3
        assert llm.stats("s").retries == 2
    assert len(server.chat_requests()) == 3
    from_date, from_ms = clock.waits
    assert 1.0 <= from_date <= 3.0  # the date has whole seconds, and the request took a while
    assert from_ms == 1.5


def test_a_retry_after_of_an_hour_fails_the_item_at_once(server):
    """A server that will not be back for an hour is not retried (two minutes
    are waited at most): the item fails with the 429 and the rest go on."""
    server.add_fault("429", 3600, match="item 001")
    clock = FakeClock()
    with LLM(cfg(server, backoff_max_s=10.0), sleep=clock.sleep) as llm:
        res = llm.run([req(0), req(1)], stage="s", parse=parse_json)
    assert res[0].ok
    assert not res[1].ok
    assert res[1].attempts == 1
    assert "429" in res[1].error
    assert len(server.chat_requests()) == 2
    assert clock.waits == []


def _workers(stage: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"llm-{stage}_")]


def test_a_stop_request_ends_the_retry_wait(server, caplog):
    """The build's stop flag must end a retry's wait on the worker thread at once,
    not after the 60 s the server asked for (then a second request would arrive).
    No clock is read: if the wait were not cut short, the joins below would take
    a minute and the server would see a second request."""
    from strata.core import stop_request as stopping

    caplog.set_level(logging.INFO, logger="strata.core.llm")
    server.add_fault("429", 60, times=None)
    llm = LLM(cfg(server, backoff_max_s=120.0, max_retries=1, concurrency=1))
    try:
        raised = stopped_while(lambda: llm.run([req(1)], stage="stopme", parse=parse_json),
                               lambda: "retry 1/1 in 60.00s" in caplog.text, "the retry wait",
                               then=lambda: [w.join() for w in _workers("stopme")])
    finally:
        llm.close()
    assert raised
    assert isinstance(raised[0], stopping.StopRequested)
    assert len(server.chat_requests()) == 1
    assert "HTTP 429; not retried: the build is stopping (SIGINT (test))" in caplog.text


def test_closing_the_llm_ends_a_retry_wait_of_either_backend(server):
    """A stage closes its LLM when it ends (an interrupt included): items waiting
    to retry fail at once with the reason, whatever the backend."""
    server.add_fault("429", 60, times=None)
    called = threading.Event()

    def down(prompt):
        called.set()
        raise ConnectionError("backend down")

    callable_cfg = LLMConfig(backend="callable", backoff_base_s=60.0, backoff_max_s=60.0,
                             max_retries=3)
    for llm, started in ((LLM(cfg(server, backoff_max_s=120.0, max_retries=1)),
                          lambda: len(server.chat_requests()) == 1),
                         (LLM(callable_cfg, fn=down), called.is_set)):
        out: list = []
        stage_thread = threading.Thread(
            target=lambda llm=llm, out=out: out.extend(llm.run([req(1)], stage="closing")))
        stage_thread.start()
        wait_until(lambda llm=llm, started=started: started() and llm.stats("closing").retries == 1,
                   "a retry wait")
        llm.close()
        stage_thread.join()
        (r,) = out
        assert not r.ok
        assert r.attempts == 1
        assert r.error.endswith("; not retried: the LLM was closed"), r.error
    assert len(server.chat_requests()) == 1


# --------------------------------------------------------------------------- dead endpoints

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_endpoint_fails_at_the_probe_and_sends_nothing(tmp_path):
    """Nothing listens: the stage stops before its first item, with one line
    that names the URL and what to check, and nothing is recorded as failed."""
    from strata.core.llm import EndpointError

    url = f"http://127.0.0.1:{_free_port()}/v1"
    config = LLMConfig(backend="openai", model="m", base_url=url, api_key_env="STRATA_TEST_KEY")
    with LLM(config, cache_path=tmp_path / "llm.sqlite") as llm:
        with pytest.raises(EndpointError) as err:
            llm.run([req(i) for i in range(50)], stage="summarize", parse=parse_json)
        stats = llm.stats("summarize")
    line = str(err.value)
    assert "\n" not in line
    assert url in line
    assert "refuse" in line
    assert "--llm-base-url" in line
    assert "running" in line
    assert stats.calls == 0
    assert stats.failures == 0


def test_nothing_cached_is_asked_of_a_dead_endpoint(server, tmp_path):
    """With every answer cached, a rebuild never probes: a dead endpoint does not
    matter when there is nothing to ask."""
    cache = tmp_path / "llm.sqlite"
    reqs = [req(i) for i in range(4)]
    with LLM(cfg(server), cache_path=cache) as llm:
        assert all(r.ok for r in llm.run(reqs, stage="s", parse=parse_json))
    dead = cfg(server, base_url=f"http://127.0.0.1:{_free_port()}/v1")
    with LLM(dead, cache_path=cache) as llm:
        res = llm.run(reqs, stage="s", parse=parse_json)
    assert all(r.ok for r in res)
    assert all(r.cached for r in res)


def test_the_breaker_stops_a_stage_whose_endpoint_stops_answering(server):
    """The probe passes (the server is up), then every chat request is dropped
    without an answer: after a run of connection failures the stage stops
    instead of retrying 40 items one by one."""
    from strata.core.llm import EndpointError

    server.add_fault("drop", times=None)
    with LLM(cfg(server, breaker_failures=6, max_retries=5)) as llm:
        with pytest.raises(EndpointError) as err:
            llm.run([req(i) for i in range(40)], stage="openie", parse=parse_json)
    sent = len(server.chat_requests())
    assert 6 <= sent < 6 + 4 * 2  # the run of failures, plus what was in flight; not 40 × 6
    assert server.base_url.rstrip("/") in str(err.value)
    assert "6 requests in a row" in str(err.value)


def test_http_faults_on_a_live_endpoint_never_trip_the_breaker(server):
    """500s, 429s and malformed answers are answers: each item fails or succeeds
    on its own and the stage completes."""
    server.add_fault("500", match="item 00", times=None)  # items 0-9: always 500
    server.add_fault("malformed", match="item 01", times=None)  # items 10-19: never JSON
    server.add_fault("429", 0, times=5)
    with LLM(cfg(server, breaker_failures=3, max_retries=2)) as llm:
        res = llm.run([req(i) for i in range(30)], stage="s", parse=parse_json)
    failed = {r.key for r in res if not r.ok}
    assert failed == {f"node-{i}" for i in range(20)}
    assert all(r.ok for r in res[20:])


def test_an_endpoint_that_fails_an_image_is_not_sent_the_others(server):
    """llama.cpp's server with a text-only model answers every image with a 500:
    the first image spends its retries, the others are not sent (each a failure
    saying why, retried by the next build), and text requests go on."""
    server.add_fault("500", match="Caption picture", times=None)

    def picture(i):
        return LLMRequest(key=f"img-{i}", template="caption/v1", json_mode=False, image=PNG,
                          messages=({"role": "user", "content": f"Caption picture {i}."},))

    reqs = [req(1), picture(1), picture(2), req(2), picture(3)]
    with LLM(cfg(server, concurrency=1)) as llm:
        res = llm.run(reqs, stage="caption")
    assert [r.ok for r in res] == [True, False, False, True, False]
    assert "500" in res[1].error
    assert res[1].attempts == 4  # 1 + max_retries 3
    for r in (res[2], res[4]):
        assert r.error.startswith("not sent: the endpoint failed an image request")
        assert "500" in r.error
        assert r.attempts == 0
    pictures = [q for q in server.chat_requests() if "Caption picture" in q.prompt]
    assert len(pictures) == 4  # the first image's four tries, none for the other two
    assert len(server.chat_requests()) == 6


@pytest.mark.parametrize("fault", ["slow", "400"])
def test_a_slow_or_rejected_image_does_not_stop_the_others(server, fault):
    """A timeout is not a refusal, nor a 4xx about one image: the next image is
    still sent."""
    if fault == "slow":
        server.add_fault("slow", 3.0, match="Caption picture 1", times=None)
    else:
        server.add_fault("400", match="Caption picture 1", times=None)

    def picture(i):
        return LLMRequest(key=f"img-{i}", template="caption/v1", json_mode=False, image=PNG,
                          messages=({"role": "user", "content": f"Caption picture {i}."},))

    with LLM(cfg(server, concurrency=1, timeout_s=0.5, max_retries=0)) as llm:
        res = llm.run([picture(1), picture(2)], stage="caption")
    assert not res[0].ok
    assert ("timeout" if fault == "slow" else "400") in res[0].error
    assert res[1].ok


def test_the_servers_wait_is_read_in_milliseconds_seconds_or_as_a_date():
    """retry-after-ms wins over Retry-After; a Retry-After that is neither a
    number nor a date names no wait (the backoff applies)."""
    from email.utils import formatdate

    from strata.core.llm.retry import server_wait_s

    assert server_wait_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert server_wait_s({"retry-after": "2"}) == 2.0
    assert server_wait_s({"retry-after": "soon"}) is None
    assert server_wait_s({}) is None
    in_a_minute = server_wait_s({"retry-after": formatdate(time.time() + 60, usegmt=True)})
    assert 58.0 <= in_a_minute <= 60.0
