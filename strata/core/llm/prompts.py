"""What a prompt is made of, independent of any backend: the ``<data>`` quoting
every stage's prompt goes through, an image's MIME type, a request's text as one
string (what a ``str -> str`` callable is given) and a token estimate for servers
that report none."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["quote_data", "image_mime", "prompt_text", "est_tokens"]

# an opening or closing tag of the prompts' <data> delimiter as a model may read it:
# any case, spaces or line breaks around the slash and the name, attributes
_DATA_TAG = re.compile(r"<\s*/?\s*data\b[^>]*>", re.IGNORECASE)


def quote_data(text: str | None) -> str:
    """Document text (a section, a breadcrumb, the words around an image) for the
    inside of a prompt's ``<data>`` block: the one helper every prompt that quotes
    corpus text in such a block goes through, so that no document can close the
    block early (or open a new one) and have what follows read as instructions.

    Models do not read tags the way a parser does: ``</DATA>``, ``</data >`` and
    ``</data\n>`` end the block for them as surely as ``</data>``. So every tag
    of the delimiter, in any case and spacing, keeps its text but loses its
    angle brackets (``&lt;/data&gt;``), which no reading takes for a tag."""
    return _DATA_TAG.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"),
                         text or "")


def image_mime(data: bytes) -> str:
    """MIME type of an image from its magic bytes (PNG when unknown)."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/png"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and p.get("type", "text") == "text")
    return str(content)


def prompt_text(messages: Sequence[dict[str, Any]]) -> str:
    """Text contents joined with blank lines, system messages first."""
    ordered = sorted(messages, key=lambda m: 0 if m.get("role") == "system" else 1)
    return "\n\n".join(t for t in (_content_text(m.get("content")) for m in ordered) if t)


def est_tokens(text: str) -> int:
    """About four characters a token: for answers whose server sends no counts."""
    return (len(text) + 3) // 4
