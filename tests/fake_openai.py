"""A real HTTP, OpenAI-compatible server for tests (stdlib only, plus numpy).

    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
        server.reply = lambda body: '{"summary": "hi"}'
        server.add_fault("429", 2)                   # next request: 429 + Retry-After: 2
        server.add_fault("400", match="item 7", times=None)   # every request naming item 7

Endpoints:
- ``POST /v1/chat/completions``: a chat completion with ``usage``. The content comes
  from ``server.reply(body)`` (a str, or a dict/list sent as JSON); the default
  echoes a deterministic JSON object derived from the prompt. With
  ``response_format={"type": "json_object"}`` a non-JSON reply is wrapped as
  ``{"text": ...}``; with ``server.reject_response_format = True`` any request that
  sends ``response_format`` gets a 400 naming it.
- ``POST /v1/embeddings``: deterministic unit vectors (hash-seeded numpy),
  ``server.embedding_dim`` (default 8) or the request's ``dimensions``; honours
  ``encoding_format="base64"``.

With ``"stream": true`` a chat completion is sent as server-sent events, one
chunk per word of the reply (and, when the request asks with
``stream_options={"include_usage": true}``, a last chunk with ``usage`` and no
choices, as OpenAI, vLLM and Ollama send it), then ``data: [DONE]``; with
``server.reject_stream_options = True`` a request naming ``stream_options`` gets
a 400 naming it (a server that does not know the parameter); when ``server.stream_gate``
is a ``threading.Event`` the stream stops after half of its words until the
test sets it (a model caught in the middle of its answer); ``server.stream_delay``
(seconds, default 0) paces the words, as a model writes them, and
``server.open_streams`` counts the streamed replies being written now: one whose
client has gone ends at the next word it cannot send.

Every request is recorded in ``server.requests`` (:class:`Recorded`: path, body,
prompt, headers, monotonic ``time``, the fault applied).

Faults (``server.faults``, consumed in order by matching requests; a plain tuple
applies once to the next request, :class:`Fault` adds ``match`` — a substring of
the prompt — and ``times`` — ``None`` for forever):
``("429", retry_after)`` (or ``("429", {header: value})``), ``("500",)``, ``("400",)`` (plain bad request),
``("401",)`` (echoes the Authorization header in the error, like a careless
server; ``("401", encode)`` echoes ``encode(key)``, a str -> str, instead),
``("slow", seconds)``, ``("truncated",)``, ``("malformed",)``,
``("400_response_format",)``, ``("drop",)`` (close without answering). ``path=``
limits a fault to one endpoint (``"/embeddings"``, ``"/chat/completions"``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from collections.abc import Callable

import numpy as np

__all__ = ["FakeOpenAI", "Fault", "Recorded", "prompt_of"]


@dataclass
class Fault:
    kind: str
    args: tuple = ()
    match: str | None = None  # substring of the prompt; None matches any request
    times: int | None = 1  # None: never consumed
    path: str | None = None  # only requests to this endpoint ("/embeddings", "/chat/completions")


@dataclass
class Recorded:
    path: str
    body: dict
    prompt: str
    headers: dict  # names lower-cased
    time: float  # time.monotonic() when the request arrived
    fault: str | None = None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and p.get("type") == "text")
    return ""


def prompt_of(body: dict) -> str:
    """The text a request carries: chat message texts, or the embedding inputs."""
    if "messages" in body:
        return "\n\n".join(_text(m.get("content")) for m in body["messages"])
    inp = body.get("input", "")
    return "\n".join(inp) if isinstance(inp, list) else str(inp)


def default_reply(body: dict) -> str:
    prompt = prompt_of(body)
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:12]
    return json.dumps({"summary": f"summary-{digest}", "chars": len(prompt),
                       "echo": prompt[-40:]})


class FakeOpenAI:
    def __init__(self, embedding_dim: int = 8):
        self.reply: Callable[[dict], Any] = default_reply
        self.faults: list[Fault | tuple] = []
        self.requests: list[Recorded] = []
        self.reject_response_format = False
        self.reject_stream_options = False
        self.embedding_dim = embedding_dim
        self.model = "fake-model"
        self.stream_gate: threading.Event | None = None
        self.stream_delay = 0.0  # seconds between the words of a streamed reply
        self.open_streams = 0  # streamed replies being written now
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeOpenAI:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # ---- helpers for tests

    def add_fault(self, kind: str, *args: Any, match: str | None = None,
                  times: int | None = 1, path: str | None = None) -> None:
        with self._lock:
            self.faults.append(Fault(kind, tuple(args), match, times, path))

    def chat_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def take_fault(self, prompt: str, path: str = "") -> Fault | None:
        with self._lock:
            for i, f in enumerate(self.faults):
                if not isinstance(f, Fault):
                    f = self.faults[i] = Fault(f[0], tuple(f[1:]))
                if f.path is not None and not path.rstrip("/").endswith(f.path):
                    continue
                if f.match is None or f.match in prompt:
                    if f.times is not None:
                        f.times -= 1
                        if f.times <= 0:
                            del self.faults[i]
                    return f
        return None

    def record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # ---- plumbing

    def _send(self, status: int, payload: Any, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True  # the client gave up (timeout)

    def _error(self, status: int, message: str, etype: str, headers: dict | None = None,
               param: str | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": etype, "param": param,
                                      "code": None}}, headers)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "body is not JSON", "invalid_request_error")
            return
        prompt = prompt_of(body)
        rec = Recorded(self.path, body, prompt, {k.lower(): v for k, v in self.headers.items()},
                       time.monotonic())
        fault = self.fake.take_fault(prompt, self.path)
        rec.fault = fault.kind if fault else None
        self.fake.record(rec)
        if self.path.rstrip("/").endswith("/chat/completions"):
            self._chat(body, prompt, fault)
        elif self.path.rstrip("/").endswith("/embeddings"):
            self._embeddings(body, fault)
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def _common_fault(self, fault: Fault | None) -> bool:
        """Apply transport/status faults; True when the response has been sent (or dropped)."""
        if fault is None:
            return False
        kind = fault.kind
        if kind == "slow":
            self.fake.sleep(float(fault.args[0]) if fault.args else 2.0)
            return False  # then answer normally (usually to a client that has gone)
        if kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return True
        if kind == "429":
            ra = fault.args[0] if fault.args else 1
            self._error(429, "Rate limit reached", "rate_limit_error",
                        headers=ra if isinstance(ra, dict) else {"Retry-After": ra})
            return True
        if kind in ("500", "502", "503"):
            self._error(int(kind), "The server had an error", "server_error")
            return True
        if kind == "400":
            self._error(400, "Invalid request (injected)", "invalid_request_error")
            return True
        if kind == "401":
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if fault.args and callable(fault.args[0]):
                key = fault.args[0](key)  # a server that echoes it encoded
            self._error(401, f"Incorrect API key provided: {key}", "invalid_request_error")
            return True
        if kind == "400_response_format":
            self._response_format_error()
            return True
        return False

    def _response_format_error(self) -> None:
        self._error(400, "Invalid parameter: 'response_format' of type 'json_object' is not "
                         "supported with this model.", "invalid_request_error",
                    param="response_format")

    # ---- endpoints

    def _chat(self, body: dict, prompt: str, fault: Fault | None) -> None:
        if self._common_fault(fault):
            return
        wants_json = (body.get("response_format") or {}).get("type") == "json_object"
        if wants_json and self.fake.reject_response_format:
            self._response_format_error()
            return
        if "stream_options" in body and self.fake.reject_stream_options:
            self._error(400, "Unrecognized request argument supplied: stream_options",
                        "invalid_request_error", param="stream_options")
            return
        kind = fault.kind if fault else None
        finish = "stop"
        if kind == "truncated":
            content = '{"summary": "abc'
            finish = "length"
        elif kind == "malformed":
            content = "Sure! Here is the summary: the document explains things."
        else:
            out = self.fake.reply(body)
            if isinstance(out, (dict, list)):
                content = json.dumps(out)
            else:
                content = str(out)
                if wants_json:
                    try:
                        json.loads(content)
                    except ValueError:
                        content = json.dumps({"text": content})
        pt = max(1, len(prompt) // 4)
        ct = max(1, len(content) // 4)
        if body.get("stream"):
            usage = ({"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
                     if (body.get("stream_options") or {}).get("include_usage") else None)
            self._stream(body, prompt, content, finish, usage)
            return
        self._send(200, {
            "id": f"chatcmpl-{hashlib.sha1(prompt.encode()).hexdigest()[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.fake.model),
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        })

    def _stream(self, body: dict, prompt: str, content: str, finish: str,
                usage: dict | None = None) -> None:
        """The reply as chat.completion.chunk events, one per word (then ``usage``)."""
        import re

        words = re.findall(r"\S+\s*|\s+", content) or [""]
        cid = f"chatcmpl-{hashlib.sha1(prompt.encode()).hexdigest()[:16]}"

        def event(delta: dict, reason: str | None = None) -> bytes:
            chunk = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": body.get("model", self.fake.model),
                     "choices": [{"index": 0, "delta": delta, "finish_reason": reason,
                                  "logprobs": None}]}
            return f"data: {json.dumps(chunk)}\n\n".encode()

        with self.fake._lock:
            self.fake.open_streams += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(event({"role": "assistant", "content": ""}))
            for n, word in enumerate(words):
                if self.fake.stream_gate is not None and n == len(words) // 2:
                    self.wfile.flush()
                    while not self.fake.stream_gate.wait(0.05):
                        if self.fake._stop.is_set():
                            return
                if self.fake.stream_delay and self.fake._stop.wait(self.fake.stream_delay):
                    return
                self.wfile.write(event({"content": word}))
                self.wfile.flush()
            self.wfile.write(event({}, finish))
            if usage is not None:
                last = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": body.get("model", self.fake.model), "choices": [],
                        "usage": usage}
                self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True
        finally:
            with self.fake._lock:
                self.fake.open_streams -= 1

    def _embeddings(self, body: dict, fault: Fault | None) -> None:
        if self._common_fault(fault):
            return
        inp = body.get("input", [])
        texts = [inp] if isinstance(inp, str) else list(inp)
        dim = int(body.get("dimensions") or self.fake.embedding_dim)
        data = []
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(str(t).encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
            v /= max(float(np.linalg.norm(v)), 1e-12)
            if body.get("encoding_format") == "base64":
                emb: Any = base64.b64encode(v.astype("<f4").tobytes()).decode()
            else:
                emb = [float(x) for x in v]
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(max(1, len(str(t)) // 4) for t in texts)
        self._send(200, {"object": "list", "data": data, "model": body.get("model", "fake"),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
