"""Markdown from the index as HTML the web page can show, safely.

Indexed documents are untrusted: a page in the corpus may carry ``<script>``,
``onerror=`` handlers, ``javascript:`` links or an ``<iframe>``. Two layers
stand between such text and the browser:

1. **markdown-it** (CommonMark, tables and strikethrough) renders with
   ``html=False``: raw HTML in a document is shown as text, never passed on,
   and its link validation drops ``javascript:``, ``vbscript:``, ``file:`` and
   ``data:`` URLs.
2. **nh3** (the Rust ``ammonia`` sanitizer) then keeps only an allow-list of
   tags and attributes, absolute ``http``/``https``/``mailto`` links (a
   document's relative links point at files this service does not serve: they
   become plain text), and adds ``rel="noopener noreferrer"``.

A third layer is the page itself: its Content-Security-Policy allows no
inline script, and it inserts this HTML through a Trusted Types policy that
re-checks the same allow-list (``service/static/app.js``). Images written in
Markdown are shown by their alt text (image nodes have their own results).

Rendering is also bounded, because markdown-it-py is slow on some text: each
punctuation mark or line break may open a link, an emphasis or a block it then
scans for, at several microseconds apiece, so a 200 KB line of ``[a](`` takes
seconds. Only a prefix of a text is parsed as Markdown (at most
``MARKDOWN_MAX_CHARS`` characters holding at most ``MARKDOWN_MAX_MARKUP`` such
marks, which a real document reaches only far past the character cap); the
rest follows, after a note, as escaped plain text. And a node's HTML is
rendered once: :func:`node_html` keeps it in a bounded LRU keyed by a digest
of the text (an index version never changes a node's text, so this is the
cache per version and node, shared by nodes and versions whose text is the
same), so a hit that every request returns costs one rendering, not one per
request.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from html import escape
from itertools import islice

import nh3

MAX_INPUT_CHARS = 200_000  # longer text is cut before rendering (a node rarely comes near)
MARKDOWN_MAX_CHARS = 32_000  # of a text parsed as Markdown; the rest is shown as plain text
MARKDOWN_MAX_MARKUP = 4_000  # punctuation marks and line breaks in that prefix, at most
CACHE_MAX_ENTRIES = 4096  # nodes' HTML kept by node_html ...
CACHE_MAX_CHARS = 32_000_000  # ... and their total length
# what markdown-it parses mark by mark: ASCII punctuation and line breaks
_MARKUP = re.compile(r"[!-/:-@\[-`{-~\n]")

TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "b", "i", "s",
        "del", "code", "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody",
        "tr", "th", "td", "sup", "sub", "kbd", "dl", "dt", "dd", "span"}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"colspan", "rowspan"},
              "td": {"colspan", "rowspan"}}
URL_SCHEMES = {"http", "https", "mailto"}
# kinds whose text is Markdown (or prose that reads the same rendered); code is shown as code
PROSE_KINDS = {"file", "section", "chunk", "table"}


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])

    def image(renderer, tokens, idx, options, env):  # an image in prose: its alt text
        alt = tokens[idx].content or tokens[idx].attrGet("alt") or "image"
        return f"<em>[image: {escape(alt)}]</em>"

    md.add_render_rule("image", image)
    return md


def policy_script() -> str:
    """The allow-list as the web page reads it (``/html-policy.js``, loaded before
    ``app.js``), so the page's own re-check of server HTML and :func:`sanitize`
    are one list: tag names upper-cased as the DOM gives them."""
    policy = {"tags": sorted(t.upper() for t in TAGS),
              "attributes": {t.upper(): sorted(a) for t, a in ATTRIBUTES.items()},
              "schemes": sorted(URL_SCHEMES)}
    return f"window.strataHtmlPolicy = Object.freeze({json.dumps(policy)});\n"


def sanitize(html: str) -> str:
    """``html`` reduced to the allow-list (see the module docstring)."""
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     url_relative="deny", link_rel="noopener noreferrer nofollow",
                     strip_comments=True, clean_content_tags={"script", "style"})


def markdown_end(text: str) -> int:
    """Where the part of ``text`` parsed as Markdown ends: after at most
    ``MARKDOWN_MAX_CHARS`` characters and ``MARKDOWN_MAX_MARKUP`` marks (what
    the parser's work grows with), at a line break when one is in the second
    half of that span, since Markdown's blocks are made of whole lines."""
    end = min(len(text), MARKDOWN_MAX_CHARS)
    mark = next(islice(_MARKUP.finditer(text, 0, end), MARKDOWN_MAX_MARKUP, None), None)
    if mark is not None:
        end = mark.start()
    if end < len(text):
        line = text.rfind("\n", 0, end)
        if line >= end // 2:
            end = line + 1
    return end


def markdown_html(text: str | None) -> str:
    """Markdown text as sanitized HTML: its first part (:func:`markdown_end`)
    rendered, the rest (up to ``MAX_INPUT_CHARS`` in all) as preformatted
    plain text after a note saying so."""
    text = text or ""
    end = markdown_end(text)
    html = _markdown().render(text[:end])
    if end < len(text):
        rest = text[end:MAX_INPUT_CHARS]
        cut = (f", cut at {MAX_INPUT_CHARS:,} characters" if len(text) > MAX_INPUT_CHARS
               else "")
        html += (f"<p><em>[formatting stops here: the remaining {len(text) - end:,} "
                 f"characters follow as plain text{cut}]</em></p><pre>{escape(rest)}</pre>")
    return sanitize(html)


class RenderCache:
    """Rendered HTML by text, least recently used first out, bounded in
    entries and in characters; a text that several threads ask for at once
    is rendered by the first, the others wait for its result."""

    def __init__(self, max_entries: int = CACHE_MAX_ENTRIES, max_chars: int = CACHE_MAX_CHARS):
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._items: OrderedDict[bytes, str] = OrderedDict()
        self._chars = 0
        self._pending: dict[bytes, threading.Event] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, text: str, render: Callable[[str], str]) -> str:
        key = self.key(text)
        while True:
            with self._lock:
                html = self._items.get(key)
                if html is not None:
                    self._items.move_to_end(key)
                    return html
                waiting = self._pending.get(key)
                if waiting is None:
                    done = self._pending[key] = threading.Event()
                    break
            waiting.wait()  # then read it (or, if that rendering failed, render here)
        try:
            html = render(text)
            with self._lock:
                self._items[key] = html
                self._chars += len(html)
                while len(self._items) > 1 and (len(self._items) > self.max_entries
                                                or self._chars > self.max_chars):
                    self._chars -= len(self._items.popitem(last=False)[1])
            return html
        finally:
            with self._lock:
                del self._pending[key]
            done.set()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._items)


_cache = RenderCache()


def node_html(kind: str, text: str | None, language: str | None = None) -> str | None:
    """The HTML of a node's text for the page: Markdown for prose kinds (a
    whole file only when it is not source code), None for code, images and
    entities, which the page shows as code or plain text. Rendered once per
    text (the module's :class:`RenderCache`): search results repeat."""
    if kind not in PROSE_KINDS or (kind == "file" and language):
        return None
    if not text:
        return markdown_html(text)
    return _cache.get(text, markdown_html)
