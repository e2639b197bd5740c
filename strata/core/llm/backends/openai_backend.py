"""The ``openai`` SDK against any OpenAI-compatible base URL (OpenAI, vLLM,
Ollama, llama.cpp's server, ...). The key is read from the environment variable
named by ``api_key_env``; it is never logged or written anywhere.

Retries (429, 5xx, timeouts, dropped connections; the server's ``Retry-After``)
are :mod:`strata.core.llm.retry`'s, through its :class:`RetryingOpenAI`, which
tells this backend of each one first: an HTTP answer resets the circuit breaker,
no answer counts towards it, a timeout lowers the requests in flight. Ours
alone: asking again without ``response_format`` (or ``stream_options``) when a
server refuses it, which the LLM's item loop does on :class:`FormatRejected`."""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from strata.core.config.urls import shown_url
from strata.core.llm.endpoints import EndpointError, describe_connection_error, probe, url_of
from strata.core.llm.backends.base import Backend
from strata.core.llm.errors import FormatRejected, RequestFailed
from strata.core.llm.prompts import est_tokens, image_mime, prompt_text

if TYPE_CHECKING:
    from strata.core.llm.backends.base import Host
    from strata.core.llm.config import LLMRequest

__all__ = ["OpenAIBackend"]

log = logging.getLogger(__name__)


