"""A streamed ``/ask`` whose reader goes away stops the LLM's answer too: `strata
serve` on loopback, its LLM a real OpenAI-compatible HTTP server writing its
answer a word at a time, and a client that hangs up in the middle. The
upstream stream must be closed (generation is paid for by the token), not left
to run to its end with nobody reading."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.fake_openai import FakeOpenAI
from tests.serving.helpers import serve_process

WORDS = 4000  # at the pace below, minutes of answer: far longer than the test waits
PACE_S = 0.05


@pytest.fixture
def llm_server():
    with FakeOpenAI() as server:
        server.stream_delay = PACE_S
        server.reply = lambda body: " ".join(f"tide{i}" for i in range(WORDS))
        yield server


@pytest.fixture
def serve(sample_index, llm_server, tmp_path):
    with serve_process(sample_index, tmp_path / "server.log", "--llm-backend", "openai",
                       "--llm-base-url", llm_server.base_url, "--llm-model", "fake-model",
                       env={"OPENAI_API_KEY": "sk-stream-test",
                            "STRATA_LLM_BACKEND": "openai"}) as (base, _port, _proc):
        yield base


def _wait_for(condition, tries: int = 200, pause_s: float = 0.1) -> bool:
    """Poll ``condition`` a bounded number of times."""
    for _ in range(tries):
        if condition():
            return True
        time.sleep(pause_s)
    return condition()


def test_a_client_that_hangs_up_closes_the_upstream_stream(serve, llm_server):
    deltas = 0
    with httpx.Client(base_url=serve, timeout=60) as client:
        with client.stream("POST", "/ask", json={"question": "How is barometric drift corrected?",
                                                 "stream": True}) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line == "event: delta":
                    deltas += 1
                if deltas >= 3:
                    break  # the reader goes away in the middle of the answer
            assert llm_server.open_streams == 1  # the model is still writing
    assert deltas >= 3 and len(llm_server.chat_requests()) == 1
    # the service notices, and closes its stream to the model
    assert _wait_for(lambda: llm_server.open_streams == 0), \
        f"{llm_server.open_streams} upstream stream(s) still open after the client left"
    # and it still answers: nothing stuck behind the abandoned answer
    with httpx.Client(base_url=serve, timeout=60) as client:
        assert client.get("/health").status_code == 200
