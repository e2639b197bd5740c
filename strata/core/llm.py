"""The LLM every enrichment stage (and `ask`) shares: three backends, one cache.

Backends:
- ``openai``: the ``openai`` SDK against any OpenAI-compatible base URL
  (OpenAI, vLLM, Ollama, ...). Key read from the environment variable named by
  ``api_key_env``; never logged or written anywhere.
- ``callable``: a user-injected ``fn(prompt: str) -> str`` (and optionally
  ``vision_fn(prompt: str, image: bytes) -> str``).
- ``offline`` (default): no model at all. ``LLM.offline`` is True and each
  stage uses its own deterministic stand-in (extractive summaries, heuristic
  OpenIE, captions from alt text and context) instead of calling ``run``.

Everything goes through :meth:`LLM.run`: a bounded thread pool, a content-addressed
SQLite cache (:mod:`strata.core.llm_cache`; only successes are stored, each committed at
once, so rerunning an interrupted stage only calls the backend for what is missing),
retries, per-item failure isolation, and tolerant JSON parsing (:func:`parse_json`,
:mod:`strata.core.llm_json`). Before a stage's first uncached call the endpoint is
probed, and a run of connection failures with no answer trips a circuit breaker
(:mod:`strata.core.endpoints`): a dead server stops the stage in seconds.

Retries: the openai backend uses the SDK's own (what is worth retrying, its
backoff, the server's ``Retry-After``), through :class:`strata.core.openai_client.RetryingOpenAI`,
which tells this object of each one (the stats, the breaker) and cuts the wait
short when the build stops, the LLM closes or the breaker trips. The callable
backend's exceptions are retried with tenacity on the same terms. Ours alone:
asking again without ``response_format`` when a server refuses it, and asking
again when an answer does not parse.

Over 600 lines, on purpose: the item loop, the breaker, both backends and the
streamed answer (:meth:`LLM.stream`) share one object's state (stats, the cache,
the closed and tripped events, the client, the key redaction); what needs none
of it lives beside it (``llm_cache``, ``llm_json``, ``endpoints``,
``openai_client``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strata.core import stopping
from strata.core.endpoints import (EndpointError, describe_connection_error, probe, redact,
                              redact_key, unreachable_hint, url_of)
from strata.core.llm_cache import ResponseCache, cache_key
from strata.core.llm_json import parse_json
from strata.core.settings import LLMSettings, default, load
from strata.core.llm_throttle import Throttle
from strata.core.stopping import RetryAbandoned

__all__ = ["LLM", "LLMConfig", "LLMRequest", "LLMResult", "LLMStreamError", "StageStats",
           "parse_json", "image_mime", "quote_data", "EndpointError"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMRequest:
    """One call. ``key`` names the item (a node id) for failure records."""

    key: str
    messages: tuple[dict[str, Any], ...]  # OpenAI chat messages; text content only
    template: str  # prompt template name + version, e.g. "summarize/v1": part of the cache key
    json_mode: bool = False
    max_tokens: int | None = None
    image: bytes | None = None  # sent as an image content part (vision)


@dataclass
class LLMResult:
    key: str
    text: str | None  # raw model output (None on failure)
    value: Any = None  # parse(text) when a parser was given
    error: str | None = None
    attempts: int = 0
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class StageStats:
    calls: int = 0  # requests that reached the backend (not cached)
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    seconds: float = 0.0
    failed_keys: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- config

BACKENDS = ("offline", "openai", "callable")
JSON_MODES = ("auto", "on", "off")


def _default(name: str) -> Any:
    return default(LLMSettings, name)


@dataclass
class LLMConfig:
    """One LLM's settings. The ones a user sets (backend ... max_retries) take
    their defaults from :class:`strata.core.settings.LLMSettings`, where they are
    declared with their variables and bounds; :meth:`from_settings` builds one
    from it."""

    backend: str = _default("backend")  # offline | openai | callable
    model: str = _default("model")
    base_url: str | None = None
    api_key_env: str = _default("api_key_env")  # the *name* of the variable; the key is never stored
    temperature: float = _default("temperature")
    max_tokens: int = _default("max_tokens")
    concurrency: int = _default("concurrency")  # bounded worker pool
    timeout_s: float = _default("timeout_s")  # per request (openai backend)
    # retries of 408/409/429/5xx, timeouts and dropped connections (openai: the SDK's,
    # waiting its own backoff or the server's Retry-After), or of the callable's exceptions
    max_retries: int = _default("max_retries")
    backoff_base_s: float = 0.5  # callable backend: backoff drawn from [0, base·2^n] ...
    backoff_max_s: float = 30.0  # ... and no wait between two attempts longer (either backend)
    # auto | on | off: send response_format={"type": "json_object"} for json_mode requests;
    # auto drops it for good once the server rejects it with a 400 naming response_format
    json_mode: str = "auto"
    parse_retries: int = 2  # extra calls when the output does not parse
    # the endpoint is probed (one GET /models) before a stage's first uncached call,
    # and the stage stops after this many connection failures in a row with no answer
    # in between (0: never): a dead endpoint fails in seconds, not after every item's
    # retries
    probe: bool = True
    breaker_failures: int = 8

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown LLM backend {self.backend!r} (expected one of {BACKENDS})")
        if self.json_mode not in JSON_MODES:
            raise ValueError(f"unknown json_mode {self.json_mode!r} (expected one of {JSON_MODES})")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")

    @classmethod
    def from_settings(cls, s: LLMSettings, **over: Any) -> LLMConfig:
        """From a :class:`strata.core.settings.LLMSettings`; ``over`` wins."""
        fields = ("backend", "model", "base_url", "api_key_env", "temperature", "max_tokens",
                  "concurrency", "timeout_s", "max_retries")
        return cls(**{**{f: getattr(s, f) for f in fields}, **over})


# --------------------------------------------------------------------------- helpers

class _Transient(Exception):
    """The callable backend raised: retried (tenacity) like a transient HTTP failure."""


class _Failed(Exception):
    """An item's request failed for good (its retries spent, or not worth retrying).
    ``connection``: there was no answer at all (refused, reset, timed out), which the
    circuit breaker counts; an HTTP answer of any status resets it. ``status``: that
    answer's HTTP status, when the server gave one."""

    def __init__(self, message: str, connection: str | None = None, status: int | None = None):
        super().__init__(message)
        self.connection = connection
        self.status = status


