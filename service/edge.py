"""The HTTP edge shared by `strata serve` and `strata mcp --http`: what is checked
and bounded before any route sees a request.

- :class:`HostCheck`: a request must name an allowed host in ``Host`` (else 421)
  and, when it sends one, in ``Origin`` (else 403). Without it a web page whose
  name is rebound to 127.0.0.1 (DNS rebinding) reads a loopback service from
  the user's browser; :func:`allowed_hosts` is the rule.
- :class:`BodyLimit`: a body over the size limit gets 413 before anything reads
  it. :class:`RequestDeadline`: a request's body must have arrived by the request
  deadline (``request_timeout_s``, counted from its first byte), else 408 and the
  connection closed; a response sent before the body is read closes the
  connection too, so an unread body cannot keep it open.
- :func:`http_protocol`: uvicorn's HTTP protocol with the same deadline on the
  headers (uvicorn itself waits for them forever), and :func:`uvicorn_limits`:
  the connection cap and keep-alive timeout, uvicorn's own options.
- :class:`AccessLog`: the request id, one access-log line per request with every
  client-controlled field made terminal-safe (:func:`strata.core.console.visible`),
  500 for a failure, and a client that leaves mid-request logged as one quiet
  line, never as a traceback or a 500.

Only the standard library and Starlette here (uvicorn where it is asked for), so
``strata mcp`` loads no FastAPI."""

from __future__ import annotations

import json
import logging
import time
import uuid
from urllib.parse import urlsplit

from strata.core.console import visible

#: the names a loopback service answers to, whatever else is configured
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: where the protocol records when a request's first byte came (event-loop time)
BEGAN = "strata.request_began"
SLOW = "the request was not received in time"


def allowed_hosts(bound_host: str, configured: str | None) -> frozenset[str] | None:
    """The host names (lower case, no port, IPv6 without brackets) a request may
    name in ``Host`` and ``Origin``, or None when any is taken.

    Bound on a loopback address: that address and the loopback names, plus the
    configured ones. Bound elsewhere: the bound address and the configured ones
    when some are configured, else None (any host; a non-loopback service needs
    keys, which a rebound page does not have). ``*`` among the configured: None."""
    from strata.service.settings import is_loopback

    names = {n.strip().lower().strip("[]").rstrip(".")
             for n in (configured or "").split(",") if n.strip()}
    if "*" in names:
        return None
    bound = bound_host.lower().strip("[]")
    if is_loopback(bound):
        names |= LOOPBACK_NAMES
    elif not names:
        return None
    if bound not in ("0.0.0.0", "::", ""):
        names.add(bound)
    return frozenset(names)


def host_name(value: str) -> str:
    """The host of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``),
    lower case and without its port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.index("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope.get("headers") or []}


def json_response(scope, status: int, detail: str, close: bool = False):
    """The edge's error body: what went wrong and the request's id, as the
    service's own errors are."""
    from starlette.responses import JSONResponse

    rid = (scope.get("state") or {}).get("request_id")
    return JSONResponse({"detail": detail, "request_id": rid}, status_code=status,
                        headers={"Connection": "close"} if close else None)


class HostCheck:
    """ASGI middleware: 421 for a request whose ``Host`` is not an allowed name,
    403 for one whose ``Origin`` (when sent) is not an http(s) origin of one;
    ``hosts`` None lets every request through (see :func:`allowed_hosts`)."""

    def __init__(self, app, hosts: frozenset[str] | None):
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or self.hosts is None:
            return await self.app(scope, receive, send)
        headers = _headers(scope)
        if host_name(headers.get("host", "")) not in self.hosts:
            return await json_response(scope, 421, "this server does not answer to that Host "
                                       "name (see STRATA_ALLOWED_HOSTS)")(scope, receive, send)
        origin = headers.get("origin")
        if origin is not None:
            try:
                parts = urlsplit(origin)
                ok = parts.scheme in ("http", "https") and (parts.hostname or "") in self.hosts
            except ValueError:
                ok = False
            if not ok:
                return await json_response(scope, 403, "requests from that origin are not "
                                           "accepted")(scope, receive, send)
        return await self.app(scope, receive, send)


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with 413 before any handler
    reads it, whether the client declared its length or streams it."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = False
        if declared is not None:
            try:
                too_big = int(declared) > self.limit
            except ValueError:
                too_big = True
        chunks: list[bytes] = []
        size = 0
        more = not too_big
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                too_big = True
                break
            chunks.append(chunk)
            more = message.get("more_body", False)
        if too_big:
            response = json_response(scope, 413, f"request body over the {self.limit}-byte limit")
            return await response(scope, receive, send)
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


class SlowRequest(Exception):
    """The request's body did not arrive by its deadline."""


