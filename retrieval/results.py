"""Typed search results, the per-query trace, and their renderings."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field


@dataclass
class Result:
    node_id: str
    kind: str
    path: str
    node_path: str
    breadcrumb: str
    score: float
    text: str
    title: str = ""
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    language: str | None = None
    relation: str = "seed"  # seed | parent | sibling | child | diffused | connection
    via: str | None = None  # the node that brought this one in

    def to_dict(self) -> dict:
        return asdict(self)

    def location(self) -> str:
        if self.page is not None:
            return f"{self.path} (page {self.page})"
        if self.start_line is not None:
            end = f"-{self.end_line}" if self.end_line and self.end_line != self.start_line else ""
            return f"{self.path}:{self.start_line}{end}"
        return self.path


@dataclass
class Trace:
    """Per-stage timings (ms) and counts of one query."""

    mode: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

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
        return {"mode": self.mode, "timings_ms": self.timings_ms, "total_ms": self.total_ms,
                "counts": self.counts, "notes": self.notes}


class SearchResults(list):
    """A list of :class:`Result` that also carries the query's trace."""

    def __init__(self, results=(), trace: Trace | None = None, query: str = ""):
        super().__init__(results)
        self.trace = trace or Trace()
        self.query = query

    def to_polars(self):
        import polars as pl

        rows = [r.to_dict() for r in self]
        if not rows:
            return pl.DataFrame(schema={f: pl.Utf8 for f in Result.__dataclass_fields__})
        return pl.DataFrame(rows)

    def to_markdown(self, max_chars: int = 1200) -> str:
        """Context for an LLM or a person: breadcrumb, source, id, then the text."""
        out = []
        for i, r in enumerate(self, 1):
            body = r.text if len(r.text) <= max_chars else r.text[:max_chars] + " …"
            fence = "```" + (r.language or "") if r.kind == "code" else ""
            out.append(f"### {i}. {r.breadcrumb}\n- source: {r.location()}\n- id: {r.node_id} "
                       f"({r.kind}, {r.relation}{', via ' + r.via if r.via else ''})\n\n"
                       + (f"{fence}\n{body}\n```" if fence else body))
        return "\n\n".join(out)
