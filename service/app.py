"""The FastAPI application: routes, keys and limits, error bodies, the web page.

Every answer comes from :class:`retrieval.Index` (``search`` and ``ask``), the
same calls a notebook makes; this module only adds HTTP concerns. Handlers are
plain ``def`` functions: FastAPI runs them on its thread pool, and an ``Index``
is safe to share between threads.
"""

import logging
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from retrieval.results import markdown_block, source_url
from service.auth import KeyStore, RateLimiter, load_entries
from service.models import (AskResponse, ErrorBody, HealthIndex, HealthResponse, Hit,
                            IndexesResponse, IndexInfo, SearchResponse, request_model)
from service.registry import Registry, UnknownIndex
from service.settings import ServiceConfigError, ServiceSettings, is_loopback

log = logging.getLogger("strata.service")
access_log = logging.getLogger("strata.service.access")
STATIC = Path(__file__).with_name("static")
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp", ".bmp": "image/bmp",
               ".tif": "image/tiff", ".tiff": "image/tiff"}
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
ERRORS = {code: {"model": ErrorBody} for code in (400, 401, 403, 404, 413, 422, 429, 500)}


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
            # the request id the outer middleware filed this request under (request.state)
            rid = (scope.get("state") or {}).get("request_id")
            response = JSONResponse(
                {"detail": f"request body over the {self.limit}-byte limit", "request_id": rid},
                status_code=413)
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


class Service:
    """What the routes share: settings, indexes, keys, limits, the LLM."""

    def __init__(self, settings: ServiceSettings, registry: Registry | None = None, llm=None):
        from strata.llm import query_llm

        settings.check()
        self.settings = settings
        self.keys = KeyStore(load_entries(settings.api_keys_file, settings.api_key_hashes))
        self.limiter = RateLimiter()
        self.llm = llm if llm is not None else query_llm(
            settings.llm_backend, settings.llm_model, settings.llm_base_url,
            settings.llm_callable)
        self.registry = registry or Registry(settings.indexes, settings.reload_interval_s,
                                             settings.warm_up)
        self.started = time.monotonic()

    @property
    def llm_name(self) -> str:
        return getattr(self.llm, "name", None) or "offline"

    # -- authorization ------------------------------------------------------------
    def authorize(self, request: Request) -> str:
        """The client's name (a key's name, or ``anonymous@ADDRESS``), after its
        key and rate limit are checked."""
        client_host = request.client.host if request.client else None
        if not self.settings.forwarded_allow_ips and _forwarded(request):
            # A server started with uvicorn's defaults has already replaced the
            # peer with what X-Forwarded-For claims; unless proxies are named in
            # the settings, such a claim is not believed: every request carrying
            # one is one client (a local client rotating 127.0.0.N gains nothing)
            client_host = "forwarded-unverified"
        if self.keys.enabled:
            key = request.headers.get("x-api-key")
            auth = request.headers.get("authorization", "")
            if not key and auth.lower().startswith("bearer "):
                key = auth[7:].strip()
            entry = self.keys.lookup(key)
            if entry is None:
                raise HTTPException(401, "missing or unknown API key: send it as "
                                         "'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                                    headers={"WWW-Authenticate": "Bearer"})
            client, rate = entry.name, entry.rate_per_minute or self.settings.rate_per_minute
        else:
            if not (self.settings.allow_unauthenticated or is_loopback(client_host)):
                raise HTTPException(403, "this service has no API keys configured, so it "
                                         "answers loopback clients only")
            client, rate = f"anonymous@{client_host}", self.settings.anonymous_rate_per_minute
        request.state.client = client
        wait = self.limiter.acquire(client, rate)
        if wait > 0:
            raise HTTPException(429, f"rate limit of {rate:g} requests per minute reached",
                                headers={"Retry-After": str(max(1, round(wait + 0.5)))})
        return client

    def mode_params(self, req) -> dict[str, Any]:
        params = req.mode_params()
        if req.mode in ("routed", "diffusion") and self.llm is not None:
            params["llm"] = self.llm
        if req.mode == "diffusion" and self.settings.cross_encoder_path:
            params["cross_encoder_path"] = self.settings.cross_encoder_path
        return params

    # -- rendering ----------------------------------------------------------------
    def hit(self, name: str, idx, n: int, r) -> Hit:
        template = idx.manifest.get("url_template")
        image_url = None
        if r.kind == "image" and self.registry.image_file(idx, r.node_id) is not None:
            image_url = f"/indexes/{name}/images/{r.node_id}?version={idx.version}"
        return Hit(rank=n, node_id=r.node_id, kind=r.kind, path=r.path, node_path=r.node_path,
                   breadcrumb=r.breadcrumb, title=r.title or "", score=r.score, text=r.text,
                   start_line=r.start_line, end_line=r.end_line, page=r.page,
                   language=r.language, relation=r.relation, via=r.via, context=r.context,
                   location=r.location(), url=source_url(template, r), image_url=image_url,
                   markdown=markdown_block(n, r, url_template=template))

    def info(self, name: str) -> IndexInfo:
        slot = self.registry.slots[name]
        loaded = slot.current
        m = loaded.index.manifest
        return IndexInfo(name=name, corpus=m["corpus"], version=loaded.index.version,
                         latest_version=slot.latest_seen, versions=slot.versions(),
                         created_at=m.get("created_at"), model=m.get("model", ""),
                         dim=int(m.get("dim", 0)), counts=m.get("counts", {}),
                         url_template=m.get("url_template"), loaded_at=loaded.loaded_at,
                         reload_error=slot.reload_error)


def _clean_errors(errors) -> list[dict]:
    """Validation errors without the offending input echoed back (it may be a
    megabyte of text, or a secret pasted in the wrong field)."""
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in errors]


