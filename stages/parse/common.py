"""Helpers several document parsers share."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from strata.stages.parse.model import Draft, ParsedFile

_NEWLINE = re.compile(r"\r\n|\r|\n")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def split_lines(text: str) -> list[str]:
    """Universal-newline split (``\\r\\n``, ``\\r``, ``\\n``); no phantom last line."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def is_external(target: str) -> bool:
    """A link or source with a URL scheme (http:, mailto:, data: …) or protocol-relative."""
    return bool(_SCHEME.match(target)) or target.startswith("//")


def file_stem(path: str) -> str:
    """A file's name without extension: the title of last resort."""
    base = posixpath.basename(path.replace("\\", "/"))
    return posixpath.splitext(base)[0] or base or "document"


def squash(text: str) -> str:
    """Collapse all runs of whitespace to single spaces."""
    return " ".join(text.split())


def unique_slug(slug: str, seen: dict[str, int]) -> str:
    """github-slugger's de-duplication: ``x``, ``x-1``, ``x-2`` …"""
    original = slug
    while slug in seen:
        seen[original] += 1
        slug = f"{original}-{seen[original]}"
    seen[slug] = 0
    return slug


def pipe_table(header: list[str], body: list[list[str]]) -> str:
    """A GitHub pipe table; ``|`` in cells is escaped, short rows are padded."""
    width = max([len(header)] + [len(r) for r in body] + [1])

    def row(cells: list[str]) -> str:
        cells = [c.replace("|", "\\|") for c in cells] + [""] * (width - len(cells))
        return "| " + " | ".join(cells) + " |"

    lines = [row(header), "| " + " | ".join(["---"] * width) + " |"]
    lines.extend(row(r) for r in body)
    return "\n".join(lines)


def parse_or_fallback(builder: Any, text: Any, path: Any, context_lines: Any,
                      subkind: str) -> ParsedFile:
    """``builder(text, path, context_lines).build()`` on the text as ``str``; if it
    fails for any reason, the whole content as one file draft with the failure in
    ``ParsedFile.notes``: the document parsers never raise."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        text = "" if text is None else str(text)
        return builder(text, str(path or ""), max(0, int(context_lines))).build()
    except Exception as exc:  # noqa: BLE001 - the contract is "never raise"
        return fallback_file(text, path, exc, subkind)


def fallback_file(text: Any, path: Any, exc: BaseException, subkind: str) -> ParsedFile:
    """Whole content as one file node, used only when a structured parse failed."""
    try:
        content = text if isinstance(text, str) else str(text)
    except Exception:  # noqa: BLE001
        content = ""
    content = content.lstrip("\ufeff")
    title = file_stem(str(path or ""))
    n_lines = len(content.replace("\r\n", "\n").replace("\r", "\n").split("\n")) if content else 1
    root = Draft(kind="file", subkind=subkind, title=title,
                 text=content if content.strip() else title, start_line=1, end_line=max(1, n_lines))
    return ParsedFile(root=root, notes=[f"{subkind} parse failed: {type(exc).__name__}: {exc}"])
