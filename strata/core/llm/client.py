"""The LLM every enrichment stage (and ``ask``) shares: one object around one
backend (:mod:`strata.core.llm.backends`) that owns what they all need.

Everything goes through :meth:`LLM.run`: a bounded thread pool, a
content-addressed SQLite cache (:mod:`strata.core.llm.cache`; only successes are
stored, each committed at once, so rerunning an interrupted stage only calls the
backend for what is missing), per-item failure isolation, and asking again when
an answer does not parse or a server refuses ``response_format``. Before a
stage's first uncached call the endpoint is probed, and a run of connection
failures with no answer trips a circuit breaker (:mod:`strata.core.llm.breaker`):
a dead server stops the stage in seconds. Transient failures are retried by the
backend (:mod:`strata.core.llm.retry`), which tells this object of each retry
(the stats, the breaker) and whose wait ends when the build stops, the LLM
closes or the breaker trips. :meth:`LLM.stream` gives one answer piece by piece.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from strata.core import stop_request as stopping
from strata.core.config.urls import shown_url
from strata.core.llm.endpoints import EndpointError, redact, redact_key
from strata.core.llm.backends import backend_class
from strata.core.llm.backends.base import Host
from strata.core.llm.breaker import CircuitBreaker
from strata.core.llm.cache import ResponseCache, cache_key
from strata.core.llm.config import LLMConfig, LLMRequest, LLMResult
from strata.core.llm.errors import FormatRejected, LLMStreamError, RequestFailed
from strata.core.llm.prompts import est_tokens, prompt_text
from strata.core.llm.retry import Sleep
from strata.core.llm.stats import StageCounters, StageStats
from strata.core.llm.throttle import Throttle
from strata.core.stop_request import RetryAbandoned

__all__ = ["LLM", "EndpointError"]

log = logging.getLogger(__name__)


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


class LLM:
    """One configured model shared by the enrichment stages (see the module
    docstring). ``fn`` / ``vision_fn``: the callable backend's functions.
    ``sleep``: how a retry waits (:func:`strata.core.stop_request.sleep`; tests pass a
    fake clock's, so no test waits out a real ``Retry-After``)."""

    def __init__(self, config: LLMConfig, cache_path: str | Path | None = None,
                 fn: Callable[[str], str] | None = None,
                 vision_fn: Callable[[str, bytes], str] | None = None,
                 sleep: Sleep = stopping.sleep):
        self.config = config
        self._closed = threading.Event()
        # the item a worker thread is on (a backend's retries are reported on that thread)
        self._item = threading.local()
        # requests in flight (openai backend): ``concurrency``, halved on each timeout
        self._throttle = Throttle(config.concurrency, on_change=self._throttled)
        host = Host(config=config, throttle=self._throttle, redact=self._redact,
                    redact_key=self._redact_key, why_stop=self._why_stop,
                    retrying=self._retrying, answered=self._answered,
                    connection_failed=self._connection_failed, sleep=sleep)
        self._backend = backend_class(config.backend)(host, fn=fn, vision_fn=vision_fn)
        self._cache = ResponseCache(cache_path)
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._stats = StageCounters()
        self._breaker = CircuitBreaker(config.breaker_failures, self._backend.endpoint,
                                       busy=self._backend.busy)
        # why images are no longer sent (an endpoint that failed one after its retries,
        # e.g. llama.cpp's server with a text-only model answers each with a 500):
        # the other images fail at once instead of spending the same retries
        self._images_refused: str | None = None
        self._probed = False

    # ---- identity

    @property
    def offline(self) -> bool:
        return self._backend.offline

    @property
    def name(self) -> str:
        return self._backend.name

    @property
    def endpoint(self) -> str:
        return self._backend.endpoint

    def __repr__(self) -> str:  # never shows the key: only the variable's name is known here
        return f"LLM({self.name!r}, base_url={shown_url(self.config.base_url) or None!r})"

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        self._backend.close()
        self._cache.close()

    # ---- secrets

    def _redact_key(self, text: str) -> str:
        return redact_key(text, self.config.api_key_env)

    def _redact(self, text: str) -> str:
        """For error and log text: the key's value and any bearer token become ``***``."""
        return redact(text, self.config.api_key_env)

    # ---- the endpoint: probe, circuit breaker, throttle

    def _probe(self) -> None:
        """Once per LLM, before the first call a stage cannot answer from the cache."""
        if self._probed or not self.config.probe:
            return
        self._backend.probe()
        self._probed = True

    def _answered(self) -> None:
        self._breaker.answered()

    def _connection_failed(self, problem: str) -> None:
        self._breaker.connection_failed(problem)

    def _why_stop(self) -> str | None:
        """Why no (further) request should be sent for an item, or None."""
        if self._closed.is_set():
            return "the LLM was closed"
        if self._breaker.tripped.is_set():
            return str(self._breaker.error())
        why = stopping.requested()
        return f"the build is stopping ({why})" if why else None

    def _throttled(self, old: int, new: int) -> None:
        log.warning("LLM endpoint %s timed out: sending %d request(s) at a time instead of %d "
                    "(a server that answers one at a time queues the rest; see the local-server "
                    "notes in docs/guides/llm-backends.md)", self.endpoint, new, old)

    # ---- stats

    def stats(self, stage: str) -> StageStats:
        """A snapshot of the cumulative counters of ``stage`` for this object."""
        return self._stats.get(stage)

    def all_stats(self) -> dict[str, StageStats]:
        return self._stats.all()

    def _retrying(self, what: str, delay: float, n: int, of: int) -> None:
        """A retry of this thread's item is about to wait ``delay`` seconds."""
        item = self._item
        item.retries += 1
        item.last = what
        self._stats.bump(item.stage, retries=1)
        log.info("LLM %s: %s: %s; retry %d/%d in %.2fs", item.stage, item.key,
                 self._redact(what), n, of, delay)

    # ---- keys

    def _max_tokens(self, req: LLMRequest) -> int:
        return req.max_tokens if req.max_tokens is not None else self.config.max_tokens

    def _key(self, req: LLMRequest) -> str:
        return cache_key(backend=self.name, model=self.config.model,
                         messages=[dict(m) for m in req.messages], image=req.image,
                         temperature=self.config.temperature, max_tokens=self._max_tokens(req),
                         json_mode=req.json_mode, template=req.template)

    def _cache_put(self, key: str, text: str, pt: int, ct: int, req: LLMRequest,
                   stage: str) -> None:
        try:
            self._cache.put(key, text, pt, ct, backend=self.name, template=req.template,
                            stage=stage)
        except Exception as e:  # noqa: BLE001 - the answer is still good
            log.warning("LLM %s: could not cache %s: %s", stage, req.key, e)

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
            "est_prompt_tokens": sum(est_tokens(prompt_text(r.messages))
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
        self._stats.bump(stage)  # the stage exists in stats even when everything is cached

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
                    self._stats.bump(stage, cache_hits=1)
                    done += 1
                    continue
            pending[k] = [i]
        if progress is not None and done:
            progress(done, total)

        try:
            if pending:
                self._run_pending(reqs, pending, results, stage, parse, progress, done, total)
        finally:
            self._stats.bump(stage, seconds=time.monotonic() - t0)
        return results  # type: ignore[return-value]

    def _run_pending(self, reqs: list[LLMRequest], pending: dict[str, list[int]],
                     results: list[LLMResult | None], stage: str,
                     parse: Callable[[str], Any] | None,
                     progress: Callable[[int, int], None] | None, done: int, total: int) -> None:
        """The requests the cache did not answer, on the worker pool; a duplicate
        is answered by its first occurrence's call."""
        tripped = self._breaker.tripped
        if tripped.is_set():
            raise self._breaker.error()
        self._probe()  # EndpointError: nothing is sent, nothing is recorded as failed
        workers = max(1, min(self.config.concurrency, len(pending)))
        ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"llm-{stage}")
        try:
            futs = {ex.submit(self._process, reqs[idx[0]], k, stage, parse): k
                    for k, idx in pending.items()}
            for fut in _completed(futs, tripped):
                idx = pending[futs[fut]]
                res = fut.result()  # _process never raises for item failures
                for n, i in enumerate(idx):
                    if n == 0:
                        r = res
                    elif res.ok:  # a duplicate: answered by the first one's call
                        r = dataclasses.replace(res, key=reqs[i].key, attempts=0, cached=True)
                        self._stats.bump(stage, cache_hits=1)
                    else:
                        r = dataclasses.replace(res, key=reqs[i].key)
                    if not r.ok:
                        self._stats.fail(stage, r.key)
                    results[i] = r
                done += len(idx)
                if progress is not None:
                    progress(done, total)
        except BaseException:
            # interrupted: drop what has not started; finished items are cached already
            ex.shutdown(wait=False, cancel_futures=True)
            raise
        if tripped.is_set():
            # the endpoint stopped answering: the items still queued are not tried
            ex.shutdown(wait=False, cancel_futures=True)
            raise self._breaker.error()
        ex.shutdown(wait=True)

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
                    self._stats.bump(stage, calls=1)
                calls += 1
                try:
                    text, pt, ct = self._backend.call(req)
                except FormatRejected as e:
                    log.warning("LLM %s: server rejects response_format; not sending it again (%s)",
                                stage, self._redact(str(e)))
                    self._stats.bump(stage, retries=1)
                    continue
                except RetryAbandoned as e:  # the stop came while it waited to retry:
                    item.retries -= 1         # the retry it announced was not made
                    self._stats.bump(stage, retries=-1)
                    return fail(f"{item.last}; not retried: {e}")
                except RequestFailed as e:
                    self._failed(e, req, stage)
                    return fail(str(e))
                self._answered()
                value, problem = None, None
                if text is None:
                    problem = "empty response (no message content)"
                else:
                    text = self._redact_key(text)  # a model echoing the key must not cache it
                    spent_prompt += pt
                    spent_completion += ct
                    self._stats.bump(stage, prompt_tokens=pt, completion_tokens=ct)
                    if parse is not None:
                        try:
                            value = parse(text)
                        except Exception as e:  # noqa: BLE001 - any parser failure
                            problem = f"parse error: {e}"
                if problem is not None:  # an answer we cannot use: ask again, a few times
                    if unusable >= cfg.parse_retries:
                        return fail(problem)
                    unusable += 1
                    self._stats.bump(stage, retries=1)
                    log.info("LLM %s: %s: %s; asking again", stage, req.key, self._redact(problem))
                    continue
                self._cache_put(key, text, pt, ct, req, stage)
                return LLMResult(key=req.key, text=text, value=value,
                                 attempts=calls + item.retries, prompt_tokens=pt,
                                 completion_tokens=ct)
        except Exception as e:  # noqa: BLE001 - isolation: a bug for one item fails that item
            return fail(f"{type(e).__name__}: {e}")

    def _failed(self, e: RequestFailed, req: LLMRequest, stage: str) -> None:
        """An item's request failed for good: no answer counts towards the breaker;
        an answer resets it, and may say that the endpoint takes no images."""
        if e.connection:
            self._connection_failed(e.connection)
            return
        self._answered()  # an HTTP answer, even a 500: the server is there
        if req.image is not None and self._images_refused is None \
                and _refuses_images(e.status, str(e)):
            self._images_refused = (
                f"the endpoint failed an image request after its retries "
                f"({self._redact(str(e))[:200]}); no more images are sent to it this run")
            log.warning("LLM %s: %s", stage, self._images_refused)

    # ---- streaming (one answer, as the model writes it)

    def stream(self, req: LLMRequest, *, stage: str = "answer") -> Iterator[str]:
        """Yield the answer to ``req`` piece by piece as the model produces it
        (the openai backend's ``stream=True``; a callable's whole answer at
        once; a cached answer at once). Before the first piece the backend's
        retries apply (429, 5xx and connection failures, or a callable's
        exceptions), and they stop waiting when the LLM closes or the build
        stops; after that, or for any other failure, :class:`LLMStreamError`
        (its message redacted). The whole answer is cached like :meth:`run`'s."""
        if self.offline:
            raise RuntimeError("offline backend: nothing to stream")
        key = self._key(req)
        hit = self._cache.get(key)
        if hit is not None:
            self._stats.bump(stage, cache_hits=1)
            yield hit.text
            return
        self._probe()  # EndpointError at once for a dead endpoint, not after the retries
        self._stats.bump(stage, calls=1)
        item = self._item  # the backend's retries are counted for this thread's item
        item.stage, item.key, item.retries, item.last = stage, req.key, 0, ""
        usage: list[tuple[int, int]] = []
        t0 = time.monotonic()
        parts: list[str] = []
        try:
            while True:
                try:
                    # closed here, not left to the garbage collector, when the reader
                    # stops early: the backend's finally closes the SDK's stream, and
                    # with it the connection the model is writing into
                    pieces = self._backend.stream(req, lambda pt, ct: usage.append((pt, ct)))
                    with contextlib.closing(pieces):
                        for piece in pieces:
                            parts.append(piece)
                            yield piece
                    break
                except FormatRejected as e:
                    if parts:
                        raise LLMStreamError(self._redact(str(e))) from None
                    self._stats.bump(stage, retries=1)  # ask again at once without the format
                except RequestFailed as e:
                    if e.connection:
                        self._connection_failed(e.connection)
                    raise LLMStreamError(self._redact(str(e))) from None
                except RetryAbandoned as e:
                    raise LLMStreamError(f"{self._redact(item.last)}; not retried: {e}") from None
        except LLMStreamError:
            self._stats.fail(stage, req.key)
            raise
        finally:
            self._stats.bump(stage, seconds=time.monotonic() - t0)
        self._answered()
        text = self._redact_key("".join(parts))
        if usage:  # the server's own counts (stream_options.include_usage)
            pt, ct = usage[-1]
        else:  # a server that does not send them (llama.cpp's): estimated
            pt, ct = est_tokens(prompt_text(req.messages)), est_tokens(text)
        self._stats.bump(stage, prompt_tokens=pt, completion_tokens=ct)
        self._cache_put(key, text, pt, ct, req, stage)


def _completed(futs: dict, stop: threading.Event, poll_s: float = 0.25):
    """``as_completed`` that wakes up every ``poll_s``: a signal that reached another
    thread (Ctrl-C lands on any thread) is handled by the main thread only when it
    runs Python code, and a wait without a timeout would hold it off until every
    in-flight request has timed out. Stops early once ``stop`` is set."""
    from concurrent.futures import FIRST_COMPLETED, wait

    waiting = set(futs)
    while waiting:
        done, waiting = wait(waiting, timeout=poll_s, return_when=FIRST_COMPLETED)
        yield from done
        stopping.check()  # the build is stopping: finished answers are cached already
        if stop.is_set() and waiting:
            return
