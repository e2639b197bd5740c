"""A streamed ``/ask`` whose reader goes away stops the LLM's answer too: `strata
serve` on loopback, its LLM a real OpenAI-compatible HTTP server writing its
answer a word at a time, and a client that hangs up in the middle. The
upstream stream must be closed (generation is paid for by the token), not left
to run to its end with nobody reading."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import REPO
from tests.fake_openai import FakeOpenAI
from tests.serving.helpers import free_port

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
    port = free_port()
    log_path = tmp_path / "server.log"
    log = log_path.open("w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OPENAI_API_KEY": "sk-stream-test", "STRATA_LLM_BACKEND": "openai"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "strata.pipelines.cli", "serve", "--index", str(sample_index),
         "--port", str(port), "--llm-backend", "openai", "--llm-base-url", llm_server.base_url,
         "--llm-model", "fake-model"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(400):  # bounded: at most ~120 s of start-up
        if proc.poll() is not None:
            raise AssertionError(log_path.read_text()[-3000:])
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    else:
        proc.kill()
        raise AssertionError("strata serve did not answer /health")
    yield base
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    log.close()


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
