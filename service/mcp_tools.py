"""What the MCP server's tools do, as plain functions returning Markdown.

Each tool answers with Markdown an agent can paste into its context: source
paths with lines on every item, node ids it can pass to the next tool
(``outline`` → ``node`` → ``neighbourhood``), and a size it can afford —
search returns at most ``k`` results, each with its estimated relevance, and
cuts them further to a token budget (``DEFAULT_BUDGET_TOKENS`` unless the
agent asks for another); node texts and lists are capped and say what they
left out. A search whose results all fall under the relevance floor says so,
with the closest one, rather than handing the agent passages that only look
like answers. Kept apart from the SDK wiring (:mod:`service.mcp_server`) so
the tools are plain calls on a :class:`service.registry.Registry`, the same
indexes and hot reload the HTTP service uses.

``search``, ``outline``, ``node`` and ``neighbourhood`` also return the same
answer as data (:class:`Answer`: the Markdown and a pydantic model), which the
server sends as the MCP result's ``structuredContent`` beside the Markdown, so
a client program can read ids, paths and relevances without parsing text.
Every tool that takes a node reads it through :func:`retrieval.navigate.resolve`:
a node id, a file path, a module or symbol name or a document anchor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from strata.retrieval import navigate
from strata.core.tokens import estimate_tokens
from strata.retrieval.modes import DEFAULT_MODE, MODES
from strata.retrieval.results import markdown_block, source_url
from strata.core.untrusted import code_span, fenced, one_line
from strata.service.mcp_args import DEFAULT_BUDGET_TOKENS
from strata.service.models import Fact, NodeRef, OutlineEntry  # the HTTP API's shapes, shared

MAX_BUDGET_TOKENS = 16000
MAX_NODE_CHARS = 6000  # a node's own text in the `node` tool
MAX_K = 50


class ToolFailure(ValueError):
    """A call the tool cannot answer (an unknown index, node or mode); the
    message says what to do instead and goes back to the agent as the error."""


# --------------------------------------------------------------------------- structured content

class SearchHit(NodeRef):
    """One search result, as its Markdown block shows it."""

    rank: int = Field(description="its block's number, from 1")
    relevance: float | None = Field(
        description="estimated probability that it answers the query (comparable across "
                    "queries)")
    score: float = Field(description="the mode's ranking score (orders one query's results)")
    relation: str = Field(description="seed, or how the mode brought it in (parent, child, ...)")
    parent_id: str | None = None
    url: str | None = None
    text: str = Field(description="the text as the Markdown block shows it")
    text_cut: bool = Field(description="whether the text was cut to fit the budget")


class IndexInfo(BaseModel):
    index: str
    corpus: str
    version: int | str


class SearchOutput(IndexInfo):
    """A search answer as data: the same results as the Markdown blocks."""

    query: str
    mode: str
    k: int
    budget_tokens: int
    min_relevance: float = Field(description="the relevance floor applied")
    results: list[SearchHit] = Field(description="at most k, in the Markdown's order")
    left_out_for_budget: int = Field(description="results dropped to fit budget_tokens")
    below_min_relevance: int = Field(description="results left out under the floor")
    nothing_relevant: bool = Field(description="true when every result fell under the floor")
    closest: SearchHit | None = Field(
        None, description="the best result under the floor, when any was left out")
    note: str | None = Field(None, description="what the Markdown says after the results")





class OutlineOutput(IndexInfo):
    target: str
    root: NodeRef
    focus: str | None = Field(description="the node id asked for, when its file is outlined")
    ancestors: list[NodeRef] = Field(description="above the root, nearest first")
    entries: list[OutlineEntry] = Field(description="in document order, the root first")
    truncated: bool


class NodeDetail(NodeRef):
    node_path: str | None = None
    language: str | None = None
    position: int | None = Field(None, description="its place among its parent's children")
    of: int | None = None
    url: str | None = None
    text: str = Field(description="its text, cut to max_chars")
    text_chars: int = Field(description="length of its whole text")
    text_cut: bool


class NodeOutput(IndexInfo):
    target: str
    node: NodeDetail
    parent: NodeRef | None
    ancestors: list[NodeRef] = Field(description="parent first, up to its file")
    siblings: list[NodeRef] = Field(description="the nearest ones, in document order")
    more_siblings: int
    children: list[NodeRef]
    more_children: int





class NeighbourhoodOutput(IndexInfo):
    target: str
    node: NodeRef
    parent: NodeRef | None
    children: list[NodeRef] = Field(description="the first ones")
    children_total: int
    groups: dict[str, list[NodeRef]] = Field(description=(
        "links_to, linked_from, imports, imported_by, entities, mentioned_in, related, "
        "similar: the first items of each"))
    counts: dict[str, int] = Field(description="every group's full size, and facts")
    facts: list[Fact]


@dataclass(frozen=True)
class Answer:
    """A tool's answer twice: the Markdown an agent reads and the same as data."""

    text: str
    data: BaseModel

    def __str__(self) -> str:
        return self.text


