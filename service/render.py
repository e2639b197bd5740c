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
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

import nh3

MAX_INPUT_CHARS = 200_000  # longer text is cut before rendering (a node rarely comes near)

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


def sanitize(html: str) -> str:
    """``html`` reduced to the allow-list (see the module docstring)."""
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     url_relative="deny", link_rel="noopener noreferrer nofollow",
                     strip_comments=True, clean_content_tags={"script", "style"})


def markdown_html(text: str | None) -> str:
    """Markdown text as sanitized HTML."""
    text = (text or "")[:MAX_INPUT_CHARS]
    return sanitize(_markdown().render(text))


def node_html(kind: str, text: str | None, language: str | None = None) -> str | None:
    """The HTML of a node's text for the page: Markdown for prose kinds (a
    whole file only when it is not source code), None for code, images and
    entities, which the page shows as code or plain text."""
    if kind not in PROSE_KINDS or (kind == "file" and language):
        return None
    return markdown_html(text)
