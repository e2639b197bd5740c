"""Markdown → :class:`ParsedFile`: sections by heading, plus code/table/image leaves.

Tokenising is left to markdown-it-py (CommonMark + pipe tables + front
matter) because hand-written regex Markdown parsers are both wrong on edge
cases and prone to catastrophic backtracking on hostile input. Everything
here works on markdown-it's *flat* token stream and on line numbers
(``token.map``), so deep nesting never turns into Python recursion.

Line bookkeeping: the input is split into lines once; every node's
``start_line``/``end_line`` is 1-based and inclusive. Section text is built
from raw lines, minus the lines owned by code/table/image children, so it
reads like the source prose.

About 600 lines because one builder walks one token stream with one line bookkeeping.
"""

from __future__ import annotations

import bisect
import functools
import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable
from urllib.parse import unquote

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from strata.stages.parse.common import file_stem as _stem, squash as _squash
from strata.stages.parse.common import is_external, parse_or_fallback, split_lines
from strata.stages.parse.markdown_html import HtmlScan
from strata.stages.parse.model import Draft, ParsedFile, Reference
from strata.stages.parse.sections import Section, SectionBuilder, github_slug

__all__ = ["parse_markdown"]

# markdown-it recurses once per container level; 50 keeps Python's stack
# comfortably shallow while allowing ~20 nested lists. Deeper content is not
# lost: it simply stays as prose in the section text.
_MAX_NESTING = 50
# How far (in lines) to look for a link/image target when markdown-it's
# inline tokens lost track of line breaks (multi-line code spans, titles).
_SEEK_WINDOW = 5
# An HTML table whose closing tag is further away than this is treated as
# only the html_block that opened it; bounds work on hostile input.
_HTML_TABLE_SCAN = 2000
# Re-parsing after over-deep nesting may read at most this many times the
# file's size in total (see _Builder._tokenize).
_RESTART_BUDGET = 3

_CONTAINER_PREFIX = re.compile(r"[ \t>]*")
_LIST_MARKER = re.compile(r"[ \t>]*(?:[-*+][ \t]+|\d{1,9}[.)][ \t]+)?")


@functools.lru_cache(maxsize=2)
def _markdown(front_matter: bool = True) -> MarkdownIt:
    """Shared parsers; markdown-it keeps no per-parse state on the instance."""
    md = MarkdownIt("commonmark", {"maxNesting": _MAX_NESTING}).enable("table")
    if front_matter:
        md.use(front_matter_plugin)
    # Keep hrefs/srcs as the author wrote them (markdown-it would
    # percent-encode non-ASCII), so targets match file names on disk.
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    return md


# --------------------------------------------------------------------------
# public entry point


def parse_markdown(text: str, path: str, *, context_lines: int = 5) -> ParsedFile:
    """Parse one Markdown file into a draft tree and its outgoing links; never
    raises (:func:`~strata.stages.parse.common.parse_or_fallback`)."""
    return parse_or_fallback(_Builder, text, path, context_lines, "markdown")


# --------------------------------------------------------------------------
# small pure helpers


def _plain_text(children: Iterable[Token] | None, *, images: bool = True) -> str:
    """Words of an inline token list without markup (emphasis, links, code
    ticks, html tags). Iterative because image alt text nests tokens."""
    parts: list[str] = []
    stack = list(reversed(list(children or [])))
    while stack:
        tok = stack.pop()
        if tok.type in ("text", "code_inline"):
            parts.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif tok.type == "image" and images:
            stack.extend(reversed(tok.children or []))
    return "".join(parts)


def _language(info: str) -> str | None:
    """First word of a fence info string (``ts title=x`` → ``ts``, ``{.py}`` → ``py``)."""
    words = info.split()
    if not words:
        return None
    lang = words[0].strip("{}.,;").lower()
    return lang or None


def resolve_src(src: str, path: str) -> dict[str, Any]:
    """Resolve an image src against the directory of ``path`` (corpus-relative).

    Returns the attrs to merge: ``resolved`` plus ``external`` or
    ``outside_root`` when it cannot point at a corpus file.
    """
    if is_external(src):
        return {"resolved": None, "external": True}
    target = unquote(src.split("#", 1)[0].split("?", 1)[0]).replace("\\", "/")
    if not target:
        return {"resolved": None}
    if target.startswith("/"):  # GitHub treats a leading slash as repo root
        joined = target.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(path.replace("\\", "/")), target)
    norm = posixpath.normpath(joined)
    if norm == ".." or norm.startswith("../"):
        return {"resolved": None, "outside_root": True}
    return {"resolved": norm}


