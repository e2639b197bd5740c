"""Request and response bodies of the HTTP API.

The parameters of each retrieval mode are *derived* from the mode itself (the
fields of :class:`HierarchicalConfig` and :class:`DiffusionConfig`, the keyword
arguments of the routed and hybrid searches), so a parameter added to a mode
shows up in the API and its OpenAPI schema without a second list to keep in
step. What the derivation adds is the bounds a public endpoint needs (no
ten-minute time budgets, no million-node expansions) and the few parameters that
stay server-side: a file path to load a cross-encoder from, the LLM client.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, StrictBool,
                      StrictInt, Tag, create_model)

from strata.retrieval.modes import DEFAULT_MODE, MODES
from strata.retrieval.modes.auto import search as _auto
from strata.retrieval.modes.diffusion import DiffusionConfig
from strata.retrieval.modes.flat import hybrid as _hybrid
from strata.retrieval.modes.hierarchical import HierarchicalConfig
from strata.retrieval.modes.routed import search as _routed
from strata.core.config.schema import ENTITY, EMBEDDED_KINDS, FACT

Kind = Literal[EMBEDDED_KINDS + (ENTITY, FACT)]  # type: ignore[valid-type]

# Parameters a client may not set: they name server files or server objects.
SERVER_SIDE = {"cross_encoder_path", "llm", "cross_encoder", "config", "trace", "index",
               "query", "k"}
# Choices of the string parameters.
CHOICES: dict[str, tuple] = {
    "rerank": ("none", "cross-encoder"),
    "final_rerank": ("none", "cross-encoder", "llm"),
    "context_order": ("document", "similarity"),
}
# (min, max) per parameter; the defaults below cover the rest.
BOUNDS: dict[str, tuple[float, float]] = {
    "time_budget_s": (0.0, 10.0),
    "max_expansions": (0, 100_000),
    "max_frontier_size": (1, 200_000),
    "per_node_neighbor_limit": (1, 1_000),
    "walk_max_iter": (1, 200),
    "walk_damping": (0.0, 1.0),
    "decay": (0.0, 1.0),
    "min_score": (-1.0, 1.0),
    "min_enqueue_score": (0.0, 1.0),
    "min_relative": (0.0, 1.0),
    "max_files": (1, 20),
    "sections_per_file": (1, 20),
    "max_connections": (0, 50),
    "seeds": (0, 200),
    "max_expand": (0, 1_000),
    "max_siblings": (0, 200),
    "max_children": (0, 200),
    "dense_lead": (0, 100),
    "walk_fact_k": (0, 200),
    "candidates": (1, 1_000),
    "alpha": (0.0, 1.0),
    "budget_tokens": (1, 32_000),
}
INT_BOUNDS = (0, 1_000)
FLOAT_BOUNDS = (0.0, 100.0)
MAX_K = 100


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` admits 3.0; a boolean or a string is still refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def json_int(lo: int, hi: int):
    """A bounded integer as JSON Schema states it (bounds before the validator,
    or the schema loses them)."""
    return Annotated[StrictInt, Field(ge=lo, le=hi), BeforeValidator(_integral)]


def _annotation(name: str, default: Any):
    """The type of a parameter from its default value (and the tables above),
    its bounds included."""
    if name in ("seed_kinds", "kinds"):
        return Annotated[list[Kind], Field(max_length=len(EMBEDDED_KINDS) + 2)]
    if name == "walk":
        return StrictBool | Literal["auto", "on", "off"]
    if name == "budget_tokens":  # None by default: k results instead of a budget
        return json_int(*(int(b) for b in BOUNDS[name]))
    if name in CHOICES:
        return Literal[CHOICES[name]]  # type: ignore[valid-type]
    lo, hi = BOUNDS.get(name, INT_BOUNDS if isinstance(default, int) else FLOAT_BOUNDS)
    if isinstance(default, bool):
        return StrictBool
    if isinstance(default, int):
        return json_int(int(lo), int(hi))
    if isinstance(default, float):
        return Annotated[float, Field(ge=lo, le=hi, allow_inf_nan=False)]
    raise TypeError(f"no API type for parameter {name} (default {default!r})")


def _params_model(model_name: str, doc: str, defaults: dict[str, Any]) -> type[BaseModel]:
    fields = {}
    for name, default in defaults.items():
        if name in SERVER_SIDE:
            continue
        shown = list(default) if isinstance(default, tuple) else default
        fields[name] = (_annotation(name, default) | None,
                        Field(default=None, description=f"default: {shown!r}"))
    model = create_model(model_name, __config__=ConfigDict(extra="forbid"),
                         __doc__=doc, **fields)
    return model


def _signature_defaults(fn) -> dict[str, Any]:
    return {p.name: p.default for p in inspect.signature(fn).parameters.values()
            if p.default is not inspect.Parameter.empty}


def _dataclass_defaults(cls) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


AutoParams = _params_model(
    "AutoParams", "Parameters of the default mode (fused dense + BM25 recall, the entity walk "
    "where the facts are model-made, hierarchy context, optional token budget).",
    _signature_defaults(_auto))
FlatParams = _params_model(
    "FlatParams", "Parameters of flat (dense), dense and keyword search.", {"kinds": ()})
HybridParams = _params_model(
    "HybridParams", "Parameters of hybrid search (dense and BM25, fused by reciprocal rank).",
    {"kinds": (), **_signature_defaults(_hybrid)})
HierarchicalParams = _params_model(
    "HierarchicalParams", "Parameters of hierarchical search (HierarchicalConfig).",
    _dataclass_defaults(HierarchicalConfig))
DiffusionParams = _params_model(
    "DiffusionParams", "Parameters of diffusion search (DiffusionConfig).",
    _dataclass_defaults(DiffusionConfig))
RoutedParams = _params_model(
    "RoutedParams", "Parameters of routed search.", _signature_defaults(_routed))

# mode → (the group of modes that share a parameter model, that model)
GROUPS: dict[str, tuple[tuple[str, ...], type[BaseModel]]] = {
    "auto": (("auto",), AutoParams),
    "flat": (("flat", "dense", "keyword"), FlatParams),
    "hybrid": (("hybrid",), HybridParams),
    "hierarchical": (("hierarchical",), HierarchicalParams),
    "diffusion": (("diffusion",), DiffusionParams),
    "routed": (("routed",), RoutedParams),
}
# a mode registered in retrieval.modes.MODES and not named above gets a parameter
# model from its function's keyword defaults: adding a mode is its file and its entry
for _mode, (_module, _fn) in MODES.items():
    if not any(_mode in modes for modes, _ in GROUPS.values()):
        import importlib

        GROUPS[_mode] = ((_mode,), _params_model(
            f"{_mode.title().replace('_', '')}Params", f"Parameters of {_mode} search.",
            _signature_defaults(getattr(importlib.import_module(_module), _fn))))
GROUP_OF_MODE = {m: g for g, (modes, _) in GROUPS.items() for m in modes}


class ModeInfo(BaseModel):
    name: str
    default: bool = Field(description="the mode a search uses when none is named")
    kinds: bool = Field(description="whether its params take `kinds` (a filter by unit kind)")


def mode_infos() -> list[ModeInfo]:
    """The modes a client can offer, in the registry's order; an alias of an earlier
    mode (the same function) is left out."""
    seen: set = set()
    out = []
    for mode, target in MODES.items():
        if target in seen:
            continue
        seen.add(target)
        params = GROUPS[GROUP_OF_MODE[mode]][1]
        out.append(ModeInfo(name=mode, default=mode == DEFAULT_MODE, kinds="kinds" in params.model_fields))
    return out


class _Query(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: str | None = Field(default=None, max_length=200,
                              description="index name (GET /indexes); optional when the "
                                          "service serves one index")

    def mode_params(self) -> dict[str, Any]:
        params = getattr(self, "params", None)
        return params.model_dump(exclude_none=True) if params is not None else {}


def _mode_tag(value: Any) -> str | None:
    mode = value.get("mode", DEFAULT_MODE) if isinstance(value, dict) else \
        getattr(value, "mode", DEFAULT_MODE)
    return GROUP_OF_MODE.get(mode) if isinstance(mode, str) else None


def _min_relevance_field():
    """The optional relevance floor of a request, described by its setting
    (:class:`strata.core.config.settings.QuerySettings`): unset, the server's own floor."""
    from strata.core.config.settings import QuerySettings, field_help

    return (Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None,
            Field(default=None, description=field_help(QuerySettings, "min_relevance")
                  + "; unset: the server's floor"))


