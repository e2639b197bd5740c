"""HTML events → a small element tree, and reading text out of it.

The stdlib :class:`html.parser.HTMLParser` is event based and linear and never
needs a well-formed document; :class:`TreeBuilder` turns its events into an
element tree with an explicit stack, repairing the usual omissions (``<p>``,
``<li>``, ``<td>`` … closed by the next one, stray end tags ignored).
:func:`gather` reads a subtree's text, links, images and ids iteratively, so
5,000 nested ``<div>`` cost no Python recursion. Used by
:mod:`stages.parse.html`, which walks the tree into sections.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from strata.stages.parse.common import squash as _squash
from strata.stages.parse.sections import SHORT_TITLE

# Content never indexed (the element and everything inside it).
SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link",
    "meta", "param", "source", "track", "wbr",
})
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
LISTS = frozenset({"ul", "ol", "menu"})
# Elements that end the current line of prose when they open and close.
BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
    "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
    "footer", "form", "header", "hgroup", "hr", "html", "legend", "li", "main", "menu",
    "nav", "ol", "option", "p", "pre", "section", "summary", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "ul", "br", "h1", "h2", "h3", "h4", "h5", "h6",
})
# Opening one of these closes an open <p> (HTML's implied end tag).
P_CLOSERS = frozenset({
    "address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hgroup", "hr", "main", "menu", "nav", "ol", "p", "pre", "section",
    "table", "ul",
})
# End tags HTML lets authors leave out; not worth a note when missing.
OPTIONAL_END = frozenset({
    "html", "head", "body", "p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody",
    "tfoot", "option", "optgroup", "colgroup", "caption", "rt", "rp",
})
NOT_CONTENT = frozenset({"html", "head", "body"})
# Implied end tags look this far down the open-element stack (bounds work on
# hostile nesting; real documents need two or three levels).
_IMPLIED_SCAN = 64
# Bounded look-ahead inside one list item (does it hold a list? its own text).
_LI_SCAN = 2000
_LINK_NEST = 8


# --------------------------------------------------------------------------
# stage 1: events → element tree


class El:
    __slots__ = ("tag", "attrs", "line", "col", "end", "last", "children")

    def __init__(self, tag: str, attrs: dict[str, str], line: int, col: int) -> None:
        self.tag = tag
        self.attrs = attrs
        self.line = line
        self.col = col
        self.end = line
        self.last = line  # last line with content seen inside (implied ends)
        self.children: list[El | Txt] = []


class Txt:
    __slots__ = ("text", "line")

    def __init__(self, text: str, line: int) -> None:
        self.text = text
        self.line = line


class TreeBuilder(HTMLParser):
    """Element tree from the parser's events, with HTML's common repairs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = El("#document", {}, 1, 0)
        self.stack: list[El] = [self.root]
        self.open: dict[str, int] = {}
        self.skip = 0
        self.stray = 0
        self.unclosed: dict[str, int] = {}

    # ---- events ----------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line, col = self.getpos()
        self._implied_end(tag)
        el = self._leaf(tag, attrs, line, col)
        if tag in VOID:
            return
        self.stack.append(el)
        self.open[tag] = self.open.get(tag, 0) + 1
        if tag in SKIP:
            self.skip += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line, col = self.getpos()
        if tag not in VOID:
            self._implied_end(tag)
        self._leaf(tag, attrs, line, col)

    def handle_endtag(self, tag: str) -> None:
        line, col = self.getpos()
        if tag == "br":  # browsers read </br> as <br>
            self._leaf("br", [], line, col)
            return
        if self.open.get(tag, 0) <= 0:
            self.stray += 1
            return
        while True:
            top = self.stack[-1].tag
            self._pop(line if top == tag else None)
            if top == tag:
                return

    def handle_data(self, data: str) -> None:
        if self.skip or not data:
            return
        line = self.getpos()[0]
        el = self.stack[-1]
        el.children.append(Txt(data, line))
        body = data.rstrip()
        if body.strip():
            end = line + body.count("\n")
            if end > el.last:
                el.last = end

    # ---- tree upkeep ----------------------------------------------------

    def _leaf(self, tag: str, attrs: list[tuple[str, str | None]], line: int, col: int) -> El:
        a: dict[str, str] = {}
        for k, v in attrs:
            a.setdefault(k, v or "")
        el = El(tag, a, line, col)
        parent = self.stack[-1]
        parent.children.append(el)
        if line > parent.last:
            parent.last = line
        return el

    def _pop(self, end: int | None = None) -> None:
        el = self.stack.pop()
        el.end = end if end is not None else max(el.line, el.last)
        if el.end > el.last:
            el.last = el.end
        self.open[el.tag] -= 1
        if el.tag in SKIP:
            self.skip -= 1
        parent = self.stack[-1]
        if el.end > parent.last:
            parent.last = el.end

    def _implied_end(self, tag: str) -> None:
        top = self.stack[-1].tag
        if top == "p" and tag in P_CLOSERS:
            self._pop()
            top = self.stack[-1].tag
        if tag in HEADINGS and top in HEADINGS:
            self._pop()
        elif tag == "li":
            self._close_to(("li",), ("ul", "ol", "menu"))
        elif tag in ("dt", "dd"):
            self._close_to(("dt", "dd"), ("dl",))
        elif tag == "tr":
            self._close_to(("tr",), ("table", "thead", "tbody", "tfoot"))
        elif tag in ("td", "th"):
            self._close_to(("td", "th"), ("tr", "table"))
        elif tag in ("thead", "tbody", "tfoot"):
            self._close_to(("thead", "tbody", "tfoot"), ("table",))
        elif tag == "option":
            self._close_to(("option",), ("select", "datalist", "optgroup"))

    def _close_to(self, targets: tuple[str, ...], stops: tuple[str, ...]) -> None:
        for depth in range(1, min(len(self.stack), _IMPLIED_SCAN + 1)):
            tag = self.stack[-depth].tag
            if tag in targets:
                for _ in range(depth):
                    self._pop()
                return
            if tag in stops:
                return

    def finish(self) -> None:
        while len(self.stack) > 1:
            tag = self.stack[-1].tag
            if tag not in OPTIONAL_END:
                self.unclosed[tag] = self.unclosed.get(tag, 0) + 1
            self._pop()


