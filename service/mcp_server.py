"""``strata mcp``: the indexes as Model Context Protocol tools, for coding
agents and chat clients (Claude Desktop, Claude Code, Cursor, ...).

Built on the official ``mcp`` Python SDK (``MCPServer``): the SDK owns the
protocol, the JSON schemas of the tool arguments (from the type hints below)
and both transports. Stdio is the default — the client starts
``strata mcp --index DIR`` as a child process and talks over its stdin and
stdout (the SDK points fd 1 at stderr while it serves, so nothing else can
corrupt the stream). ``--http`` serves the streamable HTTP transport on
``/mcp`` instead, behind the same gate as ``strata serve`` (API keys from
``strata keys``, rate limits, loopback only without keys).

``search``, ``outline``, ``node`` and ``neighbourhood`` answer twice: the
Markdown as the result's text content, which is what an agent reads, and the
same answer as ``structuredContent`` under an advertised output schema, for
programs that want ids and paths without parsing text.

The tools themselves are :class:`service.mcp_tools.Tools` over a
:class:`service.registry.Registry`, so a newly published index version is
picked up while the client stays connected.
"""

# no `from __future__ import annotations`: the SDK reads the tool functions'
# annotations at run time, and they name values of build_server's scope
import argparse
import inspect
import logging
import sys
from typing import Annotated, Literal

from pydantic import Field

from strata.retrieval.modes import DEFAULT_MODE, MODES
from strata.retrieval.navigate import TARGET_HELP
from strata.service.mcp_args import DEFAULT_BUDGET_TOKENS
from strata.service.mcp_tools import (
    MAX_BUDGET_TOKENS,
    MAX_K,
    Answer,
    NeighbourhoodOutput,
    NodeOutput,
    OutlineOutput,
    SearchOutput,
    ToolFailure,
    Tools,
)
from strata.core.config.schema import EMBEDDED_KINDS, ENTITY, FACT
from strata.core.config.settings import QuerySettings, ServeSettings, default, env_var

log = logging.getLogger("strata.mcp")
# the service's limit on a query's length (strata.core.config.settings.ServeSettings)
MAX_QUERY_CHARS: int = default(ServeSettings, "max_query_chars")
Mode = Literal[tuple(sorted(MODES))]  # type: ignore[valid-type]
Kind = Literal[EMBEDDED_KINDS + (ENTITY, FACT)]  # type: ignore[valid-type]
# the relevance floor's meaning and default, as the setting states them
MIN_RELEVANCE_HELP = (
    f"{QuerySettings.model_fields['min_relevance'].description} (default: the server's, "
    f"${env_var(QuerySettings, 'min_relevance')}, else {default(QuerySettings, 'min_relevance'):g})")

INSTRUCTIONS = (
    "Strata indexes of documents and code that keep their structure (file > section > "
    "subsection, module > class > method) and a graph of links, imports and facts. Use "
    "`search` to find passages (at most k Markdown blocks with source paths, lines, node ids "
    "and each one's estimated relevance, cut to a token budget; when nothing is relevant it "
    "says so and names the closest), then `outline` a file or module, `node` to read a node with "
    "its parent, siblings and children, and `neighbourhood` for what it links to, imports "
    "and mentions; these three take a node id, a file path or a module or symbol name alike. "
    "Search and the three also return their answer as structured content. `ask` answers a "
    "question from the index with numbered sources. `index_stats` describes what is indexed.")

IndexArg = Annotated[str | None, Field(
    description="index name (see index_stats); optional when one index is served")]
NodeArg = Annotated[str, Field(description=(
    f"the node: {TARGET_HELP}; an ambiguous name is refused with its candidates"))]