def request_model(kind: str, max_query_chars: int):
    """The body of ``/search`` (``kind="search"``) or ``/ask``: one variant per
    group of modes, each with its own ``params`` model, told apart by ``mode``
    (default: the default mode). Built per service so the schema states the
    service's query length limit."""
    field, k_default = ("query", 10) if kind == "search" else ("question", 8)
    text = (str, Field(min_length=1, max_length=max_query_chars, pattern=r"\S",
                       description=f"the {field} text (at most {max_query_chars} characters)"))
    variants = []
    for group, (modes, params) in GROUPS.items():
        mode_type = Literal[modes]  # type: ignore[valid-type]
        mode = (mode_type, Field(default=DEFAULT_MODE) if group == DEFAULT_MODE else ...)
        extra = {"verbose": (StrictBool, Field(
            default=False, description="add the query trace (per-stage timings, counts)"))} \
            if kind == "search" else {"stream": (StrictBool, Field(
                default=False, description=(
                    "answer as server-sent events (text/event-stream): `sources` first, then "
                    "`delta` pieces as the LLM writes them, then `done` (or `error`)")))}
        model = create_model(
            f"{kind.title()}{group.title()}", __base__=_Query,
            __doc__=f"{'Search' if kind == 'search' else 'Ask'} in mode "
                    f"{' / '.join(modes)}.",
            mode=mode, **{field: text},
            k=(json_int(1, MAX_K), Field(default=k_default,
                                description="results (passages for ask) wanted")),
            params=(params | None, Field(default=None, description=(
                "the mode's parameters; unset ones take the defaults"))),
            min_relevance=_min_relevance_field(),
            **extra)
        variants.append(Annotated[model, Tag(group)])
    # Union[...] of a runtime tuple: `X | Y` has no spelling for it
    return Annotated[Union[tuple(variants)], Discriminator(  # type: ignore[valid-type]  # noqa: UP007
        _mode_tag, custom_error_type="invalid_mode",
        custom_error_message=f"mode must be one of {', '.join(sorted(MODES))}")]