# --------------------------------------------------------------------------
# the builder


@dataclass
class _Span:
    """A section's own lines (0-based, end exclusive): from its heading up to the
    next heading of any level."""

    own_start: int
    heading_end: int  # first line after the heading itself (setext: 2 lines)
    own_end: int = 0


class _Builder:
    """One parse of one file: walks tokens once, then fills text and context.

    Sections are tracked with an explicit stack (never recursion) so that
    thousands of headings or deep nesting cost nothing extra.
    """

    def __init__(self, text: str, path: str, context_lines: int) -> None:
        self.path = path
        self.context_lines = context_lines
        self.lines = split_lines(text.lstrip("\ufeff"))
        self.nlines = len(self.lines)
        self.excluded = bytearray(self.nlines)
        self.notes: list[str] = []
        self.references: list[Reference] = []
        self.html_table_until = 0
        self._table_delta: list[int] | None = None

    # ---- driver ---------------------------------------------------------

    def build(self) -> ParsedFile:
        tokens = self._tokenize()
        self.heading_starts = [t.map[0] for t in tokens if t.type == "heading_open" and t.map]
        attrs = self._front_matter(tokens)
        root = Draft(
            kind="file",
            subkind="markdown",
            title=self._file_title(tokens, attrs),
            text="",
            start_line=1,
            end_line=max(1, self.nlines),
            attrs=attrs,
        )
        self.sections = SectionBuilder(root, self.context_lines, title_line=_table_title_line)
        self.sections.root.data = _Span(0, 0)
        self._walk(tokens)
        self._finish()
        return ParsedFile(root=root, references=self.references, notes=self.notes)

    def _tokenize(self) -> list[Token]:
        """Token stream with line maps relative to the whole file.

        When a container nests deeper than markdown-it's ``maxNesting`` it
        swallows the rest of the input, so everything after a hostile
        1,000-level list would lose its structure. In that case parsing
        restarts (in a loop, not recursively) at the next line that must be
        top level again: an unindented, non-quote line after a blank line.
        The skipped lines stay in the text as prose. Each restart re-reads
        the remainder, so the total characters parsed are capped at a few
        times the file size to keep many such bombs from going quadratic.
        """
        tokens: list[Token] = []
        offset = 0
        budget = _RESTART_BUDGET * (sum(map(len, self.lines)) + self.nlines) + 500_000
        while True:
            source = "\n".join(self.lines[offset:]) + "\n"
            budget -= len(source)
            segment = _markdown(offset == 0).parse(source)
            for tok in segment:
                if tok.map:
                    tok.map = [tok.map[0] + offset, tok.map[1] + offset]
            tokens.extend(segment)
            if max((t.level for t in segment), default=0) < _MAX_NESTING - 1:
                return tokens
            covered = max((t.map[1] for t in segment if t.map and t.nesting == 0), default=offset)
            restart = self._top_level_line(max(covered, offset + 1))
            self.notes.append(
                f"nesting deeper than {_MAX_NESTING} levels before line {covered + 1}; "
                + (f"structure resumes at line {restart + 1}" if restart is not None else "rest kept as text")
            )
            if restart is None:
                return tokens
            if budget <= 0:
                self.notes.append("too many over-nested containers; rest kept as text")
                return tokens
            offset = restart

    def _top_level_line(self, start: int) -> int | None:
        for j in range(max(start, 1), self.nlines):
            line = self.lines[j]
            if line[:1] not in ("", " ", "\t", ">") and not self.lines[j - 1].strip():
                return j
        return None

    def _walk(self, tokens: list[Token]) -> None:
        """Single flat pass; markdown-it already flattened nesting for us."""
        for i, tok in enumerate(tokens):
            kind = tok.type
            if kind == "heading_open":
                self._on_heading(tok, tokens[i + 1] if i + 1 < len(tokens) else None)
            elif kind == "inline":
                prev = tokens[i - 1].type if i else ""
                ctx = {"heading_open": "heading", "th_open": "cell", "td_open": "cell"}.get(prev, "para")
                self._on_inline(tok, ctx)
            elif kind in ("fence", "code_block"):
                self._on_code(tok)
            elif kind == "table_open":
                self._on_pipe_table(tokens, i)
            elif kind == "html_block":
                self._on_html_block(tok)

    @property
    def scope(self) -> Section:
        return self.sections.current

    def _mark(self, start: int, end: int) -> None:
        for j in range(max(0, start), min(end, self.nlines)):
            self.excluded[j] = 1

    # ---- file level -----------------------------------------------------

    def _front_matter(self, tokens: list[Token]) -> dict[str, Any]:
        """Parse YAML front matter into ``attrs``; keep the raw text if unusable."""
        tok = next((t for t in tokens[:1] if t.type == "front_matter"), None)
        if tok is None:
            return {}
        if tok.map:
            self._mark(*tok.map)
        raw = tok.content
        try:
            data = yaml.safe_load(raw) if raw.strip() else {}
            if data is None:
                data = {}
            if not isinstance(data, dict):
                self.notes.append(f"front matter is not a mapping ({type(data).__name__}); kept raw")
                return {"front_matter_raw": raw}
            # JSON round-trip: dates and odd keys become plain strings so the
            # attrs survive any downstream serialisation.
            return {"front_matter": json.loads(json.dumps(data, default=str))}
        except Exception as exc:  # noqa: BLE001 - YAML errors, recursion, bad keys
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.notes.append(f"front matter could not be parsed: {first}")
            return {"front_matter_raw": raw}

    def _file_title(self, tokens: list[Token], attrs: dict[str, Any]) -> str:
        fm_title = attrs.get("front_matter", {}).get("title")
        if isinstance(fm_title, (str, int, float)) and str(fm_title).strip():
            return _squash(str(fm_title))
        for i, tok in enumerate(tokens[:-1]):
            if tok.type == "heading_open":
                title = _squash(_plain_text(tokens[i + 1].children, images=False))
                if title:
                    return title
                break
        return _stem(self.path)

    # ---- sections -------------------------------------------------------

    def _on_heading(self, tok: Token, inline: Token | None) -> None:
        """Open a section; close every open section of same-or-deeper level."""
        if not tok.map:
            return
        start, end = tok.map
        level = int(tok.tag[1]) if len(tok.tag) == 2 and tok.tag[1].isdigit() else 1
        children = inline.children if inline is not None and inline.type == "inline" else []
        raw_title = _plain_text(children, images=False).strip()
        title = _squash(raw_title) or _squash(_plain_text(children)) or "Untitled section"

        for closed in self.sections.close(level):
            closed.draft.end_line = start  # 1-based line just before this heading
        draft = Draft(kind="section", subkind=f"h{level}", title=title, text="",
                      start_line=start + 1, end_line=self.nlines)
        section, anchor = self.sections.open(draft, level, github_slug(title) or "section",
                                             github_slug(raw_title))
        anchors = [anchor]
        for a in self._explicit_anchors(start):
            if a not in anchors:
                anchors.append(a)
        draft.attrs = {"anchor": anchor, "anchors": anchors}
        section.data = _Span(start, max(end, start + 1))

    def _explicit_anchors(self, line: int) -> list[str]:
        """``<a name=..>``/``<a id=..>`` on the heading line or the one before."""
        found: list[str] = []
        for j in (line - 1, line):
            if 0 <= j < self.nlines and "<a" in self.lines[j].lower():
                found.extend(HtmlScan.run(self.lines[j]).anchors)
        return found

    # ---- code -----------------------------------------------------------

    def _on_code(self, tok: Token) -> None:
        if not tok.map:
            return
        start, end = tok.map
        self._mark(start, end)
        if tok.type == "fence":
            subkind, info = "fenced", tok.info.strip()
            lang = _language(info)
            if not self._fence_closed(tok):
                self.notes.append(f"unterminated code fence at line {start + 1}")
        else:
            subkind, info, lang = "indented", "", None
        body = tok.content.rstrip("\n")
        if not body.strip():  # nothing worth indexing
            return
        attrs: dict[str, Any] = {"info": info} if info else {}
        self.sections.leaf(Draft(kind="code", subkind=subkind, title=f"{lang or 'code'} block in "
                                 f"{self.scope.draft.title}", text=body, start_line=start + 1,
                                 end_line=end, language=lang, attrs=attrs), end)

    def _fence_closed(self, tok: Token) -> bool:
        """markdown-it silently closes a fence at EOF / container end; detect it
        by checking that the last mapped line really is a closing fence."""
        start, end = tok.map or (0, 0)
        if end - start < 2 or not tok.markup:
            return False
        last = self.lines[end - 1] if end - 1 < self.nlines else ""
        last = last[_CONTAINER_PREFIX.match(last).end():].rstrip()
        char = tok.markup[0]
        return len(last) >= len(tok.markup) and last == char * len(last)

    # ---- tables ---------------------------------------------------------

    def _on_pipe_table(self, tokens: list[Token], i: int) -> None:
        tok = tokens[i]
        if not tok.map:
            return
        start, end = tok.map
        self._mark(start, end)
        headers: list[str] = []
        rows = 0
        in_body = False
        for j in range(i + 1, len(tokens)):
            t = tokens[j]
            if t.type == "table_close":
                break
            if t.type == "tbody_open":
                in_body = True
            elif t.type == "tr_open" and in_body:
                rows += 1
            elif t.type == "inline" and tokens[j - 1].type == "th_open":
                headers.append(_squash(_plain_text(t.children)))
        self._add_table("pipe", start, end, headers, rows)

    def _on_html_block(self, tok: Token) -> None:
        """HTML blocks can hold a table, images and links."""
        if not tok.map:
            return
        start, end = tok.map
        content = tok.content
        low = content.lower()
        in_table = start < self.html_table_until
        if "<table" in low and not in_table:
            table_end = self._html_table_end(start, end)
            scan = HtmlScan.run("\n".join(self.lines[start:table_end]))
            self._mark(start, table_end)
            self.html_table_until = table_end
            self._add_table("html", start, table_end, scan.headers, scan.rows)
            in_table = True
        if "<img" not in low and "<a" not in low:
            return
        scan = HtmlScan.run(content)
        for line, a in scan.images:
            self._add_image("html", a.get("src", ""), a.get("alt", ""), start + line, a.get("title"))
        for line, href, text in scan.links:
            self._add_link(href, text, start + line)
        if scan.images and not scan.has_text and not in_table:
            self._mark(start, end)  # a block that is only images: not prose

    def _html_table_end(self, start: int, end: int) -> int:
        """A raw HTML table often spans several html_blocks (blank lines split
        them); follow ``<table``/``</table`` depth over the raw lines, never
        past the next heading, and fall back to this block alone."""
        if self._table_delta is None:
            self._table_delta = [
                (low.count("<table") - low.count("</table")) if "table" in low else 0
                for low in (line.lower() for line in self.lines)
            ]
        delta = self._table_delta
        if sum(delta[start:end]) <= 0:
            return end
        nxt = bisect.bisect_right(self.heading_starts, start)
        limit = self.heading_starts[nxt] if nxt < len(self.heading_starts) else self.nlines
        limit = min(limit, start + _HTML_TABLE_SCAN)
        depth = 0
        for j in range(start, limit):
            depth += delta[j]
            if depth <= 0 and j >= end - 1:
                return j + 1
        return end

    def _add_table(self, subkind: str, start: int, end: int, headers: list[str], rows: int) -> None:
        self.sections.leaf(Draft(kind="table", subkind=subkind, title="",  # titled by the builder
                                 text="\n".join(self.lines[start:end]), start_line=start + 1,
                                 end_line=end, attrs={"header": headers, "rows": rows}), end)

    # ---- inline: images and links --------------------------------------

    def _on_inline(self, tok: Token, ctx: str) -> None:
        """Images and links inside one paragraph / heading / table cell.

        Inline children carry no line numbers, so the line is tracked by
        counting breaks and re-synchronised by looking for the target text
        on the next few raw lines.
        """
        if not tok.map or not tok.children:
            return
        line, last = tok.map[0], max(tok.map[0], tok.map[1] - 1)
        image_lines: set[int] = set()
        text_lines: set[int] = set()
        links: list[tuple[str, int, list[str]]] = []  # markdown links, nested
        html_links: list[tuple[str, int, list[str]]] = []  # <a href> opened inline
        for child in tok.children:
            kind = child.type
            if kind in ("softbreak", "hardbreak"):
                line = min(line + 1, last)
            elif kind == "image":
                src = child.attrs.get("src", "")
                line = self._seek(line, last, str(src))
                alt = _squash(_plain_text(child.children))
                self._add_image("markdown", str(src), alt, line, child.attrs.get("title"))
                image_lines.add(line)
                for _, _, text in links + html_links:
                    text.append(alt)
            elif kind == "link_open":
                href = str(child.attrs.get("href", ""))
                line = self._seek(line, last, href)
                links.append((href, line, []))
            elif kind == "link_close" and links:
                href, at, text = links.pop()
                self._add_link(href, _squash("".join(text)), at)
            elif kind == "html_inline":
                line = self._on_html_inline(child, line, last, image_lines, html_links)
            elif kind in ("text", "code_inline"):
                if child.content.strip():
                    text_lines.add(line)
                for _, _, text in links + html_links:
                    text.append(child.content)
        for href, at, text in html_links:  # <a href> never closed
            self._add_link(href, _squash("".join(text)), at)
        if ctx == "para":
            for j in image_lines - text_lines:
                self.excluded[j] = 1  # image alone on its line: not prose

    def _on_html_inline(
        self,
        child: Token,
        line: int,
        last: int,
        image_lines: set[int],
        html_links: list[tuple[str, int, list[str]]],
    ) -> int:
        low = child.content.lower()
        if low.startswith("</a"):
            if html_links:
                href, at, text = html_links.pop()
                self._add_link(href, _squash("".join(text)), at)
        elif low.startswith("<img") or low.startswith("<a"):
            scan = HtmlScan.run(child.content)
            for _, a in scan.images:
                src = a.get("src", "")
                line = self._seek(line, last, src)
                self._add_image("html", src, a.get("alt", ""), line, a.get("title"))
                image_lines.add(line)
            for _, href, _ in scan.links:
                line = self._seek(line, last, href)
                html_links.append((href, line, []))
        return min(line + child.content.count("\n"), last)

    def _seek(self, line: int, last: int, needle: str) -> int:
        if not needle or needle in self.lines[line]:
            return line
        for j in range(line + 1, min(last, line + _SEEK_WINDOW) + 1):
            if needle in self.lines[j]:
                return j
        return line

    def _add_image(self, subkind: str, src: str, alt: str, line: int, title: Any = None) -> None:
        if not src.strip():
            return  # ``![]()`` / ``<img>``: nothing to point at
        alt = _squash(alt or "")
        name = posixpath.basename(src.split("#", 1)[0].split("?", 1)[0].rstrip("/"))
        if is_external(src) and src.lower().startswith("data:"):
            name = ""  # a data URL has no file name worth showing
        label = alt or unquote(name) or "image"
        attrs: dict[str, Any] = {"src": src, "alt": alt}
        attrs.update(resolve_src(src, self.path))
        if title:
            attrs["image_title"] = str(title)
        self.sections.leaf(Draft(kind="image", subkind=subkind, title=label, text=label,
                                 start_line=line + 1, end_line=line + 1, attrs=attrs), line + 1)

    def _add_link(self, href: str, text: str, line: int) -> None:
        href = href.strip()
        if not href or is_external(href):
            return
        self.references.append(
            Reference(
                source=self.scope.draft,
                target=href,
                type="jump",
                relation="links_to",
                attrs={"text": text, "line": line + 1},
            )
        )

    # ---- after the walk -------------------------------------------------

    def _finish(self) -> None:
        sections = self.sections.sections
        for closed in self.sections.stack[1:]:
            closed.draft.end_line = max(closed.draft.start_line or 1, self.nlines)
        for k, section in enumerate(sections):
            nxt = sections[k + 1].data.own_start if k + 1 < len(sections) else self.nlines
            section.data.own_end = max(nxt, section.data.heading_end)
            section.draft.text = self._scope_text(section)
        root = sections[0].draft
        if not root.text.strip():
            root.text = root.title
        self.sections.finish()

    def _scope_text(self, section: Section) -> str:
        """Heading line(s) + own prose; leaf bodies and subsections left out.

        Excluded lines act as paragraph breaks so prose on either side of a
        code block does not run together. Also records the prose lines for the
        leaves' context.
        """
        span = section.data
        out: list[str] = []
        for j in range(span.own_start, min(span.own_end, self.nlines)):
            line = self.lines[j].rstrip()
            is_heading = section.level > 0 and j < span.heading_end
            if is_heading or (not self.excluded[j] and line.strip()):
                out.append(line)
                if not is_heading:
                    self.sections.prose(j, line.strip(), section)
            elif out and out[-1] != "":
                out.append("")
        while out and out[-1] == "":
            out.pop()
        return "\n".join(out)


def _table_title_line(line: str) -> str:
    """A caption-like line above a table: its words, list marker and markup removed."""
    return _squash(_plain_text(_inline_children(line[_LIST_MARKER.match(line).end():])))


def _inline_children(line: str) -> list[Token]:
    tokens = _markdown().parseInline(line)
    return tokens[0].children or [] if tokens else []