class LinkTracker:
    """Open ``<a href>`` elements and the text seen inside them."""

    def __init__(self) -> None:
        self.open: list[tuple[El, str, int, list[str], Any]] = []
        self.done: list[tuple[str, str, int, Any]] = []

    def enter(self, el: El, source: Any = None) -> None:
        href = el.attrs.get("href", "").strip()
        if href:
            self.open.append((el, href, el.line, [], source))

    def text(self, s: str) -> None:
        # Nested links are invalid HTML; bound the work on hostile nesting.
        for entry in self.open[-_LINK_NEST:]:
            entry[3].append(s)

    def exit(self, el: El) -> None:
        if self.open and self.open[-1][0] is el:
            _, href, line, parts, source = self.open.pop()
            self.done.append((href, _squash("".join(parts)), line, source))

    def close_all(self) -> None:
        while self.open:
            self.exit(self.open[-1][0])


@dataclass
class Gathered:
    text: str
    links: list[tuple[str, str, int, Any]]
    images: list[El]
    ids: list[str]


def gather(el: El, *, raw: bool = False, heading: bool = False) -> Gathered:
    """Text of a subtree (iteratively), plus the links, images and ids in it.

    ``raw`` keeps whitespace (``<pre>``); otherwise block elements and
    ``<br>`` separate words. In headings, permalink anchors (``<a
    class="headerlink" href="#…">¶</a>``) are left out.
    """
    parts: list[str] = []
    links = LinkTracker()
    images: list[El] = []
    ids: list[str] = []
    work: list[tuple[bool, Any]] = [(False, c) for c in reversed(el.children)]
    while work:
        exiting, node = work.pop()
        if exiting:
            if node.tag == "a":
                links.exit(node)
            elif not raw and node.tag in BLOCK:
                parts.append(" ")
            continue
        if isinstance(node, Txt):
            parts.append(node.text)
            links.text(node.text)
            continue
        tag = node.tag
        if tag in SKIP:
            continue
        if tag == "br":
            parts.append("\n" if raw else " ")
            continue
        if tag == "img":
            images.append(node)
            continue
        for key in ("id", "name"):
            value = node.attrs.get(key, "").strip()
            if value and (key == "id" or tag == "a"):
                ids.append(value)
        if tag == "a":
            href = node.attrs.get("href", "").strip()
            classes = node.attrs.get("class", "").split()
            if heading and href.startswith("#") and (
                    {"headerlink", "anchor", "heading-anchor", "permalink"} & set(classes)):
                continue
            links.enter(node)
        elif not raw and tag in BLOCK:
            parts.append(" ")
        work.append((True, node))
        work.extend((False, c) for c in reversed(node.children))
    links.close_all()
    return Gathered("".join(parts), links.done, images, ids)


def holds_list(el: El) -> bool:
    work = list(reversed(el.children))
    seen = 0
    while work and seen < _LI_SCAN:
        node = work.pop()
        seen += 1
        if isinstance(node, Txt) or node.tag in SKIP:
            continue
        if node.tag in LISTS:
            return True
        if node.tag == "li":  # an unclosed sibling item, not a nested list
            continue
        work.extend(reversed(node.children))
    return False

def own_text(el: El) -> str:
    """The item's own words: its text outside nested lists (bounded)."""
    parts: list[str] = []
    size = 0
    work = list(reversed(el.children))
    seen = 0
    while work and seen < _LI_SCAN and size < 4 * SHORT_TITLE:
        node = work.pop()
        seen += 1
        if isinstance(node, Txt):
            parts.append(node.text)
            size += len(node.text)
            continue
        if node.tag in SKIP or node.tag in LISTS or node.tag == "li":
            continue
        if node.tag in BLOCK:
            parts.append(" ")
        work.extend(reversed(node.children))
    return _squash("".join(parts))