class Hit(BaseModel):
    rank: int
    node_id: str
    kind: str
    path: str
    node_path: str
    breadcrumb: str
    title: str
    score: float = Field(description=(
        "the mode's ranking score: it orders one query's results and means nothing across "
        "queries, modes or indexes"))
    relevance: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(default=None, description=(
        "estimated probability that the hit is relevant to the query, comparable across "
        "queries and indexes (the floor `min_relevance` is compared with it)"))
    text: str
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    language: str | None = None
    relation: str
    via: str | None = None
    context: list[dict] | None = Field(default=None, description=(
        "where the hit sits: its parent, nearest siblings and first children, each "
        "{node_id, relation, kind, title, location}"))
    location: str = Field(description="path with lines or page")
    url: str | None = Field(default=None, description="the source online (corpus url_template)")
    image_url: str | None = Field(default=None, description="this service's copy of the image")
    markdown: str = Field(description="the result as a Markdown context block")
    html: str | None = Field(default=None, description=(
        "the text rendered from Markdown and sanitized (prose kinds; null for code, images, "
        "entities and facts)"))
    ancestors: list[str] = Field(default_factory=list, description=(
        "node ids from the parent up to the file: a hit whose ancestor is also a hit sits "
        "inside it"))


class SearchResponse(BaseModel):
    index: str
    version: int
    mode: str
    query: str
    k: int
    took_ms: float
    results: list[Hit] = Field(description=(
        "at most k hits, best first, each at or above the relevance floor"))
    min_relevance: float = Field(description="the relevance floor the results were cut at")
    nothing_relevant: bool = Field(description=(
        "true when the search found candidates but none reached the floor: `results` is "
        "empty, `below` holds the closest ones and `note` says so"))
    note: str | None = Field(default=None, description=(
        "one line on what the floor left out (the closest result and its relevance); null "
        "when it left nothing out"))
    below: list[Hit] = Field(default_factory=list, description=(
        "the hits under the floor, highest relevance first, ranked after `results`: what "
        "came closest, not context to use"))
    context: str = Field(description="all results as one Markdown context block (for an LLM)")
    trace: dict[str, Any] | None = None