def _refuses_images(status: int | None, message: str) -> bool:
    """Whether an image request's final HTTP error says the endpoint takes no
    images at all: a server error (llama.cpp's server with a text-only model
    answers every image with a 500), or a 4xx naming what it does not support
    (a text-only model behind OpenAI's API). A timeout (no status) is not a
    refusal, nor a 4xx about one image (too large, undecodable)."""
    if status is None:
        return False
    if status >= 500:
        return True
    text = message.lower()
    return status in (400, 404, 415, 422) and any(
        w in text for w in ("not support", "unsupported", "vision", "multimodal", "multi-modal"))


class _FormatRejected(Exception):
    """The server refused ``response_format``; ask again at once without it."""


# an opening or closing tag of the prompts' <data> delimiter as a model may read it:
# any case, spaces or line breaks around the slash and the name, attributes
_DATA_TAG = re.compile(r"<\s*/?\s*data\b[^>]*>", re.IGNORECASE)


def quote_data(text: str | None) -> str:
    """Document text (a section, a breadcrumb, the words around an image) for the
    inside of a prompt's ``<data>`` block: the one helper every prompt that quotes
    corpus text in such a block goes through, so that no document can close the
    block early (or open a new one) and have what follows read as instructions.

    Models do not read tags the way a parser does: ``</DATA>``, ``</data >`` and
    ``</data\n>`` end the block for them as surely as ``</data>``. So every tag
    of the delimiter, in any case and spacing, keeps its text but loses its
    angle brackets (``&lt;/data&gt;``), which no reading takes for a tag."""
    return _DATA_TAG.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"),
                         text or "")


