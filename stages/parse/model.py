"""What a parser hands back: a tree of drafts plus unresolved references.

Parsers only know one file. Ids, depths, breadcrumbs, hashes and chunking are
assigned afterwards by :mod:`stages.parse.finalize`, and references (links,
imports) are resolved against the whole corpus by :mod:`stages.structural_graph`, so a
parser never needs to see another file and every format lands in one model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Draft:
    """One node of a file's hierarchy before it gets an id.

    ``slug`` is this node's segment of the hierarchical ``node_path`` (a heading
    slug, ``code-2``, a Python name). Parsers for code set ``node_path``
    directly (dotted module path plus qualname); document parsers leave it
    empty and the finaliser derives ``<path>#<slug>/<slug>``.
    """

    kind: str  # file | section | chunk | code | table | image
    title: str
    text: str
    slug: str = ""
    subkind: str = ""  # e.g. h2, class, method, fenced, pipe, html, alt
    node_path: str = ""
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    language: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    children: list[Draft] = field(default_factory=list)

    def add(self, child: Draft) -> Draft:
        self.children.append(child)
        return child

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass
class Reference:
    """A pointer from one draft to something that may live in another file.

    ``type`` is the edge type it becomes once resolved (``jump`` for document
    links, ``import`` for code imports). ``target`` is raw: a relative link such
    as ``../guide.md#install`` or an absolute dotted module such as
    ``pkg.util`` (parsers resolve relative imports to absolute names).
    """

    source: Draft
    target: str
    type: str  # jump | import
    relation: str  # links_to | imports | embeds ...
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedFile:
    root: Draft
    references: list[Reference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # non-fatal: fallbacks, repairs
    # Set when none of the content could be read (encrypted or broken PDF/DOCX):
    # the parse stage then records the file as skipped with this reason.
    unreadable: str | None = None
    # Binary payloads a parser extracted (images inside a PDF or DOCX), keyed by
    # a content hash; image drafts name theirs in ``attrs["blob"]`` and the
    # parse stage stores them in the index's blob folder.
    blobs: dict[str, bytes] = field(default_factory=dict)
