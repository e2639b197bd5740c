"""Text that comes from outside Strata, made fit for where it goes next.

Two kinds of text arrive from people Strata does not control: queries (a
terminal, an HTTP body, an MCP request) and the indexed documents themselves.

* A query may not be valid Unicode. A terminal in Latin-1 hands Python
  ``caf\\xe9``, which the command line receives as ``'caf\\udce9'`` (an escaped
  byte); a JSON body may carry a lone surrogate such as ``\\ud800``. Tokenizers
  and encoders refuse both with a ``TypeError``. :func:`clean_query` turns each
  escaped byte into the Latin-1 character it most likely was and any other lone
  surrogate into U+FFFD, so the query is searched instead of failing.
* Indexed text is shown to agents as Markdown. A document can hold a line that
  reads like the output's own structure (``### 2. evil.md > …``, ``- id: …``) or
  a backtick that ends the code span an id is written in. :func:`fenced` puts
  text in a fenced block that its content cannot close, and :func:`code_span`
  puts an id or path in a code span it cannot leave (CommonMark: a fence or a
  span's backtick run longer than any run inside it).
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_BACKTICKS = re.compile("`+")
_NEWLINES = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


def _unescaped(m: re.Match) -> str:
    code = ord(m.group())
    if 0xDCA0 <= code <= 0xDCFF:  # a byte Python escaped on decoding: its Latin-1 letter
        return chr(code - 0xDC00)
    return "\ufffd"


def clean_query(text: str) -> str:
    """``text`` with every lone surrogate replaced (see the module docstring):
    what an encoder, a tokenizer and UTF-8 output all accept. Text without one
    comes back as it is."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_unescaped, text)


def _longest_run(text: str) -> int:
    return max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)


def code_span(text: str | None) -> str:
    """``text`` (an id, a path, a title) as one CommonMark code span on one line:
    delimited by a backtick run longer than any inside it, padded with a space
    where it starts or ends with a backtick, newlines made spaces."""
    text = _NEWLINES.sub(" ", clean_query("" if text is None else str(text)))
    ticks = "`" * (_longest_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def one_line(text: str | None, limit: int | None = None) -> str:
    """``text`` on one line (every run of whitespace, line breaks included, one
    space), cut to ``limit`` characters when given: a title or breadcrumb that
    cannot start a line of its own in Markdown output."""
    flat = " ".join(clean_query("" if text is None else str(text)).split())
    return flat if limit is None else flat[:limit]


def fenced(text: str | None, info: str = "") -> str:
    """``text`` as a fenced code block whose fence (at least three backticks) is
    longer than any backtick run inside it, so no line of the text can close
    it; ``info`` (a language) is written after the opening fence, on one line
    and without backticks."""
    text = clean_query("" if text is None else str(text))
    fence = "`" * max(3, _longest_run(text) + 1)
    info = "".join(one_line(info).split()).replace("`", "")
    return f"{fence}{info}\n{text}\n{fence}"