class OpenAIBackend(Backend):
    def __init__(self, host: Host, fn: Callable[[str], str] | None = None,
                 vision_fn: Callable[[str, bytes], str] | None = None):
        super().__init__(host)
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._send_response_format = self.config.json_mode != "off"  # auto may turn it off
        # streamed answers ask for the server's token counts (a last chunk with ``usage``);
        # dropped for good if a server refuses the parameter
        self._send_stream_options = True

    @property
    def name(self) -> str:
        return f"openai:{self.config.model}"

    @property
    def endpoint(self) -> str:
        return shown_url(url_of(self.config.base_url))

    def probe(self) -> None:
        cfg = self.config
        probe("LLM", cfg.base_url, timeout_s=min(10.0, cfg.timeout_s), key_env=cfg.api_key_env)

    def busy(self) -> bool:
        """A local server that answers one request at a time (llama.cpp's, Ollama
        with one slot) times out requests queued behind a slow model while it
        answers ``GET /models`` at once: busy, not dead."""
        cfg = self.config
        try:
            # as long as a request may take: a CPU busy with a model answers late
            probe("LLM", cfg.base_url, timeout_s=min(60.0, cfg.timeout_s), key_env=cfg.api_key_env)
        except EndpointError:
            return False
        log.info("LLM endpoint %s timed out but answers: busy, not down", self.endpoint)
        return True

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    # ---- the client and its retries

    def _get_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                # lazy: the SDK is imported by the first request, not by the package
                from strata.core.llm.retry import RetryingOpenAI

                cfg = self.config
                self._client = RetryingOpenAI(
                    base_url=cfg.base_url,
                    api_key=os.environ.get(cfg.api_key_env) or "not-needed",
                    timeout=cfg.timeout_s,
                    max_retries=cfg.max_retries,
                    backoff_base_s=cfg.backoff_base_s,
                    backoff_max_s=cfg.backoff_max_s,
                    max_wait_s=cfg.backoff_max_s,
                    on_retry=self._on_retry,
                    why_stop=self.host.why_stop,
                    sleep=self.host.sleep,
                )
            return self._client

    def _on_retry(self, answer: Any, failure: BaseException | None, delay: float, n: int,
                  of: int) -> None:
        """A request of this thread's item is about to be retried: an HTTP answer
        (429, 5xx) resets the breaker, no answer counts towards it, and a timeout
        lowers the requests in flight."""
        host = self.host
        if answer is not None:
            host.answered()
            host.retrying(f"HTTP {answer.status_code}", delay, n, of)
            return
        problem = self._connection_problem(failure)
        if problem.startswith("does not answer"):  # timed out (not refused, not unresolved)
            host.throttle.timed_out()
        host.connection_failed(problem)
        host.retrying(f"no answer: the endpoint {problem}", delay, n, of)

    def _connection_problem(self, failure: BaseException | None) -> str:
        problem = describe_connection_error(failure)
        if failure is None or problem.startswith("does not answer"):
            return f"does not answer (timed out after {self.config.timeout_s:g}s)"
        return problem

    # ---- the request

    @staticmethod
    def _messages(req: LLMRequest) -> list[dict[str, Any]]:
        messages = [copy.deepcopy(dict(m)) for m in req.messages]
        if req.image is None:
            return messages
        url = f"data:{image_mime(req.image)};base64,{base64.b64encode(req.image).decode('ascii')}"
        part = {"type": "image_url", "image_url": {"url": url}}
        for m in reversed(messages):
            if m.get("role") == "user":
                c = m.get("content")
                if isinstance(c, list):
                    m["content"] = [*c, part]
                else:
                    m["content"] = ([{"type": "text", "text": c}] if c else []) + [part]
                break
        else:
            messages.append({"role": "user", "content": [part]})
        return messages

    def _kwargs(self, req: LLMRequest) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        kwargs: dict[str, Any] = {
            "model": cfg.model,
            "messages": self._messages(req),
            "temperature": cfg.temperature,
            "max_tokens": req.max_tokens if req.max_tokens is not None else cfg.max_tokens,
        }
        send_format = req.json_mode and (cfg.json_mode == "on" or (
            cfg.json_mode == "auto" and self._send_response_format))
        if send_format:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs, send_format

    @contextlib.contextmanager
    def _errors(self, send_format: bool = False, stream_options: bool = False):
        """The SDK's exceptions (the retries spent, or not worth retrying) as
        ours: a failure, or a refused ``response_format`` or ``stream_options``;
        every message redacted."""
        import openai

        cfg, redact = self.config, self.host.redact
        try:
            yield
        except openai.APIStatusError as e:
            status = e.status_code
            text = str(e.message)
            msg = redact(text if str(status) in text else f"HTTP {status}: {text}")
            if (status == 400 and send_format and cfg.json_mode == "auto"
                    and "response_format" in f"{e.message} {e.body}"):
                self._send_response_format = False
                raise FormatRejected(msg) from None
            if status == 400 and stream_options and "stream_options" in f"{e.message} {e.body}":
                self._send_stream_options = False
                raise FormatRejected(msg) from None
            raise RequestFailed(msg, status=status) from None  # the retries spent, or a 4xx
        except openai.APITimeoutError:
            self.host.throttle.timed_out()
            raise RequestFailed(f"timeout: no answer within {cfg.timeout_s:g}s",
                                connection=self._connection_problem(None)) from None
        except openai.APIConnectionError as e:
            cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
            raise RequestFailed(redact(f"connection error: {e}{cause}"),
                                connection=self._connection_problem(e)) from None
        except openai.APIError as e:
            raise RequestFailed(redact(f"{type(e).__name__}: {e}")) from None

    def call(self, req: LLMRequest) -> tuple[str | None, int, int]:
        client = self._get_client()
        kwargs, send_format = self._kwargs(req)
        throttle = self.host.throttle
        why = throttle.acquire(self.host.why_stop)
        if why:
            raise RequestFailed(f"not sent: {why}")
        try:
            with self._errors(send_format):
                resp = client.chat.completions.create(**kwargs)
        finally:
            throttle.release()
        choice = resp.choices[0] if resp.choices else None
        text = choice.message.content if choice is not None and choice.message else None
        if text is None:
            return None, 0, 0  # asked again by the item loop
        usage = getattr(resp, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        if pt is None:
            pt = est_tokens(prompt_text(req.messages))
        if ct is None:
            ct = est_tokens(text)
        return text, int(pt), int(ct)

    def stream(self, req: LLMRequest, usage: Callable[[int, int], None]) -> Iterator[str]:
        """The answer's pieces (``stream=True``); the server's token counts, when it
        sends them (the last chunk, asked for with ``stream_options``), go to ``usage``."""
        client = self._get_client()
        kwargs, send_format = self._kwargs(req)
        send_options = self._send_stream_options
        if send_options:
            kwargs["stream_options"] = {"include_usage": True}
        with self._errors(send_format, stream_options=send_options):
            chunks = client.chat.completions.create(**kwargs, stream=True)
            try:
                for chunk in chunks:
                    counts = getattr(chunk, "usage", None)
                    if counts is not None and getattr(counts, "prompt_tokens", None) is not None:
                        usage(int(counts.prompt_tokens), int(counts.completion_tokens or 0))
                    choice = chunk.choices[0] if chunk.choices else None
                    piece = choice.delta.content if choice is not None and choice.delta else None
                    if piece:
                        yield self.host.redact_key(piece)
            finally:
                chunks.close()
