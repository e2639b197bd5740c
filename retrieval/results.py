"""Typed search results."""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