class Source(BaseModel):
    n: int
    path: str
    breadcrumb: str
    node_id: str
    lines: str | None = None
    kind: str
    relation: str
    score: float
    via: str | None = None
    url: str | None = None


class AskResponse(BaseModel):
    index: str
    version: int
    mode: str
    question: str
    answer: str
    extractive: bool = Field(description="true when no LLM wrote the answer")
    sources: list[Source]
    connections: list[Source]
    reasoning: str
    llm: str = Field(description="the LLM that answered ('offline' for extractive answers)")
    took_ms: float
    trace: dict[str, Any] | None = None


class NodeRef(BaseModel):
    node_id: str
    kind: str
    title: str
    breadcrumb: str | None = None
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    location: str
    relation: str | None = None


class NodeDetail(NodeRef):
    text: str
    html: str | None = Field(default=None, description="the text as sanitized HTML (prose)")
    language: str | None = None
    node_path: str | None = None
    url: str | None = Field(default=None, description="the source online (url_template)")
    image_url: str | None = None
    position: int | None = Field(default=None, description="its place among its siblings (1-)")
    of: int | None = Field(default=None, description="how many children its parent has")


class Fact(BaseModel):
    fact_id: str
    head: str
    relation: str
    tail: str
    head_id: str | None = None
    tail_id: str | None = None
    source_id: str | None = Field(default=None, description="the unit it was extracted from")


class NodeResponse(BaseModel):
    index: str
    version: int
    node: NodeDetail
    ancestors: list[NodeRef] = Field(description="parent first, up to the file")
    parent: NodeRef | None = None
    siblings: list[NodeRef] = Field(description="the nearest siblings, in document order")
    more_siblings: int
    children: list[NodeRef]
    more_children: int
    connections: dict[str, list[NodeRef]] = Field(description=(
        "one-hop connections by group: links_to, linked_from, imports, imported_by, entities, "
        "mentioned_in, related, similar"))
    counts: dict[str, int] = Field(description="the full size of each group, and of facts")
    facts: list[Fact]


class OutlineEntry(NodeRef):
    depth: int = Field(description="0 for the outline's root")
    children: int
    expanded: bool = Field(description="whether its children are listed")


class OutlineResponse(BaseModel):
    index: str
    version: int
    root: NodeRef
    focus: str | None = Field(default=None, description="the node the outline was asked for")
    entries: list[OutlineEntry]
    truncated: bool
    ancestors: list[NodeRef]


class IndexInfo(BaseModel):
    name: str
    corpus: str
    version: int = Field(description="the version this service answers from")
    latest_version: int | None = Field(default=None,
                                       description="the newest published version seen")
    versions: list[int] = Field(description="published versions kept beside it")
    created_at: str | None = None
    model: str
    dim: int
    counts: dict[str, Any]
    url_template: str | None = None
    loaded_at: str
    reload_error: str | None = None


class IndexesResponse(BaseModel):
    indexes: list[IndexInfo]


class HealthIndex(BaseModel):
    name: str
    version: int
    model: str
    reload_error: str | None = None


class HealthResponse(BaseModel):
    status: Literal["ok"]
    uptime_s: float
    auth: bool = Field(description="whether API keys are required")
    llm: str
    indexes: list[HealthIndex]
    modes: list[ModeInfo] = Field(default_factory=list, description="the retrieval modes, default first")


class ErrorBody(BaseModel):
    detail: Any
    request_id: str | None = None
