"""Looking things up in a parser's draft tree, for the parser tests."""

from __future__ import annotations

from strata.stages.parse.model import Draft, ParsedFile


def drafts_of_kind(pf: ParsedFile, kind: str) -> list[Draft]:
    return [d for d in pf.root.walk() if d.kind == kind]


def section_titled(pf: ParsedFile, title: str) -> Draft:
    """The one section with this title (a failure lists the titles there are)."""
    found = [d for d in drafts_of_kind(pf, "section") if d.title == title]
    assert len(found) == 1, f"{title!r}: {[d.title for d in drafts_of_kind(pf, 'section')]}"
    return found[0]


def parent_of(pf: ParsedFile, node: Draft) -> Draft:
    for d in pf.root.walk():
        if any(c is node for c in d.children):
            return d
    raise AssertionError("orphan")
