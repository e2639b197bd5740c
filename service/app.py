"""The FastAPI application: routes, keys and limits, error bodies, the web page.

Every answer comes from :class:`retrieval.Index` (``search`` and ``ask``), the
same calls a notebook makes; this module only adds HTTP concerns. Handlers are
plain ``def`` functions: FastAPI runs them on its thread pool, and an ``Index``
is safe to share between threads. What is checked before a route runs (the
Host, the time and size of a request, the access log) is :mod:`service.edge`.
"""

import base64
import functools
import hashlib
import json
import logging
import re
import time
from pathlib import Path as FilePath
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from strata.retrieval import navigate
from strata.retrieval.results import markdown_block, source_url
from strata.service.auth import Gate, KeyStore, Refused, load_entries
from strata.service.edge import AccessLog, BodyLimit, HostCheck, RequestDeadline, allowed_hosts
from strata.service.models import (AskResponse, ErrorBody, HealthIndex, HealthResponse, Hit,
                            IndexesResponse, IndexInfo, NodeResponse, OutlineResponse,
                            SearchResponse, mode_infos, request_model)
from strata.service.registry import IndexNotNamed, Registry, UnknownIndex
from strata.service.render import markdown_html, node_html, policy_script
from strata.service.settings import ServiceConfigError, ServiceSettings

log = logging.getLogger("strata.service")
access_log = logging.getLogger("strata.service.access")
STATIC = FilePath(__file__).with_name("static")
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp", ".bmp": "image/bmp",
               ".tif": "image/tiff", ".tiff": "image/tiff"}
# The page: its own script only, no inline script or style, and HTML may enter the
# DOM only through the page's one Trusted Types policy (service/static/app.js)
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
            "require-trusted-types-for 'script'; trusted-types strata-html")
ERRORS = {code: {"model": ErrorBody}
          for code in (400, 401, 403, 404, 408, 413, 421, 422, 429, 500)}
NODE_ID = Annotated[str, Path(min_length=1, max_length=1000, description=(
    "a node id from a search result or another node, or any name the MCP tools and /outline "
    "take: a file path, a module or symbol path, a document anchor (# as %23)"))]


def _docs_assets() -> FilePath:
    """Swagger UI and ReDoc, as shipped inside the fastapi-offline package
    (``swagger-ui-bundle.js``, ``swagger-ui.css``, ``redoc.standalone.js``):
    ``/docs`` and ``/redoc`` load nothing from a CDN."""
    import fastapi_offline

    return FilePath(fastapi_offline.__file__).with_name("static")


# ReDoc's sidebar shows a logo it loads from a CDN, unconditionally; the copy we
# serve points it at a local picture instead (checked by a Chromium test that
# records every request the page makes)
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.lru_cache(maxsize=1)
def _redoc_js() -> bytes:
    return (_docs_assets() / "redoc.standalone.js").read_bytes().replace(
        REDOC_CDN_LOGO, b"/docs-assets/favicon.png")


def _docs_page(html: str) -> HTMLResponse:
    """A docs page with a CSP that allows only this server (and the page's own
    inline bootstrap script, by its hash): a stray CDN reference would be
    refused, not fetched."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() + "'"
        for m in re.findall(r"<script>(.*?)</script>", html, flags=re.S))
    csp = (f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
           "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
           "worker-src 'self' blob:; base-uri 'none'; form-action 'none'; "
           "frame-ancestors 'none'")
    return HTMLResponse(html, headers={"Content-Security-Policy": csp,
                                       "Referrer-Policy": "no-referrer"})


class ClosingStream(StreamingResponse):
    """A streamed response from a plain generator that is closed (``close()``, in
    a worker thread) as soon as the response ends for any reason: finished,
    failed, or the client gone.

    Starlette's own streaming of a plain generator asks for each piece in a
    worker thread and, when the client disconnects, stops asking but never
    closes the generator, which then holds whatever it was reading from (for
    ``/ask``, the LLM's streamed answer: an open connection, the model still
    generating, and paying for, an answer nobody reads) until the garbage
    collector finds it. Here the pieces are asked for one at a time, never two
    at once, so the generator is never running when it is closed; between
    pieces the client's disconnect is looked for, so a client that leaves
    while nothing is being sent is noticed at the next piece too."""

    def __init__(self, content, *args, **kwargs):
        self._source = content
        super().__init__(self._pieces(), *args, **kwargs)

    async def _pieces(self):
        done = object()
        try:
            while not self._gone.is_set():
                piece = await anyio.to_thread.run_sync(next, self._source, done)
                if piece is done:
                    return
                yield piece
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._source.close)

    async def __call__(self, scope, receive, send):
        self._gone = anyio.Event()

        async def watched_receive():
            message = await receive()
            if message["type"] == "http.disconnect":
                self._gone.set()
            return message

        try:
            await super().__call__(scope, watched_receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()


class KeyFirst(APIRoute):
    """A route whose caller's key and rate limit are checked (:meth:`Service.authorize`)
    before anything else, its body included: a client without a valid key gets
    401 whatever it sent, never a parse or validation error."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def admitted(request: Request) -> Response:
            request.app.state.service.authorize(request)
            return await handler(request)

        return admitted


