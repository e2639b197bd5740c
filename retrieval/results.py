"""Typed search results, the per-query trace, and their renderings."""

from __future__ import annotations

import string
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from urllib.parse import quote

from strata.core.untrusted import code_span, fenced, one_line


#: what each entry of a result's ``context`` holds
CONTEXT_KEYS = ("node_id", "relation", "kind", "title", "location")


@dataclass
class Result:
    node_id: str
    kind: str
    path: str
    node_path: str
    breadcrumb: str
    score: float  # the mode's ranking score: orders one query's results, nothing more
    text: str
    title: str = ""
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    language: str | None = None
    relation: str = "seed"  # seed | parent | sibling | child | diffused | walk | connection | merged
    via: str | None = None  # the node that brought this one in
    # where the hit sits: its parent, nearest siblings, first children (and containers
    # it displaced), each {"node_id", "relation", "kind", "title", "location"}
    context: list[dict] | None = None
    # estimated probability that this result is relevant (retrieval.relevance):
    # comparable across queries and indexes, unlike ``score``
    relevance: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def location(self) -> str:
        if self.page is not None:
            return f"{self.path} (page {self.page})"
        if self.start_line is not None:
            end = f"-{self.end_line}" if self.end_line and self.end_line != self.start_line else ""
            return f"{self.path}:{self.start_line}{end}"
        return self.path


_URL_FIELDS = {"path", "line", "end_line", "page", "node_id"}


def source_url(template: str | None, r: Result) -> str | None:
    """The result's source online, from a corpus's ``url_template``
    (``data/corpora.yaml``), e.g. ``https://github.com/o/r/blob/main/{path}#L{line}-L{end_line}``.
    Placeholders: ``{path}`` (URL-quoted, slashes kept), ``{line}``, ``{end_line}``,
    ``{page}`` (1 when the result has none) and ``{node_id}``. None without a template
    or when the template names anything else."""
    if not template:
        return None
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError:
        return None
    if not names <= _URL_FIELDS:
        return None
    line = r.start_line or 1
    return template.format(path=quote(r.path, safe="/"), line=line,
                           end_line=r.end_line or line, page=r.page or 1,
                           node_id=quote(r.node_id, safe=""))


@dataclass
class Trace:
    """Per-stage timings (ms) and counts of one query."""

    mode: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # set by the routed mode: the files chosen (path, confidence, reason), which
    # router chose them ("llm" or "offline"), and the single-hop connections read
    route: list[dict] | None = None
    router: str | None = None
    connections: list[dict] | None = None

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings_ms[name] = round(self.timings_ms.get(name, 0.0)
                                          + (time.perf_counter() - t0) * 1000, 3)

    @property
    def total_ms(self) -> float:
        return round(sum(self.timings_ms.values()), 3)

    def to_dict(self) -> dict:
        d = {"mode": self.mode, "timings_ms": self.timings_ms, "total_ms": self.total_ms,
             "counts": self.counts, "notes": self.notes}
        for name in ("route", "router", "connections"):
            if getattr(self, name) is not None:
                d[name] = getattr(self, name)
        return d


class SearchResults(list):
    """A list of :class:`Result` that also carries the query's trace, the
    relevance floor it was cut at and what fell below it."""

    def __init__(self, results=(), trace: Trace | None = None, query: str = "",
                 min_relevance: float = 0.0, below: list[Result] | None = None):
        super().__init__(results)
        self.trace = trace or Trace()
        self.query = query
        self.min_relevance = float(min_relevance)
        self.below = list(below or [])  # results under the floor, best first

    @property
    def nothing_relevant(self) -> bool:
        """True when the search found candidates but none reached the floor."""
        return not self and bool(self.below)

    @property
    def note(self) -> str | None:
        """One line on what the floor did ("no result above relevance 0.30;
        closest: …"), or None when it left nothing out."""
        if not self.below:
            return None
        best = self.below[0]
        closest = f"{best.location()} (relevance {best.relevance:.2f})"
        if not self:
            return (f"no result above relevance {self.min_relevance:g}; closest: {closest}. "
                    "Nothing in this index looks relevant to the query.")
        return (f"{len(self.below)} more result(s) below relevance {self.min_relevance:g} "
                f"left out (best of them: {closest})")

    def to_polars(self):
        import polars as pl

        return pl.DataFrame([r.to_dict() for r in self], schema=result_schema(), strict=False)

    def to_markdown(self, max_chars: int = 1200, url_template: str | None = None) -> str:
        """Context for an LLM or a person: breadcrumb, source, id, then the text
        (one block per result, see :func:`markdown_block`)."""
        return "\n\n".join(markdown_block(i, r, max_chars, url_template)
                           for i, r in enumerate(self, 1))


def result_schema() -> dict:
    """The polars types of a :class:`Result` row, so that a list with nothing in
    it has the columns and types of one with hits (``score`` rounds, ``kind``
    filters), not a frame of strings."""
    import polars as pl

    text, num, line = pl.Utf8, pl.Float64, pl.Int64
    context = pl.List(pl.Struct(dict.fromkeys(CONTEXT_KEYS, text)))
    return {"node_id": text, "kind": text, "path": text, "node_path": text, "breadcrumb": text,
            "score": num, "text": text, "title": text, "start_line": line, "end_line": line,
            "page": line, "language": text, "relation": text, "via": text, "context": context,
            "relevance": num}


def markdown_block(n: int, r: Result, max_chars: int = 1200,
                   url_template: str | None = None) -> str:
    """One result as a Markdown context block: ``### n. breadcrumb``, its source
    (and URL when the corpus has a ``url_template``), its id, kind and relation,
    then the text in a fenced block (code with its language).

    Everything in it that comes from the indexed documents is delimited so it
    cannot pass for the block's own structure (:mod:`strata.core.untrusted`):
    the breadcrumb and titles on one line, the source and ids in code spans,
    the text in a fence longer than any backtick run it holds."""
    body = r.text if len(r.text) <= max_chars else r.text[:max_chars] + " …"
    url = source_url(url_template, r)
    near = [one_line(c["title"]) for c in (r.context or []) if c["relation"] == "sibling"]
    via = f", via {code_span(r.via)}" if r.via else ""
    return (f"### {n}. {one_line(r.breadcrumb)}\n- source: {code_span(r.location())}\n"
            + (f"- url: {url}\n" if url else "")
            + f"- id: {code_span(r.node_id)} ({r.kind}, {r.relation}{via})\n"
            + (f"- next to: {'; '.join(near)}\n" if near else "") + "\n"
            + fenced(body, (r.language or "") if r.kind == "code" else ""))