def image_mime(data: bytes) -> str:
    """MIME type of an image from its magic bytes (PNG when unknown)."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/png"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and p.get("type", "text") == "text")
    return str(content)


def _prompt_text(messages: Sequence[dict[str, Any]]) -> str:
    """Text contents joined with blank lines, system messages first."""
    ordered = sorted(messages, key=lambda m: 0 if m.get("role") == "system" else 1)
    return "\n\n".join(t for t in (_content_text(m.get("content")) for m in ordered) if t)


def _est_tokens(text: str) -> int:
    return (len(text) + 3) // 4


# --------------------------------------------------------------------------- the LLM

class LLM:
    """One configured model shared by the enrichment stages (see the module docstring)."""

    def __init__(self, config: LLMConfig, cache_path: str | Path | None = None,
                 fn: Callable[[str], str] | None = None,
                 vision_fn: Callable[[str, bytes], str] | None = None):
        self.config = config
        if config.backend == "callable" and fn is None and vision_fn is None:
            raise ValueError("callable backend needs fn (and/or vision_fn)")
        self._fn = fn
        self._vision_fn = vision_fn
        self._cache = ResponseCache(cache_path)
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._stats: dict[str, StageStats] = {}
        self._stats_lock = threading.Lock()
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._send_response_format = config.json_mode != "off"  # auto may turn it off
        # streamed answers ask for the server's token counts (a last chunk with ``usage``);
        # dropped for good if a server refuses the parameter
        self._send_stream_options = True
        self._closed = threading.Event()
        # the circuit breaker: connection failures in a row, and why the last one failed
        self._breaker_lock = threading.Lock()
        self._failures_in_a_row = 0
        self._last_connection_problem = ""
        self._tripped = threading.Event()
        # why images are no longer sent (an endpoint that failed one after its retries,
        # e.g. llama.cpp's server with a text-only model answers each with a 500):
        # the other images fail at once instead of spending the same retries
        self._images_refused: str | None = None
        self._tripped_after = 0
        self._probed = False
        # the item a worker thread is on (the SDK's retries are reported on that thread)
        self._item = threading.local()
        # requests in flight (openai backend): ``concurrency``, halved on each timeout
        self._throttle = Throttle(config.concurrency, on_change=self._throttled)

    # ---- identity

    @property
    def offline(self) -> bool:
        return self.config.backend == "offline"

    @property
    def name(self) -> str:
        b = self.config.backend
        if b == "openai":
            return f"openai:{self.config.model}"
        if b == "callable":
            f = self._fn or self._vision_fn
            return f"callable:{getattr(f, '__qualname__', type(f).__name__)}"
        return "offline"

    def __repr__(self) -> str:  # never shows the key: only the variable's name is known here
        return f"LLM({self.name!r}, base_url={self.config.base_url!r})"

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- secrets

    def _redact_key(self, text: str) -> str:
        return redact_key(text, self.config.api_key_env)

    def _redact(self, text: str) -> str:
        """For error and log text: the key's value and any bearer token become ``***``."""
        return redact(text, self.config.api_key_env)

    # ---- the endpoint: probe and circuit breaker

    @property
    def endpoint(self) -> str:
        return url_of(self.config.base_url) if self.config.backend == "openai" else self.name

    def _probe(self) -> None:
        """Once per LLM, before the first call a stage cannot answer from the cache."""
        if self._probed or self.config.backend != "openai" or not self.config.probe:
            return
        probe("LLM", self.config.base_url, timeout_s=min(10.0, self.config.timeout_s),
              key_env=self.config.api_key_env)
        self._probed = True

    def _answered(self) -> None:
        with self._breaker_lock:
            self._failures_in_a_row = 0

    def _connection_failed(self, problem: str) -> None:
        limit = self.config.breaker_failures
        if problem.startswith("does not answer") and self._busy_not_dead():
            return
        with self._breaker_lock:
            self._failures_in_a_row += 1
            self._last_connection_problem = problem
            if limit and self._failures_in_a_row >= limit and not self._tripped.is_set():
                self._tripped_after = self._failures_in_a_row
                self._tripped.set()

    def _busy_not_dead(self) -> bool:
        """After a timeout: does the endpoint still answer a cheap request? A local
        server that answers one request at a time (llama.cpp's, Ollama with one
        slot) times out requests queued behind a slow model while it answers
        ``GET /models`` at once: busy, which the throttle deals with, not dead,
        which the breaker is for (seen in ``make e2e-llm``: SmolLM2 on a loaded
        CPU tripped the breaker with 8 queued requests before its first answer)."""
        if self.config.backend != "openai":
            return False
        try:
            # as long as a request may take: a CPU busy with a model answers late
            probe("LLM", self.config.base_url, timeout_s=min(60.0, self.config.timeout_s),
                  key_env=self.config.api_key_env)
        except EndpointError:
            return False
        log.info("LLM endpoint %s timed out but answers: busy, not down", self.endpoint)
        return True

    def _why_stop(self) -> str | None:
        """Why no (further) request should be sent for an item, or None."""
        if self._closed.is_set():
            return "the LLM was closed"
        if self._tripped.is_set():
            return str(self._breaker_error())
        why = stopping.requested()
        return f"the build is stopping ({why})" if why else None

    def _breaker_error(self) -> EndpointError:
        problem = self._last_connection_problem or "cannot be reached (connection error)"
        return EndpointError(
            "LLM", self.endpoint,
            f"{problem}: {self._tripped_after} requests in a row got no answer",
            unreachable_hint("LLM", self.endpoint))

    # ---- stats

    def _bump(self, stage: str, **deltas: float) -> None:
        with self._stats_lock:
            st = self._stats.setdefault(stage, StageStats())
            for k, v in deltas.items():
                setattr(st, k, getattr(st, k) + v)

    def _fail_key(self, stage: str, key: str) -> None:
        with self._stats_lock:
            st = self._stats.setdefault(stage, StageStats())
            st.failures += 1
            st.failed_keys.append(key)

    def stats(self, stage: str) -> StageStats:
        """A snapshot of the cumulative counters of ``stage`` for this object."""
        with self._stats_lock:
            st = self._stats.get(stage) or StageStats()
            return dataclasses.replace(st, failed_keys=list(st.failed_keys))

    def all_stats(self) -> dict[str, StageStats]:
        with self._stats_lock:
            names = list(self._stats)
        return {s: self.stats(s) for s in names}

    # ---- keys

    def _max_tokens(self, req: LLMRequest) -> int:
        return req.max_tokens if req.max_tokens is not None else self.config.max_tokens

    def _key(self, req: LLMRequest) -> str:
        return cache_key(backend=self.name, model=self.config.model,
                         messages=[dict(m) for m in req.messages], image=req.image,
                         temperature=self.config.temperature, max_tokens=self._max_tokens(req),
                         json_mode=req.json_mode, template=req.template)

    # ---- public API

    def estimate(self, requests: Sequence[LLMRequest], stage: str | None = None,
                 typical_completion_tokens: int = 100, image_tokens: int = 765) -> dict:
        """Dry run: how many requests the cache answers and roughly what the rest
        cost. Prompt tokens: ~4 characters a token, plus ``image_tokens`` per
        image. Completion tokens: per template, the mean of its answers in the
        cache, else ``typical_completion_tokens`` (at most the request's
        max_tokens)."""
        reqs = list(requests)
        keys = [self._key(r) for r in reqs]
        hits = self._cache.contains(list(set(keys)))
        uncached = [(r, k) for r, k in zip(reqs, keys) if k not in hits]
        completion = 0.0
        seen_basis: set[str] = set()
        per_template: dict[str, tuple[int, float]] = {}
        for r, _ in uncached:
            if r.template not in per_template:
                per_template[r.template] = self._cache.completion_history(r.template)
            n, mean = per_template[r.template]
            each = mean if n else min(typical_completion_tokens, self._max_tokens(r))
            seen_basis.add(f"{r.template}: mean of {n} cached answers ({mean:.0f})" if n
                           else f"{r.template}: assumed {each:.0f}")
            completion += each
        return {
            "stage": stage,
            "requests": len(reqs),
            "cached": len(reqs) - len(uncached),
            "calls_needed": len(uncached),
            "unique_calls_needed": len({k for _, k in uncached}),
            "est_prompt_tokens": sum(_est_tokens(_prompt_text(r.messages))
                                     + (image_tokens if r.image else 0) for r, _ in uncached),
            "est_completion_tokens": int(round(completion)),
            "completion_basis": ", ".join(sorted(seen_basis)) or "none needed",
        }

    def cached_text(self, req: LLMRequest) -> str | None:
        """The cached answer to ``req``, if any (a dry run builds the requests that
        depend on earlier answers from them)."""
        hit = self._cache.get(self._key(req))
        return hit.text if hit is not None else None

    def run(self, requests: Sequence[LLMRequest], *, stage: str,
            parse: Callable[[str], Any] | None = None,
            progress: Callable[[int, int], None] | None = None) -> list[LLMResult]:
        """Answer ``requests`` (results in the same order). Item failures never raise."""
        if self.offline:
            raise RuntimeError("offline backend: the stage must use its offline stand-in")
        if self._closed.is_set():
            raise RuntimeError("LLM is closed")
        t0 = time.monotonic()
        reqs = list(requests)
        total = len(reqs)
        results: list[LLMResult | None] = [None] * total
        done = 0
        self._bump(stage)  # the stage exists in stats even when everything is cached

        pending: dict[str, list[int]] = {}  # cache key -> request indices (first one is called)
        for i, req in enumerate(reqs):
            k = self._key(req)
            if k in pending:
                pending[k].append(i)
                continue
            hit = self._cache.get(k)
            if hit is not None:
                try:
                    value = parse(hit.text) if parse is not None else None
                except Exception:  # noqa: BLE001 - the parser changed: treat as a miss
                    hit = None
                if hit is not None:
                    results[i] = LLMResult(key=req.key, text=hit.text, value=value, attempts=0,
                                           cached=True, prompt_tokens=hit.prompt_tokens,
                                           completion_tokens=hit.completion_tokens)
                    self._bump(stage, cache_hits=1)
                    done += 1
                    continue
            pending[k] = [i]
        if progress is not None and done:
            progress(done, total)

        try:
            if pending:
                if self._tripped.is_set():
                    raise self._breaker_error()
                self._probe()  # EndpointError: nothing is sent, nothing is recorded as failed
                workers = max(1, min(self.config.concurrency, len(pending)))
                ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"llm-{stage}")
                try:
                    futs = {ex.submit(self._process, reqs[idx[0]], k, stage, parse): k
                            for k, idx in pending.items()}
                    for fut in _completed(futs, self._tripped):
                        idx = pending[futs[fut]]
                        res = fut.result()  # _process never raises for item failures
                        for n, i in enumerate(idx):
                            if n == 0:
                                r = res
                            elif res.ok:  # a duplicate: answered by the first one's call
                                r = dataclasses.replace(res, key=reqs[i].key, attempts=0,
                                                        cached=True)
                                self._bump(stage, cache_hits=1)
                            else:
                                r = dataclasses.replace(res, key=reqs[i].key)
                            if not r.ok:
                                self._fail_key(stage, r.key)
                            results[i] = r
                        done += len(idx)
                        if progress is not None:
                            progress(done, total)
                except BaseException:
                    # interrupted: drop what has not started; finished items are cached already
                    ex.shutdown(wait=False, cancel_futures=True)
                    raise
                if self._tripped.is_set():
                    # the endpoint stopped answering: the items still queued are not tried
                    ex.shutdown(wait=False, cancel_futures=True)
                    raise self._breaker_error()
                ex.shutdown(wait=True)
        finally:
            self._bump(stage, seconds=time.monotonic() - t0)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        self._closed.set()
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass
        self._cache.close()

    # ---- one item

    def _process(self, req: LLMRequest, key: str, stage: str,
                 parse: Callable[[str], Any] | None) -> LLMResult:
        cfg = self.config
        item = self._item  # this thread's: the backend's retries count here
        item.stage, item.key, item.retries, item.last = stage, req.key, 0, ""
        calls = unusable = 0
        spent_prompt = spent_completion = 0

        def fail(msg: str) -> LLMResult:
            attempts = calls + item.retries
            msg = self._redact(msg)
            log.warning("LLM %s: %s failed after %d attempt(s): %s", stage, req.key, attempts, msg)
            return LLMResult(key=req.key, text=None, error=msg, attempts=attempts,
                             prompt_tokens=spent_prompt, completion_tokens=spent_completion)

        try:
            while True:
                why = self._why_stop()
                if why:
                    return fail(f"not sent: {why}")
                if req.image is not None and self._images_refused:
                    return fail(f"not sent: {self._images_refused}")
                if calls == 0:
                    self._bump(stage, calls=1)
                calls += 1
                try:
                    text, pt, ct = self._call(req)
                except _FormatRejected as e:
                    log.warning("LLM %s: server rejects response_format; not sending it again (%s)",
                                stage, self._redact(str(e)))
                    self._bump(stage, retries=1)
                    continue
                except RetryAbandoned as e:  # the stop came while it waited to retry:
                    item.retries -= 1         # the retry it announced was not made
                    self._bump(stage, retries=-1)
                    return fail(f"{item.last}; not retried: {e}")
                except _Failed as e:
                    if e.connection:
                        self._connection_failed(e.connection)
                    else:
                        self._answered()  # an HTTP answer, even a 500: the server is there
                        if req.image is not None and self._images_refused is None \
                                and _refuses_images(e.status, str(e)):
                            self._images_refused = (
                                f"the endpoint failed an image request after its retries "
                                f"({self._redact(str(e))[:200]}); no more images are sent to it "
                                "this run")
                            log.warning("LLM %s: %s", stage, self._images_refused)
                    return fail(str(e))
                self._answered()
                value, problem = None, None
                if text is None:
                    problem = "empty response (no message content)"
                else:
                    text = self._redact_key(text)  # a model echoing the key must not cache it
                    spent_prompt += pt
                    spent_completion += ct
                    self._bump(stage, prompt_tokens=pt, completion_tokens=ct)
                    if parse is not None:
                        try:
                            value = parse(text)
                        except Exception as e:  # noqa: BLE001 - any parser failure
                            problem = f"parse error: {e}"
                if problem is not None:  # an answer we cannot use: ask again, a few times
                    if unusable >= cfg.parse_retries:
                        return fail(problem)
                    unusable += 1
                    self._bump(stage, retries=1)
                    log.info("LLM %s: %s: %s; asking again", stage, req.key, self._redact(problem))
                    continue
                try:
                    self._cache.put(key, text, pt, ct, backend=self.name, template=req.template,
                                    stage=stage)
                except Exception as e:  # noqa: BLE001 - the answer is still good
                    log.warning("LLM %s: could not cache %s: %s", stage, req.key, e)
                return LLMResult(key=req.key, text=text, value=value,
                                 attempts=calls + item.retries, prompt_tokens=pt,
                                 completion_tokens=ct)
        except Exception as e:  # noqa: BLE001 - isolation: a bug for one item fails that item
            return fail(f"{type(e).__name__}: {e}")

    def _retrying(self, what: str, delay: float, n: int, of: int) -> None:
        """A retry of this thread's item is about to wait ``delay`` seconds."""
        item = self._item
        item.retries += 1
        item.last = what
        self._bump(item.stage, retries=1)
        log.info("LLM %s: %s: %s; retry %d/%d in %.2fs", item.stage, item.key,
                 self._redact(what), n, of, delay)

    def _wait_to_retry(self, seconds: float) -> None:
        why = stopping.sleep(seconds, self._why_stop)
        if why:
            raise RetryAbandoned(why)

    def _call(self, req: LLMRequest) -> tuple[str | None, int, int]:
        if self.config.backend == "openai":
            return self._call_openai(req)
        if self.config.backend == "callable":
            return self._call_callable(req)
        raise RuntimeError("offline backend: the stage must use its offline stand-in")

    # ---- callable backend

    def _call_callable(self, req: LLMRequest) -> tuple[str, int, int]:
        """The user's function, its exceptions retried (tenacity): full-jitter
        exponential backoff, a wait that ends when the build stops."""
        import tenacity  # lazy: only the callable backend retries with it

        cfg = self.config
        prompt = _prompt_text(req.messages)
        if req.image is not None:
            if self._vision_fn is None:
                raise _Failed("no vision_fn configured")
            target: Callable[[], Any] = lambda: self._vision_fn(prompt, req.image)  # noqa: E731
        else:
            if self._fn is None:
                raise _Failed("no fn configured (only vision_fn)")
            target = lambda: self._fn(prompt)  # noqa: E731

        def once() -> Any:
            try:
                return target()
            except Exception as e:  # noqa: BLE001 - user code: retried like a transient error
                raise _Transient(self._redact(f"{type(e).__name__}: {e}")) from None

        def before_sleep(state: tenacity.RetryCallState) -> None:
            self._retrying(str(state.outcome.exception()), state.upcoming_sleep,
                           state.attempt_number, cfg.max_retries)

        try:
            out = tenacity.Retrying(
                stop=tenacity.stop_after_attempt(cfg.max_retries + 1),
                wait=tenacity.wait_random_exponential(multiplier=cfg.backoff_base_s,
                                                      max=cfg.backoff_max_s),
                retry=tenacity.retry_if_exception_type(_Transient),
                before_sleep=before_sleep, sleep=self._wait_to_retry, reraise=True,
            )(once)
        except _Transient as e:
            raise _Failed(str(e)) from None
        if not isinstance(out, str):
            raise _Failed(f"callable returned {type(out).__name__}, expected str")
        return out, _est_tokens(prompt), _est_tokens(out)

    # ---- openai backend

    def _get_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                # lazy: only the openai backend needs the SDK
                from strata.core.openai_client import RetryingOpenAI

                self._client = RetryingOpenAI(
                    base_url=self.config.base_url,
                    api_key=os.environ.get(self.config.api_key_env) or "not-needed",
                    timeout=self.config.timeout_s,
                    max_retries=self.config.max_retries,
                    max_wait_s=self.config.backoff_max_s,
                    on_retry=self._sdk_retry,
                    why_stop=self._why_stop,
                )
            return self._client

    def _throttled(self, old: int, new: int) -> None:
        log.warning("LLM endpoint %s timed out: sending %d request(s) at a time instead of %d "
                    "(a server that answers one at a time queues the rest; see the local-server "
                    "notes in docs/guides/llm-backends.md)", self.endpoint, new, old)

    def _sdk_retry(self, answer: Any, failure: BaseException | None, delay: float, n: int,
                   of: int) -> None:
        """The SDK is about to retry this thread's item: an HTTP answer (429, 5xx)
        resets the breaker, no answer counts towards it, and a timeout lowers the
        requests in flight."""
        if answer is not None:
            self._answered()
            self._retrying(f"HTTP {answer.status_code}", delay, n, of)
            return
        problem = self._connection_problem(failure)
        if problem.startswith("does not answer"):  # timed out (not refused, not unresolved)
            self._throttle.timed_out()
        self._connection_failed(problem)
        self._retrying(f"no answer: the endpoint {problem}", delay, n, of)

    def _connection_problem(self, failure: BaseException | None) -> str:
        problem = describe_connection_error(failure)
        if failure is None or problem.startswith("does not answer"):
            return f"does not answer (timed out after {self.config.timeout_s:g}s)"
        return problem

    @staticmethod
    def _openai_messages(req: LLMRequest) -> list[dict[str, Any]]:
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

    def _openai_kwargs(self, req: LLMRequest) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        kwargs: dict[str, Any] = {
            "model": cfg.model,
            "messages": self._openai_messages(req),
            "temperature": cfg.temperature,
            "max_tokens": self._max_tokens(req),
        }
        send_format = req.json_mode and (cfg.json_mode == "on" or (
            cfg.json_mode == "auto" and self._send_response_format))
        if send_format:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs, send_format

    @contextlib.contextmanager
    def _openai_errors(self, send_format: bool = False, stream_options: bool = False):
        """The SDK's exceptions (its own retries spent, or not worth retrying) as
        ours: a failure, or a refused ``response_format`` or ``stream_options``;
        every message redacted."""
        import openai

        cfg = self.config
        try:
            yield
        except openai.APIStatusError as e:
            status = e.status_code
            text = str(e.message)
            msg = self._redact(text if str(status) in text else f"HTTP {status}: {text}")
            if (status == 400 and send_format and cfg.json_mode == "auto"
                    and "response_format" in f"{e.message} {e.body}"):
                self._send_response_format = False
                raise _FormatRejected(msg) from None
            if status == 400 and stream_options and "stream_options" in f"{e.message} {e.body}":
                self._send_stream_options = False
                raise _FormatRejected(msg) from None
            raise _Failed(msg, status=status) from None  # the SDK's retries spent, or a 4xx
        except openai.APITimeoutError:
            self._throttle.timed_out()
            raise _Failed(f"timeout: no answer within {cfg.timeout_s:g}s",
                          connection=self._connection_problem(None)) from None
        except openai.APIConnectionError as e:
            cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
            raise _Failed(self._redact(f"connection error: {e}{cause}"),
                          connection=self._connection_problem(e)) from None
        except openai.APIError as e:
            raise _Failed(self._redact(f"{type(e).__name__}: {e}")) from None

    def _call_openai(self, req: LLMRequest) -> tuple[str | None, int, int]:
        client = self._get_client()
        kwargs, send_format = self._openai_kwargs(req)
        why = self._throttle.acquire(self._why_stop)
        if why:
            raise _Failed(f"not sent: {why}")
        try:
            with self._openai_errors(send_format):
                resp = client.chat.completions.create(**kwargs)
        finally:
            self._throttle.release()
        choice = resp.choices[0] if resp.choices else None
        text = choice.message.content if choice is not None and choice.message else None
        if text is None:
            return None, 0, 0  # asked again by _process
        usage = getattr(resp, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        if pt is None:
            pt = _est_tokens(_prompt_text(req.messages))
        if ct is None:
            ct = _est_tokens(text)
        return text, int(pt), int(ct)

    # ---- streaming (one answer, as the model writes it)

    def stream(self, req: LLMRequest, *, stage: str = "answer") -> Iterator[str]:
        """Yield the answer to ``req`` piece by piece as the model produces it
        (the openai backend's ``stream=True``; a callable's whole answer at
        once; a cached answer at once). Before the first piece the backend's
        own retries apply (the SDK's for 429, 5xx and connection failures,
        tenacity for a callable), and they stop waiting when the LLM closes or
        the build stops; after that, or for any other failure,
        :class:`LLMStreamError` (its message redacted). The whole answer is
        cached like :meth:`run`'s."""
        if self.offline:
            raise RuntimeError("offline backend: nothing to stream")
        key = self._key(req)
        hit = self._cache.get(key)
        if hit is not None:
            self._bump(stage, cache_hits=1)
            yield hit.text
            return
        self._probe()  # EndpointError at once for a dead endpoint, not after the retries
        self._bump(stage, calls=1)
        item = self._item  # the backend's retries are counted for this thread's item
        item.stage, item.key, item.retries, item.last = stage, req.key, 0, ""
        item.usage = None
        t0 = time.monotonic()
        parts: list[str] = []
        try:
            while True:
                try:
                    if self.config.backend == "callable":
                        text, _, _ = self._call_callable(req)
                        parts.append(text)
                        yield text
                    else:
                        # closed here, not left to the garbage collector, when the
                        # reader stops early: its finally closes the SDK's stream,
                        # and with it the connection the model is writing into
                        with contextlib.closing(self._stream_openai(req)) as pieces:
                            for piece in pieces:
                                parts.append(piece)
                                yield piece
                    break
                except _FormatRejected as e:
                    if parts:
                        raise LLMStreamError(self._redact(str(e))) from None
                    self._bump(stage, retries=1)  # ask again at once without the format
                except _Failed as e:
                    if e.connection:
                        self._connection_failed(e.connection)
                    raise LLMStreamError(self._redact(str(e))) from None
                except RetryAbandoned as e:
                    raise LLMStreamError(f"{self._redact(item.last)}; not retried: {e}") from None
        except LLMStreamError:
            self._fail_key(stage, req.key)
            raise
        finally:
            self._bump(stage, seconds=time.monotonic() - t0)
        self._answered()
        text = self._redact_key("".join(parts))
        usage = getattr(item, "usage", None)
        if usage is not None:  # the server's own counts (stream_options.include_usage)
            pt, ct = usage
        else:  # a server that does not send them (llama.cpp's): estimated
            pt, ct = _est_tokens(_prompt_text(req.messages)), _est_tokens(text)
        self._bump(stage, prompt_tokens=pt, completion_tokens=ct)
        try:
            self._cache.put(key, text, pt, ct, backend=self.name, template=req.template,
                            stage=stage)
        except Exception as e:  # noqa: BLE001 - the answer was delivered all the same
            log.warning("LLM %s: could not cache %s: %s", stage, req.key, e)

    def _stream_openai(self, req: LLMRequest) -> Iterator[str]:
        """The answer's pieces; the server's token counts, when it sends them (the
        last chunk, asked for with ``stream_options``), go to this thread's item."""
        client = self._get_client()
        kwargs, send_format = self._openai_kwargs(req)
        send_options = self._send_stream_options
        if send_options:
            kwargs["stream_options"] = {"include_usage": True}
        item = self._item
        with self._openai_errors(send_format, stream_options=send_options):
            chunks = client.chat.completions.create(**kwargs, stream=True)
            try:
                for chunk in chunks:
                    usage = getattr(chunk, "usage", None)
                    if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
                        item.usage = (int(usage.prompt_tokens), int(usage.completion_tokens or 0))
                    choice = chunk.choices[0] if chunk.choices else None
                    piece = choice.delta.content if choice is not None and choice.delta else None
                    if piece:
                        yield self._redact_key(piece)
            finally:
                chunks.close()


class LLMStreamError(RuntimeError):
    """A streamed answer that failed (before its first piece after the retries,
    or midway); the message names why, with any key redacted."""


def _completed(futs: dict, stop: threading.Event, poll_s: float = 0.25):
    """``as_completed`` that wakes up every ``poll_s``: a signal that reached another
    thread (Ctrl-C lands on any thread) is handled by the main thread only when it
    runs Python code, and a wait without a timeout would hold it off until every
    in-flight request has timed out. Stops early once ``stop`` is set."""
    from concurrent.futures import FIRST_COMPLETED, wait

    from strata.core import stopping

    waiting = set(futs)
    while waiting:
        done, waiting = wait(waiting, timeout=poll_s, return_when=FIRST_COMPLETED)
        yield from done
        stopping.check()  # the build is stopping: finished answers are cached already
        if stop.is_set() and waiting:
            return


def as_llm(llm: Any, **config: Any) -> tuple[LLM | None, bool]:
    """Accept what callers pass as ``llm=``: an :class:`LLM`, a plain
    ``str -> str`` callable (wrapped in a callable-backend LLM), or None.
    Returns (usable LLM or None, whether this call created it and must close
    it); an offline LLM counts as none."""
    if llm is None:
        return None, False
    if isinstance(llm, LLM):
        return (None, False) if llm.offline else (llm, False)
    if callable(llm):
        return LLM(LLMConfig(backend="callable", **config), fn=llm), True
    raise TypeError(f"llm must be a strata.core.llm.LLM or a str -> str callable, "
                    f"not {type(llm).__name__}")


def query_llm(backend: str | None = None, model: str | None = None,
              base_url: str | None = None, callable_path: str | None = None,
              max_tokens: int | None = None) -> LLM | None:
    """The LLM a query-side program (the CLI's search/ask, the HTTP service) uses:
    the given settings (flags), else :class:`strata.core.settings.LLMSettings` read from
    the environment (``$STRATA_LLM_*``); None when offline. ``callable_path`` is
    ``'package.module:function'`` and implies the callable backend. A bad setting
    raises :class:`strata.core.settings.SettingsError` (a ValueError), in one line."""
    import importlib

    s = load(LLMSettings, backend=backend or ("callable" if callable_path else None),
             model=model, base_url=base_url, callable_path=callable_path)
    if s.backend == "offline":
        return None
    fn = None
    if s.backend == "callable":
        module, _, name = (s.callable_path or "").partition(":")
        if not module or not name:
            raise ValueError("the callable LLM backend needs 'package.module:function' "
                             "(--llm-callable or $STRATA_LLM_CALLABLE)")
        fn = getattr(importlib.import_module(module), name)
    return LLM(LLMConfig.from_settings(s, max_tokens=max_tokens or s.answer_max_tokens), fn=fn)
