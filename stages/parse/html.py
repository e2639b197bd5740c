"""HTML → :class:`ParsedFile`: sections by heading (and by nested list item),
plus code/table/image leaves and outgoing links.

Tokenising is left to the stdlib :class:`html.parser.HTMLParser`, whose events
build a small element tree (:mod:`stages.parse.html_tree`); that tree is then
walked once here, with an explicit stack, so 5,000 nested ``<div>`` cost no
Python recursion anywhere.

Hierarchy signals are those of a generic HTML chunker:

* ``h1``–``h6`` open sections nested by level (subkind ``h{n}``);
* a list item that itself holds a nested ``<ul>``/``<ol>`` becomes a section
  (subkind ``li``) whose nested items are its children; flat lists stay as
  lines of their section (``- item`` / ``1. item``).

Line numbers come from ``HTMLParser.getpos()`` and are 1-based, inclusive. A
heading section runs from its heading's line to the last line of content
before the next heading of the same or a higher level (text, an end tag, a
leaf such as ``<img>``; blank lines and the start tags that merely open the
next heading's ``<section>`` do not count, nor do ``</body>``/``</html>``). A
list-item section runs from ``<li>`` to ``</li>`` (or its last content when
the end tag is omitted); leaves span their element.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import unquote

from strata.stages.parse.markdown import resolve_src
from strata.stages.parse.common import file_stem as _stem, squash as _squash
from strata.stages.parse.common import is_external, parse_or_fallback
from strata.stages.parse.model import Draft, ParsedFile, Reference
from strata.stages.parse.html_tree import (
    BLOCK, HEADINGS, LISTS, NOT_CONTENT, SKIP, El, LinkTracker, TreeBuilder, Txt, gather, holds_list, own_text,
)
from strata.stages.parse.sections import SHORT_TITLE, Section, SectionBuilder, github_slug

__all__ = ["parse_html"]

# Nested-list sections deeper than this stay as text lines (keeps the draft
# tree shallow on list bombs; downstream code walks it recursively).
_MAX_LIST_SECTIONS = 8
_LANG_CLASS = re.compile(r"^(?:language|lang)-(.+)$")
_LIST_PREFIX = re.compile(r"^(?:- |\d{1,9}\. )")


# --------------------------------------------------------------------------
# public entry point


def parse_html(text: str, path: str, *, context_lines: int = 5) -> ParsedFile:
    """Parse one HTML file into a draft tree and its outgoing links; never
    raises (:func:`~strata.stages.parse.common.parse_or_fallback`)."""
    return parse_or_fallback(_Builder, text, path, context_lines, "html")


# --------------------------------------------------------------------------
# helpers


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _shorten(text: str, limit: int = SHORT_TITLE) -> str:
    text = _squash(text)
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def _language(*elements: El | None) -> str | None:
    for el in elements:
        if el is None:
            continue
        for cls in el.attrs.get("class", "").split():
            m = _LANG_CLASS.match(cls)
            if m and m.group(1).strip():
                return m.group(1).strip().lower()
        for key in ("data-lang", "data-language"):
            if el.attrs.get(key, "").strip():
                return el.attrs[key].strip().lower()
    return None


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


# --------------------------------------------------------------------------
# stage 2: tree → drafts


# Section levels: 0 the file, 1-6 headings, list-item sections below every heading.
# Prose is keyed by its index in its section; a leaf by the count of prose lines
# before it, +0.5 when the line being built (the sentence around an inline image)
# counts as before it, -0.5 otherwise.
_LI_LEVEL = 100


class _Builder:
    def __init__(self, text: str, path: str, context_lines: int) -> None:
        self.path = path
        self.context_lines = context_lines
        self.text = _normalise(text.lstrip("\ufeff"))
        self.lines = self.text.split("\n")
        if self.lines and self.lines[-1] == "" and len(self.lines) > 1:
            self.lines.pop()
        self.nlines = max(1, len(self.lines))
        self.notes: list[str] = []
        self.references: list[Reference] = []
        self.buf: list[str] = []
        self.buf_line: int | None = None
        self.buf_text = False
        self.buf_prefix = ""
        self.links = LinkTracker()
        self.lists: list[list[Any]] = []  # [ordered, counter]
        # (caption, figure, ids of its direct children) for each open <figure>
        self.figures: list[tuple[str, El, set[int]]] = []
        self.section_ids: list[list[Any]] = []  # [id, claimed]
        self.li_sections = 0
        self.doc_title: str | None = None
        self.first_h1: str | None = None
        # Last line of content walked so far (text, end tags, leaves); where
        # a section closed by the next heading ends.
        self.last_line = 1

    # ---- driver ---------------------------------------------------------

    def build(self) -> ParsedFile:
        tree = TreeBuilder()
        try:
            tree.feed(self.text)
            tree.close()
        except Exception as exc:  # noqa: BLE001 - keep what was read so far
            line = tree.getpos()[0]
            self.notes.append(f"html tokenizer stopped near line {line}: {type(exc).__name__}: {exc}")
        tree.finish()
        if tree.stray:
            self.notes.append(f"{tree.stray} stray end tag(s) ignored")
        if tree.unclosed:
            listed = ", ".join(f"<{t}>×{n}" if n > 1 else f"<{t}>" for t, n in sorted(tree.unclosed.items())[:10])
            self.notes.append(f"unclosed element(s) closed at end of file: {listed}")

        root = Draft(kind="file", subkind="html", title="", text="", start_line=1, end_line=self.nlines)
        self.sections = SectionBuilder(root, self.context_lines, title_line=_table_title_line)
        self.sections.root.data = ""
        self._walk(tree.root)
        self._finish()
        return ParsedFile(root=root, references=self.references, notes=self.notes)

    @property
    def scope(self) -> Section:
        return self.sections.current

    def _walk(self, top: El) -> None:
        """One pass over the tree with an explicit stack of enter/exit frames."""
        work: list[tuple[bool, Any, Any]] = [(False, c, None) for c in reversed(top.children)]
        while work:
            exiting, node, info = work.pop()
            if exiting:
                self._exit(node, info)
                continue
            if isinstance(node, Txt):
                self._on_text(node)
                continue
            tag = node.tag
            if tag in SKIP:
                continue
            descend, info = self._enter(node)
            if not descend and tag not in NOT_CONTENT and node.end > self.last_line:
                self.last_line = node.end
            if descend:
                work.append((True, node, info))
                work.extend((False, c, None) for c in reversed(node.children))

    # ---- text lines -----------------------------------------------------

    def _on_text(self, t: Txt) -> None:
        s = t.text
        self.links.text(s)
        if not s.strip():
            if self.buf:
                self.buf.append(" ")
            return
        lead = len(s) - len(s.lstrip())
        if self.buf_line is None:
            self.buf_line = t.line + s.count("\n", 0, lead)
        end = t.line + s.count("\n", 0, len(s.rstrip()))
        if end > self.last_line:
            self.last_line = end
        self.buf.append(s)
        self.buf_text = True

    def _break(self) -> None:
        if self.buf_text:
            text = _squash("".join(self.buf))
            if text:
                self.sections.prose(len(self.scope.prose), self.buf_prefix + text)
        self.buf = []
        self.buf_line = None
        self.buf_text = False
        self.buf_prefix = ""

    # ---- elements -------------------------------------------------------

    def _enter(self, el: El) -> tuple[bool, Any]:
        tag = el.tag
        if tag == "title":
            if self.doc_title is None:
                title = _squash(gather(el).text)
                if title:
                    self.doc_title = title
            return False, None
        if tag in HEADINGS:
            self._heading(el)
            return False, None
        if tag == "pre":
            self._pre(el)
            return False, None
        if tag == "table":
            self._table(el)
            return False, None
        if tag == "img":
            fig = self.figures[-1] if self.figures else None
            self._image(el, fig[0] if fig else "", fig[1] if fig else None)
            return False, None
        if tag == "br" or tag == "hr":
            self._break()
            return False, None
        if tag == "figcaption" and self.figures and id(el) in self.figures[-1][2]:
            return False, None  # already read as the figure's caption
        if tag == "figure":
            self._break()
            captions = [c for c in el.children if isinstance(c, El) and c.tag == "figcaption"]
            caption = ""
            if captions:
                g = gather(captions[0])
                caption = _squash(g.text)
                self._add_links(g.links, self.scope.draft)
            self.figures.append((caption, el, {id(c) for c in el.children}))
            return True, "figure"
        if tag == "a":
            self.links.enter(el, self.scope.draft)
            return True, "a"
        if tag in LISTS:
            self._break()
            ordered = tag == "ol"
            try:
                start = int(el.attrs.get("start", "1").strip() or 1)
            except ValueError:
                start = 1
            self.lists.append([ordered, start - 1])
            return True, "list"
        if tag == "li":
            return True, self._list_item(el)
        if tag in ("section", "article") and el.attrs.get("id", "").strip():
            self._break()
            self.section_ids.append([el.attrs["id"].strip(), False])
            return True, "section-id"
        if tag in BLOCK:
            self._break()
            return True, "block"
        return True, None

    def _exit(self, el: El, info: Any) -> None:
        if el.tag not in NOT_CONTENT and el.end > self.last_line:
            self.last_line = el.end
        if info is None:
            return
        if info == "a":
            self.links.exit(el)
            self._flush_links()
            return
        self._break()
        if info == "figure":
            self.figures.pop()
        elif info == "list":
            self.lists.pop()
        elif info == "section-id":
            self.section_ids.pop()
        elif isinstance(info, Section):  # a list-item section ends
            for closed in self.sections.pop_to(info):
                self._close_scope(closed, el.end)

    # ---- headings -------------------------------------------------------

    def _heading(self, el: El) -> None:
        self._break()
        level = int(el.tag[1])
        g = gather(el, heading=True)
        title = _squash(g.text) or "Untitled section"
        if level == 1 and self.first_h1 is None and g.text.strip():
            self.first_h1 = title
        for closed in self.sections.close(level, ceiling=6):
            self._close_scope(closed, self.last_line)
        draft = Draft(kind="section", subkind=f"h{level}", title=title, text="", start_line=el.line,
                      end_line=el.end)
        section, anchor = self.sections.open(draft, level, github_slug(title) or "section",
                                             github_slug(title))
        section.data = title
        anchors = [anchor]
        extra = [el.attrs.get("id", "").strip(), *g.ids]
        for entry in self.section_ids:
            if not entry[1]:
                entry[1] = True
                extra.append(entry[0])
        for a in extra:
            if a and a not in anchors:
                anchors.append(a)
        draft.attrs = {"anchor": anchor, "anchors": anchors}
        self._add_links(g.links, draft)
        for img in g.images:
            self._image(img)

    def _close_scope(self, scope: Section, end: int) -> None:
        scope.draft.end_line = max(scope.draft.start_line or 1, end)
        if scope.level == _LI_LEVEL:
            self.li_sections -= 1

    # ---- lists ----------------------------------------------------------

    def _list_item(self, el: El) -> Any:
        self._break()
        ctx = self.lists[-1] if self.lists else None
        ordered = bool(ctx and ctx[0])
        if ctx is not None:
            value = el.attrs.get("value", "").strip()
            try:
                ctx[1] = int(value) if value else ctx[1] + 1
            except ValueError:
                ctx[1] += 1
        number = ctx[1] if ctx else 1
        if self.li_sections < _MAX_LIST_SECTIONS and holds_list(el):
            title = _shorten(own_text(el)) or f"Item {number}"
            draft = Draft(kind="section", subkind="li", title=title, text="", start_line=el.line,
                          end_line=el.end, attrs={"list": "ol" if ordered else "ul", "position": number})
            section, _ = self.sections.open(
                draft, _LI_LEVEL, github_slug(title)[:60].strip("-") or f"item-{number}")
            section.data = ""
            self.li_sections += 1
            return section
        self.buf_prefix = f"{number}. " if ordered else "- "
        return "block"

    # ---- leaves ---------------------------------------------------------

    def _position(self) -> float:
        """The key of a leaf at this point of the walk (see the levels note above)."""
        return len(self.scope.prose) + (0.5 if self.buf_text else -0.5)

    def _pre(self, el: El) -> None:
        self._break()
        g = gather(el, raw=True)
        body_lines = g.text.split("\n")
        while body_lines and not body_lines[0].strip():
            body_lines.pop(0)
        while body_lines and not body_lines[-1].strip():
            body_lines.pop()
        body = "\n".join(line.rstrip() for line in body_lines)
        code_child = next((c for c in el.children if isinstance(c, El) and c.tag == "code"), None)
        lang = _language(el, code_child)
        scope = self.scope
        self._add_links(g.links, scope.draft)
        if not body.strip():
            return
        attrs: dict[str, Any] = {}
        caption = self._figure_caption(el)
        if caption:
            attrs["caption"] = caption
        self.sections.leaf(Draft(kind="code", subkind="pre", title=f"{lang or 'code'} block in "
                                 f"{scope.draft.title}", text=body, start_line=el.line,
                                 end_line=max(el.line, el.end), language=lang, attrs=attrs),
                           len(scope.prose) - 0.5)

    def _figure_caption(self, el: El) -> str:
        """The caption of a figure ``el`` sits directly in, if any."""
        if self.figures and id(el) in self.figures[-1][2]:
            return self.figures[-1][0]
        return ""

    def _table(self, el: El) -> None:
        self._break()
        scope = self.scope
        rows: list[tuple[list[str], bool]] = []
        row: list[str] | None = None
        row_th = True
        row_head = False
        cell: list[str] | None = None
        cell_el: El | None = None
        thead = 0
        caption = ""
        links = LinkTracker()
        images: list[El] = []

        def end_row() -> None:
            nonlocal row
            if row:
                rows.append((row, row_th or row_head))
            row = None

        work: list[tuple[bool, Any]] = [(False, c) for c in reversed(el.children)]
        while work:
            exiting, node = work.pop()
            if exiting:
                tag = node.tag
                if tag == "a":
                    links.exit(node)
                elif node is cell_el:
                    assert row is not None and cell is not None
                    row.append(_squash("".join(cell)))
                    cell, cell_el = None, None
                elif cell is not None:
                    if tag in BLOCK:
                        cell.append(" ")
                elif tag == "tr":
                    end_row()
                elif tag == "thead":
                    thead -= 1
                continue
            if isinstance(node, Txt):
                links.text(node.text)
                if cell is not None:
                    cell.append(node.text)
                continue
            tag = node.tag
            if tag in SKIP:
                continue
            if tag == "img":
                images.append(node)
                continue
            if cell is None:
                if tag == "caption":
                    g = gather(node)
                    caption = caption or _squash(g.text)
                    links.done.extend(g.links)
                    images.extend(g.images)
                    continue
                if tag == "tr":
                    end_row()
                    row, row_th, row_head = [], True, thead > 0
                elif tag in ("td", "th"):
                    if row is None:
                        row, row_th, row_head = [], True, thead > 0
                    if tag == "td":
                        row_th = False
                    cell, cell_el = [], node
                elif tag == "thead":
                    thead += 1
            elif tag == "br":
                cell.append(" ")
            if tag == "a":
                links.enter(node)
            work.append((True, node))
            work.extend((False, c) for c in reversed(node.children))
        if cell is not None and row is not None:
            row.append(_squash("".join(cell)))
        end_row()
        links.close_all()
        self._add_links(links.done, scope.draft)

        if rows and any(any(c for c in r) for r, _ in rows):
            head_at = next((i for i, (_, is_head) in enumerate(rows) if is_head), 0)
            header = rows[head_at][0]
            body = [r for i, (r, _) in enumerate(rows) if i != head_at]
            width = max(len(r) for r, _ in rows)
            header = header + [""] * (width - len(header))
            out = ["| " + " | ".join(_md_cell(c) for c in header) + " |",
                   "| " + " | ".join("---" for _ in header) + " |"]
            for r in body:
                r = r + [""] * (width - len(r))
                out.append("| " + " | ".join(_md_cell(c) for c in r) + " |")
            caption = caption or self._figure_caption(el)
            attrs: dict[str, Any] = {"header": header, "rows": len(body)}
            if caption:
                attrs["caption"] = caption
            self.sections.leaf(Draft(kind="table", subkind="html", title=caption,  # else the builder's
                                     text="\n".join(out), start_line=el.line, end_line=max(el.line, el.end),
                                     attrs=attrs), len(scope.prose) - 0.5)
        for img in images:
            self._image(img)

    def _image(self, el: El, caption: str = "", figure: El | None = None) -> None:
        src = (el.attrs.get("src") or el.attrs.get("data-src") or "").strip()
        if not src:
            return
        alt = _squash(el.attrs.get("alt", ""))
        name = posixpath.basename(src.split("#", 1)[0].split("?", 1)[0].rstrip("/"))
        if src.lower().startswith("data:"):
            name = ""
        label = alt or caption or unquote(name) or "image"
        attrs: dict[str, Any] = {"src": src, "alt": alt}
        attrs.update(resolve_src(src, self.path))
        if caption:
            attrs["caption"] = caption
        if el.attrs.get("title", "").strip():
            attrs["image_title"] = el.attrs["title"].strip()
        start, end = (figure.line, max(figure.line, figure.end)) if figure is not None else (el.line, el.line)
        self.sections.leaf(Draft(kind="image", subkind="figure" if figure is not None else "html",
                                 title=label, text=label, start_line=start, end_line=end, attrs=attrs),
                           self._position())

    # ---- links ----------------------------------------------------------

    def _flush_links(self) -> None:
        done, self.links.done = self.links.done, []
        for href, text, line, source in done:
            self._add_link(href, text, line, source)

    def _add_links(self, links: list[tuple[str, str, int, Any]], source: Draft) -> None:
        for href, text, line, _ in links:
            self._add_link(href, text, line, source)

    def _add_link(self, href: str, text: str, line: int, source: Draft | None) -> None:
        href = href.strip()
        if not href or is_external(href):
            return
        self.references.append(
            Reference(
                source=source if source is not None else self.scope.draft,
                target=href,
                type="jump",
                relation="links_to",
                attrs={"text": text, "line": line},
            )
        )

    # ---- subtree text ---------------------------------------------------

    # ---- after the walk -------------------------------------------------

    def _finish(self) -> None:
        self._break()
        self.links.close_all()
        self._flush_links()
        for section in self.sections.stack[1:]:
            section.draft.end_line = max(section.draft.start_line or 1, min(self.last_line, self.nlines))
        root = self.sections.root.draft
        root.title = self.doc_title or self.first_h1 or _stem(self.path)
        for section in self.sections.sections:
            lines = [text for _, text in section.prose]
            if section.data:
                lines.insert(0, section.data)
            section.draft.text = "\n".join(lines) or section.draft.title
        self.sections.finish()
        if not root.text.strip():
            root.text = root.title


def _table_title_line(words: str) -> str:
    """A caption-like prose line above a table; list items are not captions."""
    return "" if _LIST_PREFIX.match(words) else words