def _lines(d: dict) -> str:
    return d.get("location") or d.get("path") or ""


def _ref(d: dict) -> str:
    """One node as a list item: kind, title, where, id."""
    where = _lines(d)
    return f"{d['kind']} **{_clean(d['title'])}**" + (f" — {code_span(where)}" if where else "") \
        + f" {code_span(d['node_id'])}"


def _clean(text: str | None) -> str:
    """Indexed text shown inline (a title, a breadcrumb): on one line, so it cannot
    start a heading or a list item of its own, and short."""
    return one_line(text, 160)


class Tools:
    """The tools over the indexes of ``registry``; ``llm`` answers ``ask``
    (None: extractive answers, marked as such)."""

    def __init__(self, registry, llm=None):
        self.registry = registry
        self.llm = llm

    def _index(self, name: str | None, embed: bool = True):
        """The index a tool reads; ``embed`` False for the tools that embed no
        query (they do not wait for the encoder)."""
        from strata.service.registry import UnknownIndex

        try:
            return self.registry.get(name or None, embed)
        except UnknownIndex as e:
            raise ToolFailure(str(e.args[0])) from None

    @staticmethod
    def _head(name: str, idx) -> str:
        return f"index {code_span(name)} (corpus {idx.corpus}, version {idx.version})"

    # -- search ---------------------------------------------------------------
    def search(self, query: str, index: str | None = None, mode: str | None = None,
               k: int = 10, kinds: list[str] | None = None,
               budget_tokens: int | None = None,
               min_relevance: float | None = None) -> Answer:
        """At most ``k`` result blocks, each with its relevance; the token budget
        is a second cap that can only leave blocks out. Results under
        ``min_relevance`` (default: the server's floor) are left out and
        counted; when none is left the answer says so and names the closest.
        The data holds the same results, their texts cut alike."""
        mode = mode or DEFAULT_MODE
        if mode not in MODES:
            raise ToolFailure(f"unknown mode {mode!r}; choose one of {', '.join(sorted(MODES))}")
        if not query or not query.strip():
            raise ToolFailure("the query is empty")
        k = max(1, min(int(k), MAX_K))
        budget = max(200, min(int(budget_tokens or DEFAULT_BUDGET_TOKENS), MAX_BUDGET_TOKENS))
        name, idx = self._index(index)
        params: dict[str, Any] = {}
        if kinds:
            params["kinds"] = list(kinds)
        if mode == "auto":
            # the mode packs whole units into the budget; the headers below cost the rest
            params["budget_tokens"] = max(100, int(budget * 0.8))
        try:
            results = idx.search(query, mode=mode, k=k, min_relevance=min_relevance, **params)
        except TypeError:
            raise ToolFailure(f"mode {mode!r} does not take kinds; use the default mode "
                              "or leave kinds out") from None
        except ValueError as e:
            raise ToolFailure(str(e)) from None
        template = idx.manifest.get("url_template")
        left = budget - 100  # tokens: the heading and the closing note take the rest
        blocks: list[str] = []
        hits: list[SearchHit] = []
        dropped = 0
        for n, r in enumerate(results[:k], 1):  # k is a hard cap, whatever the budget
            if left < 75:
                dropped += 1
                continue
            max_chars = 1200
            block = self._block(n, r, template, max_chars=max_chars)
            cost = estimate_tokens(block)
            if cost > left:  # cut the text so that the whole block fits what is left
                max_chars = max(100, int(max_chars * left / cost) - 40)
                block = self._block(n, r, template, max_chars=max_chars)
                cost = estimate_tokens(block)
            blocks.append(block)
            hits.append(self._hit(n, r, template, max_chars))
            left -= cost
        used = sum(estimate_tokens(b) for b in blocks)
        floor = results.min_relevance
        head = (f"## Search results for {query!r}\n{self._head(name, idx)}, {mode} mode: "
                f"{len(blocks)} result(s) at relevance {floor:.2f} or above, about {used} "
                f"tokens of a {budget}-token budget.")
        closest = self._hit(0, results.below[0], template, 300) if results.below else None

        def answer(text: str, note: str | None) -> Answer:
            return Answer(text, SearchOutput(
                **self._info(name, idx), query=query, mode=mode, k=k, budget_tokens=budget,
                min_relevance=floor, results=hits, left_out_for_budget=dropped,
                below_min_relevance=len(results.below),
                nothing_relevant=not hits and bool(results.below), closest=closest,
                note=note))

        if not blocks and results.below:
            best = results.below[0]
            note = (f"No result above relevance {floor:.2f} for {query!r}; "
                    f"closest: {code_span(best.location())} {code_span(best.node_id)} (relevance "
                    f"{best.relevance:.2f}). Nothing in this index looks relevant to the "
                    "query: try other words, or pass a lower min_relevance to see the "
                    "closest results anyway.")
            return answer(head + "\n\n" + note, note)
        if not blocks:
            note = "Nothing matched. Try other words, another mode or no kinds filter."
            return answer(head + "\n\n" + note, note)
        notes = []
        if dropped:
            notes.append(f"({dropped} more result(s) left out to fit the budget: raise "
                         "budget_tokens or lower k.)")
        if results.below:
            best = results.below[0]
            notes.append(f"({len(results.below)} more result(s) below relevance {floor:.2f} "
                         f"left out; the best of them: {code_span(best.location())} (relevance "
                         f"{best.relevance:.2f}).)")
        tail = "".join("\n\n" + x for x in notes)
        return answer(head + "\nIds work with the `node`, `outline` and `neighbourhood` tools.\n\n"
                      + "\n\n".join(blocks) + tail, " ".join(notes) or None)

    @staticmethod
    def _info(name: str, idx) -> dict:
        return {"index": name, "corpus": str(idx.corpus), "version": idx.version}

    @staticmethod
    def _hit(n: int, r, template: str | None, max_chars: int) -> SearchHit:
        """One result as data, its text cut as :func:`markdown_block` cuts it."""
        parent = next((c for c in (r.context or []) if c["relation"] == "parent"), None)
        cut = len(r.text) > max_chars
        return SearchHit(
            rank=n, node_id=r.node_id, kind=r.kind, title=r.title, breadcrumb=r.breadcrumb,
            path=r.path, location=r.location(), start_line=r.start_line, end_line=r.end_line,
            page=r.page, relevance=r.relevance, score=float(r.score), relation=r.relation,
            parent_id=parent["node_id"] if parent else None, url=source_url(template, r),
            text=r.text[:max_chars] + " …" if cut else r.text, text_cut=cut)

    @staticmethod
    def _block(n: int, r, template: str | None, max_chars: int) -> str:
        """One result as :func:`markdown_block` writes it, with its estimated
        relevance (so an agent can weigh a block before reading it) and its
        parent before the id."""
        block = markdown_block(n, r, max_chars=max_chars, url_template=template)
        parent = next((c for c in (r.context or []) if c["relation"] == "parent"), None)
        extra = "" if r.relevance is None else f"\n- relevance: {r.relevance:.2f}"
        if parent is not None:
            extra += f"\n- in: {_clean(parent['title'])} {code_span(parent['node_id'])}"
        # the first "- id: " line is the block's own: its header comes before the text
        return block.replace("\n- id: ", f"{extra}\n- id: ", 1)

    # -- ask ----------------------------------------------------------------------
    def ask(self, question: str, index: str | None = None, mode: str | None = None,
            k: int = 8, min_relevance: float | None = None) -> str:
        mode = mode or DEFAULT_MODE
        if mode not in MODES:
            raise ToolFailure(f"unknown mode {mode!r}; choose one of {', '.join(sorted(MODES))}")
        if not question or not question.strip():
            raise ToolFailure("the question is empty")
        name, idx = self._index(index)
        try:
            answer = idx.ask(question, mode=mode, llm=self.llm, k=max(1, min(int(k), MAX_K)),
                             min_relevance=min_relevance)
        except ValueError as e:
            raise ToolFailure(str(e)) from None
        who = ("extractive: no language model wrote this; it is quoted from the sources"
               if answer.extractive else f"answered by {getattr(self.llm, 'name', 'the LLM')}")
        # the answer is made of the indexed text (quoted, or an LLM's reading of it):
        # fenced, so none of it reads as this output's own headings or sources
        lines = [f"## Answer\n{self._head(name, idx)}, {mode} mode ({who}).", "",
                 fenced(answer.text.strip()), "", "### Sources"]
        if not answer.sources and not answer.connections:
            lines.append("(none: nothing retrieved reached the relevance floor; pass a lower "
                         "min_relevance to answer from the closest passages anyway)")
        for s in answer.sources:
            where = f"{s['path']}:{s['lines']}" if s.get("lines") else s["path"]
            url = f" <{s['url']}>" if s.get("url") else ""
            lines.append(f"{s['n']}. {_clean(s['breadcrumb'])} — {code_span(where)} "
                         f"{code_span(s['node_id'])}{url}")
        if answer.connections:
            lines += ["", "### Connections read (one hop)"]
            for s in answer.connections:
                lines.append(f"{s['n']}. {_clean(s['breadcrumb'])} — {code_span(s['path'])} "
                             f"{code_span(s['node_id'])} ({s['relation']}"
                             + (f" from {code_span(s['via'])}" if s.get("via") else "") + ")")
        if answer.reasoning:
            lines += ["", f"_Why this context: {one_line(answer.reasoning)}_"]
        return "\n".join(lines)

    # -- structure --------------------------------------------------------------------
    def outline(self, target: str, index: str | None = None,
                max_depth: int | None = None) -> Answer:
        """The hierarchy under ``target`` (any name :func:`navigate.resolve`
        takes; a node id outlines its whole file with the node marked)."""
        name, idx = self._index(index, embed=False)
        try:
            o = navigate.outline(idx, target, max_depth=max_depth)
        except navigate.NotFound as e:
            raise ToolFailure(str(e)) from None
        data = OutlineOutput(**self._info(name, idx), target=target, root=o["root"],
                             focus=o["focus"], ancestors=o["ancestors"], entries=o["entries"],
                             truncated=o["truncated"])
        root = o["root"]
        up = " > ".join(_clean(a["title"]) for a in reversed(o["ancestors"]))
        lines = [f"## Outline of {_clean(root['title'])} ({root['kind']}, "
                 f"{code_span(_lines(root))})",
                 f"{self._head(name, idx)}" + (f"; inside {up}" if up else "")
                 + f"; {len(o['entries'])} node(s), ids in backticks.", ""]
        for e in o["entries"]:
            mark = "  ← this node" if e["node_id"] == o["focus"] else ""
            hidden = f" (+{e['children']} below)" if e["children"] and not e["expanded"] else ""
            where = f"L{e['start_line']}" + (f"-{e['end_line']}" if e["end_line"] and
                                              e["end_line"] != e["start_line"] else "") \
                if e["start_line"] is not None else (f"page {e['page']}" if e["page"] else "")
            lines.append(f"{'  ' * e['depth']}- {e['kind']} {_clean(e['title'])}"
                         + (f" — {where}" if where else "")
                         + f" {code_span(e['node_id'])}{hidden}{mark}")
        if o["truncated"]:
            lines.append(f"\n(outline cut at {len(o['entries'])} entries: pass max_depth, or "
                         "outline a section or class by its id)")
        return Answer("\n".join(lines), data)

    def _resolve(self, idx, target: str) -> str:
        try:
            return navigate.resolve(idx, target)
        except navigate.NotFound as e:
            raise ToolFailure(str(e)) from None

    def node(self, target: str, index: str | None = None,
             max_chars: int = MAX_NODE_CHARS) -> Answer:
        """One node (any name :func:`navigate.resolve` takes) with its text,
        parent, nearest siblings and first children."""
        name, idx = self._index(index, embed=False)
        v = navigate.node_view(idx, self._resolve(idx, target))
        n = v["node"]
        url = source_url(idx.manifest.get("url_template"), idx.result(n["node_id"], 0.0)) \
            if n["path"] else None
        lines = [f"## {_clean(n['title'])} ({n['kind']})",
                 f"- breadcrumb: {_clean(n['breadcrumb'])}",
                 f"- source: {code_span(_lines(n))}" + (f" <{url}>" if url else ""),
                 f"- id: {code_span(n['node_id'])}"
                 + (f" — {n['position']} of {n['of']} in its parent" if "position" in n else ""),
                 f"- {self._head(name, idx)}"]
        if v["parent"]:
            lines += ["", "### Parent", "- " + _ref(v["parent"])]
        if v["siblings"]:
            lines += ["", "### Siblings (document order)"] + ["- " + _ref(s) for s in v["siblings"]]
            if v["more_siblings"]:
                lines.append(f"- … {v['more_siblings']} more (see `outline`)")
        if v["children"]:
            lines += ["", "### Children"] + ["- " + _ref(c) for c in v["children"]]
            if v["more_children"]:
                lines.append(f"- … {v['more_children']} more (see `outline`)")
        text = n["text"]
        max_chars = max(200, int(max_chars))
        cut = len(text) > max_chars
        body = text[:max_chars] + (" …" if cut else "")
        lines += ["", "### Text" + (f" (first {max_chars} of {len(text)} characters)" if cut
                                    else ""), ""]
        lines.append(fenced(body, (n.get("language") or "") if n["kind"] == "code" else "")
                     if body else "(no text of its own: see its children)")
        data = NodeOutput(
            **self._info(name, idx), target=target,
            node={**n, "url": url, "text": body, "text_chars": len(text), "text_cut": cut},
            parent=v["parent"], ancestors=v["ancestors"], siblings=v["siblings"],
            more_siblings=v["more_siblings"], children=v["children"],
            more_children=v["more_children"])
        return Answer("\n".join(lines), data)

    def neighbourhood(self, target: str, index: str | None = None) -> Answer:
        """The one-hop connections of a node (any name :func:`navigate.resolve`
        takes): parent, children, links, imports, entities and facts."""
        name, idx = self._index(index, embed=False)
        node_id = self._resolve(idx, target)
        c = navigate.connections(idx, node_id)
        v = navigate.node_view(idx, node_id, max_relatives=8)
        n = c["node"]
        lines = [f"## Neighbourhood of {_clean(n['title'])} ({n['kind']}"
                 + (f", {code_span(_lines(n))}" if _lines(n) else "")
                 + f") {code_span(n['node_id'])}",
                 f"{self._head(name, idx)}. Direct (one-hop) connections only.", ""]
        if v["parent"]:
            lines.append("- parent: " + _ref(v["parent"]))
        if v["children"]:
            more = v["more_children"]
            lines.append(f"- children: {len(v['children']) + more} (" + ", ".join(
                f"{_clean(ch['title'])} {code_span(ch['node_id'])}" for ch in v["children"][:8])
                + (", …" if more or len(v["children"]) > 8 else "") + ")")
        titles = {"links_to": "Links to", "linked_from": "Linked from", "imports": "Imports",
                  "imported_by": "Imported by", "entities": "Entities it mentions",
                  "mentioned_in": "Mentioned in", "related": "Related entities (facts)",
                  "similar": "Similar entities"}
        for group, title in titles.items():
            items = c["groups"].get(group)
            if not items:
                continue
            total = c["counts"][group]
            lines += ["", f"### {title} ({total})"]
            lines += [f"- {_ref(x)} ({x['relation']})" for x in items]
            if total > len(items):
                lines.append(f"- … {total - len(items)} more")
        if c["facts"]:
            lines += ["", f"### Facts ({c['counts']['facts']}, OpenIE triples)"]
            for f in c["facts"]:
                src = "" if f["source_id"] == n["node_id"] else f" — from {code_span(f['source_id'])}"
                lines.append(f"- ({_clean(f['head'])}; {_clean(f['relation'])}; "
                             f"{_clean(f['tail'])}){src}")
        if not c["groups"] and not c["facts"]:
            lines += ["", "No links, imports, entities or facts connect this node; its place "
                          "in the hierarchy is all there is (see `outline`)."]
        data = NeighbourhoodOutput(
            **self._info(name, idx), target=target, node=n, parent=v["parent"],
            children=v["children"], children_total=len(v["children"]) + v["more_children"],
            groups=c["groups"], counts=c["counts"], facts=c["facts"])
        return Answer("\n".join(lines), data)

    def index_stats(self, index: str | None = None) -> str:
        name, idx = self._index(index, embed=False)
        s = idx.stats()
        others = [n for n in self.registry.slots if n != name]
        lines = [f"## {self._head(name, idx)}",
                 f"- model: {idx.manifest.get('model', '')} (dim {idx.manifest.get('dim')})",
                 f"- built: {idx.manifest.get('created_at', '?')}",
                 f"- files: {s['files']} ("
                 + ", ".join(f"{k} {v}" for k, v in sorted(s["files_by_format"].items(),
                                                            key=lambda kv: -kv[1])) + ")",
                 f"- nodes: {s['nodes']} (" + ", ".join(f"{k} {v}" for k, v in
                                                          s["nodes_by_kind"].items()) + ")",
                 f"- edges: {s['edges']} (" + ", ".join(f"{k} {v}" for k, v in
                                                          s["edges_by_type"].items()) + ")",
                 f"- facts: {s['facts']}, deepest nesting: {s['max_depth']}",
                 f"- files not indexed: {len(s['skipped'])}"
                 + ("".join(f"\n  - {code_span(x['path'])}: {_clean(x['reason'])}"
                            for x in s["skipped"][:10]))]
        if others:
            lines.append(f"- other indexes served: {', '.join(others)} (pass index=NAME)")
        files, _ = navigate._paths(idx)
        top: dict[str, int] = {}
        for p in files:
            head = p.split("/", 1)[0] if "/" in p else "."
            top[head] = top.get(head, 0) + 1
        lines += ["", "### Top-level folders (files)"] + [
            f"- {code_span(k + '/')}: {v}" if k != "." else f"- (root): {v}"
            for k, v in sorted(top.items())]
        lines.append("\nStart with `search`, or `outline` a path or module listed here.")
        return "\n".join(lines)