class Service:
    """What the routes share: settings, indexes, keys, limits, the LLM."""

    def __init__(self, settings: ServiceSettings, registry: Registry | None = None, llm=None):
        from strata.core.llm import query_llm

        settings.check()
        self.settings = settings
        self.keys = KeyStore(load_entries(settings.api_keys_file, settings.api_key_hashes))
        self.gate = Gate(self.keys, settings.rate_per_minute, settings.anonymous_rate_per_minute,
                         settings.allow_unauthenticated)
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
        relayed, also = False, ()
        if not self.settings.forwarded_allow_ips and _forwarded(request):
            # Unless proxies are named in the settings, a forwarding header is not
            # believed: `strata serve` then runs uvicorn without proxy headers, so
            # the peer is the connecting address, and the request is limited in
            # its bucket, the one its plain requests use (a second bucket would
            # double its rate). A server started with uvicorn's own defaults has
            # already put what X-Forwarded-For claims in the peer's place, which
            # shows as a peer the header itself names: such requests also share
            # one bucket, so that a client rotating 127.0.0.N gains nothing.
            relayed = True
            if client_host is not None and client_host in _claimed(request):
                also = ("forwarded-unverified",)
        try:
            client = self.gate.admit(request.headers, client_host, relayed=relayed,
                                     also_limit=also)
        except Refused as e:
            if e.client:
                request.state.client = e.client
            raise HTTPException(e.status, e.detail, headers=e.headers) from None
        request.state.client = client
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
        image_url = self.image_url(name, idx, r.node_id) if r.kind == "image" else None
        in_graph = r.node_id in idx.graph.index  # a fact is a vector, not a graph node
        return Hit(rank=n, node_id=r.node_id, kind=r.kind, path=r.path, node_path=r.node_path,
                   breadcrumb=r.breadcrumb, title=r.title or "", score=r.score,
                   relevance=r.relevance, text=r.text,
                   start_line=r.start_line, end_line=r.end_line, page=r.page,
                   language=r.language, relation=r.relation, via=r.via, context=r.context,
                   location=r.location(), url=source_url(template, r), image_url=image_url,
                   markdown=markdown_block(n, r, url_template=template),
                   html=node_html(r.kind, r.text, r.language),
                   ancestors=navigate.ancestors(idx, r.node_id) if in_graph else [])

    def image_url(self, name: str, idx, node_id: str) -> str | None:
        if self.registry.image_file(idx, node_id) is None:
            return None
        return f"/indexes/{name}/images/{node_id}?version={idx.version}"

    def node_response(self, name: str, idx, node_id: str) -> NodeResponse:
        """A node, its relatives and its one-hop connections (404 when unknown);
        ``node_id`` is read by :func:`navigate.resolve`, so the names the MCP tools and
        the outline take work here too."""
        try:
            node_id = navigate.resolve(idx, node_id)
            view = navigate.node_view(idx, node_id)
            conn = navigate.connections(idx, node_id)
        except navigate.NotFound as e:
            raise HTTPException(404, f"{e} (index {name}, version {idx.version})") from None
        node = dict(view["node"])
        r = idx.result(node_id, 0.0)
        node.update(html=node_html(node["kind"], node["text"], node.get("language")),
                    url=source_url(idx.manifest.get("url_template"), r) if node["path"] else None,
                    image_url=self.image_url(name, idx, node_id) if node["kind"] == "image"
                    else None)
        return NodeResponse(index=name, version=idx.version, node=node,
                            ancestors=view["ancestors"], parent=view["parent"],
                            siblings=view["siblings"], more_siblings=view["more_siblings"],
                            children=view["children"], more_children=view["more_children"],
                            connections=conn["groups"], counts=conn["counts"],
                            facts=conn["facts"])

    def ask_events(self, name: str, idx, req, events, first, t0: float):
        """``POST /ask`` with ``stream``: the events of :func:`retrieval.answer.ask_stream`
        as server-sent events (``sources``, ``delta``…, ``done``; ``error``); ``t0``
        is when the request started (``took_ms`` counts retrieval too)."""

        def sse(event: str, data: dict) -> str:
            return f"event: {event}\ndata: {json.dumps(data)}\n\n"

        kind, value = first
        try:
            while True:
                if kind == "sources":
                    yield sse("sources", {
                        "index": name, "version": idx.version, "mode": req.mode,
                        "question": req.question, "sources": value.sources,
                        "connections": value.connections, "reasoning": value.reasoning,
                        "llm": "offline" if value.extractive else self.llm_name})
                elif kind == "delta":
                    yield sse("delta", {"text": value})
                elif kind == "error":
                    yield sse("error", {"detail": value})
                else:
                    yield sse("done", {
                        "answer": value.text, "html": markdown_html(value.text),
                        "extractive": value.extractive,
                        "llm": "offline" if value.extractive else self.llm_name,
                        "took_ms": round((time.perf_counter() - t0) * 1000, 3),
                        "trace": value.trace})
                kind, value = next(events)
        except StopIteration:
            return
        except Exception:
            log.exception("streamed ask failed")
            yield sse("error", {"detail": "internal error"})
        finally:
            # a client that went away closes this generator (GeneratorExit at a
            # yield): the answer's generators, down to the LLM's stream, close now
            events.close()

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