def build_server(tools: Tools, default_budget: int = DEFAULT_BUDGET_TOKENS):
    """The MCP server with Strata's tools (read-only, idempotent)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations

    from strata.core.storage.layout import IndexDamaged, IndexNotFound

    server = MCPServer(name="strata", instructions=INSTRUCTIONS, version=_version())
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True,
                                openWorldHint=False)

    def tool(fn):
        """Register ``fn`` with its docstring, dedented, as the description. A
        tool annotated ``Annotated[CallToolResult, Model]`` also advertises
        Model's JSON schema as its output schema; one returning ``str`` has
        none (its answer is the Markdown alone)."""
        markdown_only = fn.__annotations__.get("return") is str
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""),
                        annotations=read_only, structured_output=False if markdown_only else None)
        return fn

    def call(fn, *args, **kwargs):
        """``fn``'s answer: Markdown, or for an :class:`Answer` the Markdown as
        the content an agent reads and the data as ``structuredContent``."""
        try:
            out = fn(*args, **kwargs)
        except (ToolFailure, IndexDamaged, IndexNotFound) as e:
            raise ToolError(str(e)) from None
        if isinstance(out, Answer):
            return CallToolResult(content=[TextContent(type="text", text=out.text)],
                                  structured_content=out.data.model_dump(mode="json"))
        return out

    @tool
    def search(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                                    description="what to look for, in words or identifiers")],
        mode: Annotated[Mode | None, Field(
            description=f"retrieval mode (default {DEFAULT_MODE}: dense + BM25 fused, each hit "
                        "with its place in the hierarchy)")] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description=(
            "results at most, whatever the budget"))] = 10,
        kinds: Annotated[list[Kind] | None, Field(
            description="only these kinds of units, e.g. ['code'] or ['section', 'chunk']")
        ] = None,
        budget_tokens: Annotated[int | None, Field(
            ge=200, le=MAX_BUDGET_TOKENS,
            description=f"most estimated tokens of the answer, a second cap after k "
                        f"(default {default_budget})")
        ] = None,
        min_relevance: Annotated[float | None, Field(
            ge=0.0, le=1.0, description=MIN_RELEVANCE_HELP)] = None,
        index: IndexArg = None,
    ) -> Annotated[CallToolResult, SearchOutput]:
        """Search the index: the best passages, sections and code for a query, as
        Markdown blocks (breadcrumb, source path:lines, relevance, node id, text).
        At most k blocks, fewer when the token budget runs out. Each block's
        relevance is the estimated probability that it answers the query;
        results below min_relevance are left out, and when none is left the
        answer says so ("No result above relevance …") and names the closest
        result: then the index likely holds nothing on the query. The same
        results come as structured content (node_id, kind, path, location,
        relevance, score, text) with min_relevance, nothing_relevant and note."""
        return call(tools.search, query, index=index, mode=mode, k=k, kinds=kinds,
                    budget_tokens=budget_tokens or default_budget,
                    min_relevance=min_relevance)

    @tool
    def ask(
        question: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)],
        mode: Annotated[Mode | None, Field(
            description=f"retrieval mode (default {DEFAULT_MODE}; 'routed' picks files first "
                        "and reads their direct imports and links)")] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="passages to answer from")] = 8,
        min_relevance: Annotated[float | None, Field(
            ge=0.0, le=1.0, description=MIN_RELEVANCE_HELP)] = None,
        index: IndexArg = None,
    ) -> str:
        """Answer a question from the index, with numbered sources (path, lines,
        node id). Without an LLM configured on the server the answer is extractive:
        the retrieved sentences that best match, each with its source. Passages
        below min_relevance are not answered from."""
        return call(tools.ask, question, index=index, mode=mode, k=k,
                    min_relevance=min_relevance)

    @tool
    def outline(
        target: Annotated[str, Field(description=(
            f"what to outline: {TARGET_HELP}; a node id outlines its whole file with the "
            "node marked"))],
        max_depth: Annotated[int | None, Field(ge=0, le=20, description=(
            "levels below the target to list (default all)"))] = None,
        index: IndexArg = None,
    ) -> Annotated[CallToolResult, OutlineOutput]:
        """The outline of a file or module: its hierarchy (sections, classes,
        functions, code blocks, tables, images) in document order, each with its
        lines and node id."""
        return call(tools.outline, target, index=index, max_depth=max_depth)

    @tool
    def node(
        node_id: NodeArg,
        max_chars: Annotated[int, Field(ge=200, le=50_000,
                                        description="most characters of its text")] = 6000,
        index: IndexArg = None,
    ) -> Annotated[CallToolResult, NodeOutput]:
        """Read one node: its text, where it is (breadcrumb, path:lines), its
        parent, its nearest siblings and its children (with ids). The node may
        be named by id, file path, module or symbol name, as for `outline`."""
        return call(tools.node, node_id, index=index, max_chars=max_chars)

    @tool
    def neighbourhood(node_id: NodeArg,
                      index: IndexArg = None) -> Annotated[CallToolResult, NeighbourhoodOutput]:
        """What a node connects to, one hop: its parent and children, the files and
        sections it links to and that link to it, the modules and symbols it
        imports and that import it, the entities it mentions and the facts
        (OpenIE triples) extracted from it. The node may be named by id, file
        path, module or symbol name, as for `outline`."""
        return call(tools.neighbourhood, node_id, index=index)

    @tool
    def index_stats(index: IndexArg = None) -> str:
        """What is indexed: corpus, version, embedding model, files by format,
        nodes by kind, edges by type, files that could not be indexed, top-level
        folders, and the other indexes this server serves."""
        return call(tools.index_stats, index=index)

    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strata")
    except PackageNotFoundError:
        return "0"


# --------------------------------------------------------------------------- HTTP

class KeyGate:
    """ASGI middleware: every HTTP request passes :class:`service.auth.Gate`
    (keys, rate limits, loopback only without keys) before the MCP transport
    sees it; refusals are JSON ``{"error": ...}`` with the HTTP status. The
    access log names the client and the path, never a key, control characters
    escaped (:func:`strata.core.console.visible`)."""

    def __init__(self, app, gate):
        self.app = app
        self.gate = gate

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.responses import JSONResponse

        from strata.core.console import visible
        from strata.service.auth import Refused

        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        peer = scope.get("client")
        try:
            client = self.gate.admit(headers, peer[0] if peer else None)
        except Refused as e:
            log.info("%s %s %s %s", visible(e.client or "-"), visible(scope["method"]),
                     visible(scope["path"]), e.status)
            response = JSONResponse({"error": e.detail}, status_code=e.status, headers=e.headers)
            return await response(scope, receive, send)
        status = {}

        async def send_logged(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        finally:
            log.info("%s %s %s %s", visible(client), visible(scope["method"]),
                     visible(scope["path"]), status.get("code"))


def http_app(server, gate, hosts: frozenset[str] | None, timeout_s: float):
    """The streamable HTTP transport on ``/mcp`` behind ``gate``, with the checks
    of `strata serve` (:mod:`service.edge`): Host and Origin among ``hosts``
    (DNS rebinding; the SDK's own check, which knows only the loopback names, is
    off so that this one rule applies) and the request deadline ``timeout_s``."""
    from mcp.server.transport_security import TransportSecuritySettings

    from strata.service.edge import HostCheck, RequestDeadline

    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=(
        TransportSecuritySettings(enable_dns_rebinding_protection=False)))
    return KeyGate(HostCheck(RequestDeadline(app, timeout_s), hosts), gate)


# --------------------------------------------------------------------------- the command

def main(args: argparse.Namespace, llm=None) -> int:
    """Run ``strata mcp`` until the client goes away (stdio) or Ctrl-C (HTTP).
    Exit codes: 0, 1 for a damaged index, or 2 for a missing index, bad keys or
    an unsafe host."""
    from strata.service.auth import Gate, KeyFileError, KeyStore, load_entries
    from strata.service.registry import Registry
    from strata.service.settings import ServiceConfigError, ServiceSettings, is_loopback
    from strata.core.storage.layout import IndexDamaged, IndexNotFound

    def fail(message: str) -> int:
        print(f"error: {message}", file=sys.stderr)
        return 2

    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.budget_tokens < 200 or args.budget_tokens > MAX_BUDGET_TOKENS:
        return fail(f"--budget-tokens must be within 200..{MAX_BUDGET_TOKENS}")
    gate = None
    if args.http:
        try:
            env = ServiceSettings.from_env(api_keys_file=args.api_keys,
                                           rate_per_minute=args.rate_per_minute)
            keys = load_entries(env.api_keys_file, env.api_key_hashes)
        except ServiceConfigError as e:
            return fail(str(e))
        except (KeyFileError, OSError) as e:
            return fail(f"API keys: {e}")
        if not keys and not is_loopback(args.host) and not args.allow_unauthenticated:
            return fail(f"refusing to listen on {args.host} without API keys: create one with "
                        "`strata keys new NAME --file keys.txt` and pass --api-keys keys.txt, "
                        "or pass --allow-unauthenticated if the network in front is trusted")
        gate = Gate(KeyStore(keys), env.rate_per_minute, None, args.allow_unauthenticated)
    try:
        # nothing loaded in the background: on two cores it would slow the protocol's own
        # start-up, and an agent's first tool call loads what it needs in a fraction of a second
        registry = Registry(args.index, reload_interval_s=args.reload_interval, warm_up=False,
                            background=False)
    except IndexDamaged as e:  # as every command reports a damaged index: exit 1
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (IndexNotFound, ValueError) as e:
        return fail(str(e))
    server = build_server(Tools(registry, llm), default_budget=args.budget_tokens)
    names = ", ".join(f"{n} v{s.current.index.version}" for n, s in registry.slots.items())
    if not args.http:
        from strata.service.mcp_stdio import serve

        print(f"strata mcp: serving {names} over stdio", file=sys.stderr, flush=True)
        serve(lambda: server.run("stdio"))  # every line answered, unreadable ones too
        return 0
    import uvicorn

    print(f"strata mcp: serving {names} on http://{args.host}:{args.port}/mcp "
          f"({'API keys required' if gate.keys.enabled else 'no API keys: loopback clients only'})",
          file=sys.stderr, flush=True)
    from strata.service.edge import allowed_hosts, uvicorn_limits

    uvicorn.run(http_app(server, gate, allowed_hosts(args.host, env.allowed_hosts),
                         env.request_timeout_s), host=args.host, port=args.port,
                log_level=args.log_level, access_log=False, server_header=False,
                proxy_headers=False, **uvicorn_limits(env))
    return 0
