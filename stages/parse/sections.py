"""The section tree every document format builds, from heading / prose / leaf events.

Markdown, HTML, DOCX and PDF differ in how they find headings and text; what
they build from them is the same, and lives here once:

* :meth:`SectionBuilder.close` / :meth:`~SectionBuilder.open`: a heading closes
  the open sections of its level or deeper and opens one under what remains,
  with a slug unique among its siblings and an anchor unique in the document
  (GitHub's rules, :func:`github_slug`);
* :meth:`~SectionBuilder.prose`: a line (or paragraph) of a section's own text,
  at a position key the format chooses (a line number, a block index, a
  ``(page, line, sub)`` tuple): any keys that sort in document order;
* :meth:`~SectionBuilder.leaf`: a code block, table or image of the current
  section, at a position key: it gets the next ``code-N``/``table-N``/``image-N``
  slug, and in :meth:`~SectionBuilder.finish` the prose just before and after
  it as ``context_before``/``context_after`` (prose keyed below the leaf's key
  counts as before) and, for a table without a title, the short prose line just
  above it or "table in <section>".

How a section's own text is rendered (raw lines, paragraphs, pages) stays with
each format: the builder only keeps the prose it was given.
"""

from __future__ import annotations

import bisect
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

from strata.stages.parse.common import squash, unique_slug
from strata.stages.parse.model import Draft

SHORT_TITLE = 80  # a prose line longer than this is no table title


def github_slug(text: str) -> str:
    """GitHub's heading-anchor slug (github-slugger): lowercase, drop
    punctuation/symbols except ``-`` and ``_``, each space becomes ``-``,
    unicode letters, digits and combining marks are kept."""
    out = []
    for ch in text.strip().lower():
        if ch == " ":
            out.append("-")
        elif ch in "-_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            out.append(ch)
    return "".join(out)


@dataclass(eq=False)
class Section:
    """The file or one section while a document is read."""

    draft: Draft
    level: int
    prose: list[tuple[Any, str]] = field(default_factory=list)  # (position key, text)
    slugs: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    data: Any = None  # the format's own bookkeeping (line ranges, heading text …)

    def next_slug(self, kind: str) -> str:
        n = self.counters.get(kind, 0) + 1
        self.counters[kind] = n
        return unique_slug(f"{kind}-{n}", self.slugs)


def short_line(text: str) -> str:
    """The default table-title rule: a prose line, squashed, if it is short."""
    return squash(text)


class SectionBuilder:
    def __init__(self, root: Draft, context_lines: int, *, root_level: int = 0,
                 title_line: Callable[[str], str] = short_line) -> None:
        self.root = Section(root, root_level)
        self.stack = [self.root]
        self.sections = [self.root]
        self.context_lines = max(0, context_lines)
        self.title_line = title_line
        self.anchors: dict[str, int] = {}
        self.leaves: list[tuple[Draft, Section, Any]] = []

    @property
    def current(self) -> Section:
        return self.stack[-1]

    def close(self, level: int, ceiling: float = math.inf) -> list[Section]:
        """Close the open sections whose level is in ``level..ceiling``, innermost first."""
        closed = []
        while len(self.stack) > 1 and level <= self.stack[-1].level <= ceiling:
            closed.append(self.stack.pop())
        return closed

    def pop_to(self, section: Section) -> list[Section]:
        """Close every section opened inside ``section``, then ``section`` itself."""
        closed = []
        while len(self.stack) > 1 and section in self.stack:
            closed.append(self.stack.pop())
            if closed[-1] is section:
                break
        return closed

    def open(self, draft: Draft, level: int, slug: str, anchor: str | None = None) -> tuple[Section, str]:
        """Add ``draft`` under the current section and make it current; ``slug`` and
        ``anchor`` are made unique (among siblings, in the document)."""
        parent = self.current
        draft.slug = unique_slug(slug, parent.slugs)
        unique_anchor = unique_slug(anchor, self.anchors) if anchor is not None else ""
        parent.draft.add(draft)
        section = Section(draft, level)
        self.stack.append(section)
        self.sections.append(section)
        return section, unique_anchor

    def prose(self, key: Any, text: str, section: Section | None = None) -> None:
        (section or self.current).prose.append((key, text))

    def leaf(self, draft: Draft, key: Any, section: Section | None = None) -> Draft:
        section = section or self.current
        draft.slug = section.next_slug(draft.kind)
        section.draft.add(draft)
        self.leaves.append((draft, section, key))
        return draft

    def finish(self) -> None:
        """Context lines for every leaf and titles for untitled tables."""
        keys: dict[int, list[Any]] = {}
        n = self.context_lines
        for draft, section, key in self.leaves:
            prose = section.prose
            if id(section) not in keys:
                keys[id(section)] = [k for k, _ in prose]
            k = bisect.bisect_left(keys[id(section)], key)
            before = prose[max(0, k - n):k] if n else []
            after = prose[k:k + n] if n else []
            draft.attrs["context_before"] = "\n".join(text for _, text in before)
            draft.attrs["context_after"] = "\n".join(text for _, text in after)
            if draft.kind == "table" and not draft.title:
                above = self.title_line(prose[k - 1][1]) if k else ""
                draft.title = above if 0 < len(above) <= SHORT_TITLE else f"table in {section.draft.title}"