def _claimed(request: Request) -> set[str]:
    """The addresses X-Forwarded-For names (ports and IPv6 brackets dropped, as
    uvicorn reads them): one of them is the peer once uvicorn has believed it."""
    out = set()
    for value in request.headers.getlist("x-forwarded-for"):
        for entry in value.split(","):
            entry = entry.strip()
            if entry.startswith("[") and "]" in entry:
                entry = entry[1:entry.index("]")]
            elif entry.count(":") == 1:
                entry = entry.split(":", 1)[0]
            if entry:
                out.add(entry)
    return out


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
        docs_url=None, redoc_url=None,  # served below from local files, not a CDN
    )
    app.state.service = svc
    # outermost last: the id and the access line, the Host, the time to send the
    # request, then its size (service/edge.py)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(RequestDeadline, timeout_s=settings.request_timeout_s)
    app.add_middleware(HostCheck, hosts=allowed_hosts(settings.host, settings.allowed_hosts))
    app.add_middleware(AccessLog, log=log, access=access_log)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return _error(request, 422, _clean_errors(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error(request, exc.status_code, exc.detail, exc.headers)

    @app.exception_handler(UnknownIndex)
    async def unknown_index(request: Request, exc: UnknownIndex):
        return _error(request, 422 if isinstance(exc, IndexNotNamed) else 404, str(exc.args[0]))

    # the routes that need a key: checked before their body is read (KeyFirst)
    keyed = APIRouter(route_class=KeyFirst)
    SearchRequest = request_model("search", settings.max_query_chars)  # noqa: N806 - a class
    AskRequest = request_model("ask", settings.max_query_chars)  # noqa: N806 - a class

    def run(fn, what: str):
        """Retrieval's own refusals (a bad parameter combination) are the
        client's error; anything else is ours, logged and answered as 500."""
        from strata.retrieval.modes import UnknownMode

        try:
            return fn()
        except (UnknownMode, ValueError, TypeError) as e:
            raise HTTPException(422, f"{what}: {e}") from None

    @app.get("/health", response_model=HealthResponse, tags=["service"])
    def health() -> HealthResponse:
        """Liveness, the index versions in use and their models (no key needed)."""
        return HealthResponse(
            status="ok", uptime_s=round(time.monotonic() - svc.started, 3),
            auth=svc.keys.enabled, llm=svc.llm_name, modes=mode_infos(),
            indexes=[HealthIndex(name=n, version=s.current.index.version,
                                 model=s.current.index.manifest.get("model", ""),
                                 reload_error=s.reload_error)
                     for n, s in svc.registry.slots.items()])

    @keyed.get("/indexes", response_model=IndexesResponse, tags=["indexes"])
    def indexes() -> IndexesResponse:
        """The served indexes: corpus, versions, model, counts."""
        return IndexesResponse(indexes=[svc.info(n) for n in svc.registry.slots])

    @keyed.post("/search", response_model=SearchResponse, tags=["retrieval"])
    def search(req: Annotated[SearchRequest, Body(title="SearchRequest")]) -> SearchResponse:
        """Search one index in one mode: at most ``k`` hits, each with its
        estimated ``relevance``. ``params`` are the mode's parameters;
        ``min_relevance`` the floor (unset: the server's): hits under it move to
        ``below``, and when none is left ``nothing_relevant`` and ``note`` say
        so, naming the closest. ``verbose`` adds the trace (per-stage timings
        and counts)."""
        name, idx = svc.registry.get(req.index)  # pinned for the whole request
        params = svc.mode_params(req)
        t0 = time.perf_counter()
        results = run(lambda: idx.search(req.query, mode=req.mode, k=req.k,
                                         min_relevance=req.min_relevance, **params), "search")
        took = (time.perf_counter() - t0) * 1000
        trace = results.trace.to_dict() if req.verbose else None
        hits = [svc.hit(name, idx, n, r) for n, r in enumerate(results, 1)]
        below = [svc.hit(name, idx, n, r)
                 for n, r in enumerate(results.below, len(results) + 1)]
        return SearchResponse(
            index=name, version=idx.version, mode=req.mode, query=req.query, k=req.k,
            took_ms=round(took, 3), results=hits, min_relevance=results.min_relevance,
            nothing_relevant=results.nothing_relevant, note=results.note, below=below,
            # the blocks of SearchResults.to_markdown, already rendered once per hit
            context="\n\n".join(h.markdown for h in hits), trace=trace)

    @keyed.post("/ask", response_model=AskResponse, tags=["retrieval"], responses={200: {
        "content": {"text/event-stream": {"schema": {
            "type": "object", "required": ["event", "data"], "description": (
                "with `stream`, one server-sent event: `sources` (index, version, mode, "
                "sources, connections, reasoning, llm), `delta` ({text}) as the LLM writes, "
                "`done` (answer, html, extractive, llm, took_ms, trace), or `error` ({detail})"),
            "properties": {"event": {"type": "string",
                                     "enum": ["sources", "delta", "done", "error"]},
                           "data": {"type": "string", "contentMediaType": "application/json"}}}}}}})
    def ask(req: Annotated[AskRequest, Body(title="AskRequest")]):
        """Retrieve, then answer with the service's LLM (an extractive answer,
        marked as such, when none is configured), with sources, the single-hop
        connections read, and why this context was chosen. ``min_relevance``
        is the floor of the retrieval, as for ``/search``: passages under it are
        not answered from. With ``stream`` the answer comes as server-sent
        events, sources first."""
        name, idx = svc.registry.get(req.index)
        params = svc.mode_params(req)
        params.pop("llm", None)  # ask passes its own LLM to the router
        if req.stream:
            from strata.retrieval.answer import ask_stream

            t0 = time.perf_counter()
            events = ask_stream(idx, req.question, mode=req.mode, llm=svc.llm, k=req.k,
                                min_relevance=req.min_relevance, **params)
            first = run(lambda: next(events), "ask")  # retrieval errors are still a 422
            return ClosingStream(svc.ask_events(name, idx, req, events, first, t0),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store",
                                          "X-Accel-Buffering": "no"})
        t0 = time.perf_counter()
        answer = run(lambda: idx.ask(req.question, mode=req.mode, llm=svc.llm, k=req.k,
                                     min_relevance=req.min_relevance, **params), "ask")
        took = (time.perf_counter() - t0) * 1000
        return AskResponse(
            index=name, version=idx.version, mode=req.mode, question=req.question,
            answer=answer.text, extractive=answer.extractive, sources=answer.sources,
            connections=answer.connections, reasoning=answer.reasoning,
            llm="offline" if answer.extractive else svc.llm_name, took_ms=round(took, 3),
            trace=answer.trace)

    @keyed.get("/indexes/{name}/images/{node_id}", tags=["indexes"],
             response_class=Response,
             responses={200: {"content": {t: {} for t in sorted(set(IMAGE_TYPES.values()))}}})
    def image(name: str, node_id: str, version: int | None = None):
        """An image of the index (from its blob store or the corpus folder it
        recorded); ``version`` keeps a page showing an older version's results
        consistent while it is still on disk."""
        _, idx = svc.registry.get(name)
        if version is not None and version != idx.version:
            from strata.retrieval import Index, IndexNotFound
            from strata.core.storage.layout import IndexDamaged

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

    @keyed.get("/indexes/{name}/nodes/{node_id:path}", response_model=NodeResponse, tags=["indexes"])
    def node(name: str, node_id: NODE_ID) -> NodeResponse:
        """A node of the index: its text (and sanitized HTML), where it is, its
        parent, nearest siblings and children, and its one-hop connections
        (links, imports, entities, OpenIE facts) — the web page's side panel."""
        name, idx = svc.registry.get(name)
        return svc.node_response(name, idx, node_id)

    @keyed.get("/indexes/{name}/outline", response_model=OutlineResponse, tags=["indexes"])
    def outline(name: str,
                target: Annotated[str, Query(min_length=1, max_length=1000, description=(
                    "a node id (its file is outlined, the node marked), a file path, or a "
                    "module or symbol path"))],
                max_depth: Annotated[int | None, Query(ge=0, le=50)] = None) -> OutlineResponse:
        """The outline of a file or module: its hierarchy in document order, each
        entry with its lines, node id and number of children."""
        name, idx = svc.registry.get(name)
        try:
            o = navigate.outline(idx, target, max_depth=max_depth)
        except navigate.NotFound as e:
            raise HTTPException(404, f"{e} (index {name})") from None
        return OutlineResponse(index=name, version=idx.version, **o)

    app.include_router(keyed)

    @app.get("/docs", include_in_schema=False)
    def docs():
        from fastapi.openapi.docs import get_swagger_ui_html

        page = get_swagger_ui_html(
            openapi_url="/openapi.json", title=f"{app.title} - Swagger UI",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon.png",
            swagger_ui_parameters={"validatorUrl": None})  # no badge from validator.swagger.io
        return _docs_page(page.body.decode())

    @app.get("/redoc", include_in_schema=False)
    def redoc():
        from fastapi.openapi.docs import get_redoc_html

        page = get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} - ReDoc",
                              redoc_js_url="/docs-assets/redoc.standalone.js",
                              redoc_favicon_url="/docs-assets/favicon.png",
                              with_google_fonts=False)
        return _docs_page(page.body.decode())

    @app.get("/docs-assets/redoc.standalone.js", include_in_schema=False)
    def redoc_js():
        return Response(_redoc_js(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", media_type="text/html",
                            headers={"Content-Security-Policy": PAGE_CSP,
                                     "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"})

    @app.get("/html-policy.js", include_in_schema=False)
    def html_policy():
        """The HTML allow-list of :mod:`service.render`, for the page's re-check."""
        return Response(policy_script(), media_type="text/javascript",
                        headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.mount("/docs-assets", StaticFiles(directory=_docs_assets()), name="docs-assets")
    return app


def create_app_from_env() -> FastAPI:
    """For ``uvicorn --factory service.app:create_app_from_env``: settings from
    ``STRATA_SERVE_*`` and friends (see :class:`ServiceSettings.from_env`)."""
    settings = ServiceSettings.from_env()
    if not settings.indexes:
        raise ServiceConfigError("set $STRATA_SERVE_INDEXES to the index folder(s) to serve "
                                 "(separated by ':')")
    return create_app(settings)