def _forwarded(request: Request) -> bool:
    return "x-forwarded-for" in request.headers or "forwarded" in request.headers


def _error(request: Request, status: int, detail, headers=None) -> JSONResponse:
    """Every error body: what went wrong, and the id the server log files it under."""
    return JSONResponse({"detail": detail,
                         "request_id": getattr(request.state, "request_id", None)},
                        status_code=status, headers=headers)


def create_app(settings: ServiceSettings, registry: Registry | None = None,
               llm=None) -> FastAPI:
    svc = Service(settings, registry, llm)
    app = FastAPI(
        title="Strata retrieval service",
        version="1",
        summary="Search and ask the indexes Strata built: auto (the default), hierarchical, "
                "diffusion and routed retrieval over HTTP.",
        responses=ERRORS,
    )
    app.state.service = svc
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    @app.middleware("http")
    async def request_log(request: Request, call_next):
        rid = uuid.uuid4().hex[:12]
        request.state.request_id = rid
        t0 = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception:  # logged here, answered without internals
            log.exception("request %s failed", rid)
            response = _error(request, 500, "internal error")
        response.headers["X-Request-ID"] = rid
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        # the path only: a query string could hold anything a client pasted
        access_log.info("%s %s %s %s %.1fms", getattr(request.state, "client", "-"),
                        request.method, request.url.path, response.status_code,
                        (time.perf_counter() - t0) * 1000)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return _error(request, 422, _clean_errors(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error(request, exc.status_code, exc.detail, exc.headers)

    @app.exception_handler(UnknownIndex)
    async def unknown_index(request: Request, exc: UnknownIndex):
        return _error(request, 404, str(exc.args[0]))

    authorize = svc.authorize
    SearchRequest = request_model("search", settings.max_query_chars)  # noqa: N806 - a class
    AskRequest = request_model("ask", settings.max_query_chars)  # noqa: N806 - a class

    def run(fn, what: str):
        """Retrieval's own refusals (a bad parameter combination) are the
        client's error; anything else is ours, logged and answered as 500."""
        from retrieval.modes import UnknownMode

        try:
            return fn()
        except (UnknownMode, ValueError, TypeError) as e:
            raise HTTPException(422, f"{what}: {e}") from None

    @app.get("/health", response_model=HealthResponse, tags=["service"])
    def health() -> HealthResponse:
        """Liveness, the index versions in use and their models (no key needed)."""
        return HealthResponse(
            status="ok", uptime_s=round(time.monotonic() - svc.started, 3),
            auth=svc.keys.enabled, llm=svc.llm_name,
            indexes=[HealthIndex(name=n, version=s.current.index.version,
                                 model=s.current.index.manifest.get("model", ""),
                                 reload_error=s.reload_error)
                     for n, s in svc.registry.slots.items()])

    @app.get("/indexes", response_model=IndexesResponse, tags=["indexes"])
    def indexes(_client: str = Depends(authorize)) -> IndexesResponse:
        """The served indexes: corpus, versions, model, counts."""
        return IndexesResponse(indexes=[svc.info(n) for n in svc.registry.slots])

    @app.post("/search", response_model=SearchResponse, tags=["retrieval"])
    def search(req: Annotated[SearchRequest, Body(title="SearchRequest")],
               _client: str = Depends(authorize)) -> SearchResponse:
        """Search one index in one mode. ``params`` are the mode's parameters;
        ``verbose`` adds the trace (per-stage timings and counts)."""
        name, idx = svc.registry.get(req.index)  # pinned for the whole request
        params = svc.mode_params(req)
        t0 = time.perf_counter()
        results = run(lambda: idx.search(req.query, mode=req.mode, k=req.k, **params), "search")
        took = (time.perf_counter() - t0) * 1000
        trace = results.trace.to_dict() if req.verbose else None
        hits = [svc.hit(name, idx, n, r) for n, r in enumerate(results, 1)]
        return SearchResponse(
            index=name, version=idx.version, mode=req.mode, query=req.query, k=req.k,
            took_ms=round(took, 3), results=hits,
            # the blocks of SearchResults.to_markdown, already rendered once per hit
            context="\n\n".join(h.markdown for h in hits), trace=trace)

    @app.post("/ask", response_model=AskResponse, tags=["retrieval"])
    def ask(req: Annotated[AskRequest, Body(title="AskRequest")],
            _client: str = Depends(authorize)) -> AskResponse:
        """Retrieve, then answer with the service's LLM (an extractive answer,
        marked as such, when none is configured), with sources, the single-hop
        connections read, and why this context was chosen."""
        name, idx = svc.registry.get(req.index)
        params = svc.mode_params(req)
        params.pop("llm", None)  # ask passes its own LLM to the router
        t0 = time.perf_counter()
        answer = run(lambda: idx.ask(req.question, mode=req.mode, llm=svc.llm, k=req.k,
                                     **params), "ask")
        took = (time.perf_counter() - t0) * 1000
        return AskResponse(
            index=name, version=idx.version, mode=req.mode, question=req.question,
            answer=answer.text, extractive=answer.extractive, sources=answer.sources,
            connections=answer.connections, reasoning=answer.reasoning,
            llm="offline" if answer.extractive else svc.llm_name, took_ms=round(took, 3),
            trace=answer.trace)

    @app.get("/indexes/{name}/images/{node_id}", tags=["indexes"],
             response_class=Response,
             responses={200: {"content": {t: {} for t in sorted(set(IMAGE_TYPES.values()))}}})
    def image(name: str, node_id: str, version: int | None = None,
              _client: str = Depends(authorize)):
        """An image of the index (from its blob store or the corpus folder it
        recorded); ``version`` keeps a page showing an older version's results
        consistent while it is still on disk."""
        _, idx = svc.registry.get(name)
        if version is not None and version != idx.version:
            from retrieval import Index, IndexNotFound
            from strata.layout import IndexDamaged

            try:
                idx = Index.open(idx.path, version=version)
            except (IndexNotFound, IndexDamaged, OSError, ValueError):
                raise HTTPException(404, f"version {version} of {name} is no longer on disk") \
                    from None
        path = svc.registry.image_file(idx, node_id)
        media = IMAGE_TYPES.get(path.suffix.lower()) if path is not None else None
        if media is None:
            raise HTTPException(404, f"no image {node_id!r} in {name}")
        return FileResponse(path, media_type=media,
                            headers={"Cache-Control": "private, max-age=3600",
                                     "Content-Security-Policy": "default-src 'none'"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", media_type="text/html",
                            headers={"Content-Security-Policy": PAGE_CSP,
                                     "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def create_app_from_env() -> FastAPI:
    """For ``uvicorn --factory service.app:create_app_from_env``: settings from
    ``STRATA_SERVE_*`` and friends (see :class:`ServiceSettings.from_env`)."""
    settings = ServiceSettings.from_env()
    if not settings.indexes:
        raise ServiceConfigError("set $STRATA_SERVE_INDEXES to the index folder(s) to serve "
                                 "(separated by ':')")
    return create_app(settings)