class RequestDeadline:
    """ASGI middleware: the request body must be received ``timeout_s`` after the
    request's first byte (as the protocol recorded it, else from now), else 408
    with the connection closed. Once the body is in, receiving is not bounded (a
    streamed response waits on it for the client to leave). A response that
    starts before a declared body was read closes the connection."""

    def __init__(self, app, timeout_s: float):
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        import anyio

        began = (scope.get("extensions") or {}).get(BEGAN)
        deadline = (began if began is not None else anyio.current_time()) + self.timeout_s
        headers = _headers(scope)
        declared = headers.get("content-length", "0").strip() not in ("", "0") \
            or "transfer-encoding" in headers
        body = {"done": not declared, "started": False}

        async def timed_receive():
            if body["done"]:
                return await receive()
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())) as waited:
                message = await receive()
            if waited.cancelled_caught:
                raise SlowRequest
            if message["type"] != "http.request" or not message.get("more_body", False):
                body["done"] = True
            return message

        async def closing_send(message):
            if message["type"] == "http.response.start":
                body["started"] = True
                if not body["done"]:
                    message = {**message, "headers": [*message.get("headers", ()),
                                                      (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, timed_receive, closing_send)
        except SlowRequest:
            if not body["started"]:
                await json_response(scope, 408, SLOW, close=True)(scope, receive, send)


class AccessLog:
    """ASGI middleware: gives each request an id (``X-Request-ID``, and
    ``request_id`` in the scope's state for error bodies), answers a failure with
    500 (the traceback logged under that id, never sent), and logs one line per
    request: client (``client`` in the state, set by the key check), method,
    path (never the query string), status and milliseconds, every field that a
    client wrote passed through :func:`visible`. A client that leaves before its
    answer is logged as one line, never as a failure."""

    def __init__(self, app, log: logging.Logger, access: logging.Logger):
        self.app = app
        self.log = log
        self.access = access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import ClientDisconnect

        rid = uuid.uuid4().hex[:12]
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        t0 = time.perf_counter()
        seen = {"status": None, "gone": False}

        async def watched_receive():
            message = await receive()
            if message["type"] == "http.disconnect":
                seen["gone"] = True
            return message

        async def stamped_send(message):
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                headers = [*message.get("headers", ()), (b"x-request-id", rid.encode())]
                if not any(k.lower() == b"x-content-type-options" for k, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, watched_receive, stamped_send)
        except Exception as e:
            if seen["gone"] or isinstance(e, ClientDisconnect):
                seen["gone"] = True
            else:
                self.log.exception("request %s failed", rid)
                if seen["status"] is None:
                    await json_response(scope, 500, "internal error")(scope, receive, stamped_send)
        ms = (time.perf_counter() - t0) * 1000
        client = visible(state.get("client", "-"))
        method, path = visible(scope.get("method", "")), visible(scope.get("path", ""))
        if seen["status"] is None and seen["gone"]:
            self.access.info("%s %s %s - %.1fms (the client closed the connection)",
                             client, method, path, ms)
        else:
            self.access.info("%s %s %s %s %.1fms", client, method, path, seen["status"], ms)


# --------------------------------------------------------------------------- uvicorn

def timeout_response(seconds: float) -> bytes:
    body = json.dumps({"detail": f"{SLOW} ({seconds:g} s)", "request_id": None}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))


def http_protocol(timeout_s: float, log: logging.Logger):
    """uvicorn's httptools protocol with a deadline on each request's headers:
    ``timeout_s`` from the connection's opening, or from a later request's first
    byte, to the end of its headers; past it the client gets 408 and the
    connection is closed (a connection that sends nothing is closed as well).
    The time of the first byte is passed on to :class:`RequestDeadline` in the
    scope, so headers and body share one deadline. None when httptools is not
    installed: uvicorn then uses h11, and only the body is bounded."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None
    answer = timeout_response(timeout_s)

    class HeaderDeadline(HttpToolsProtocol):
        header_timer = None
        began = 0.0

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self.arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self.header_timer is None:  # a later request of a keep-alive connection
                self.arm()

        def on_headers_complete(self) -> None:
            self.disarm()
            self.scope.setdefault("extensions", {})[BEGAN] = self.began
            super().on_headers_complete()

        def connection_lost(self, exc) -> None:
            self.disarm()
            super().connection_lost(exc)

        def arm(self) -> None:
            self.disarm()
            self.began = self.loop.time()
            self.header_timer = self.loop.call_later(timeout_s, self.too_slow)

        def disarm(self) -> None:
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None

        def too_slow(self) -> None:
            self.header_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is not None and not self.cycle.response_complete:
                self.arm()  # an answer is still being written: this request waits its turn
                return
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "-"
            log.info("%s - - 408 (request headers not received in %g s)", visible(peer),
                     timeout_s)
            self.transport.write(answer)
            self.transport.close()

    return HeaderDeadline


def uvicorn_limits(settings) -> dict:
    """uvicorn's options for a :class:`service.settings.ServiceSettings`: the
    connection cap (a request beyond it gets 503), the keep-alive timeout and the
    header deadline (:func:`http_protocol`; the body's share of the deadline is
    the app's, :class:`RequestDeadline`)."""
    options = {"limit_concurrency": settings.max_connections,
               "timeout_keep_alive": settings.keep_alive_s}
    protocol = http_protocol(settings.request_timeout_s,
                             logging.getLogger("strata.service.access"))
    if protocol is not None:
        options["http"] = protocol
    return options
