"""Fallback parser: any readable file becomes a file node (chunked later).

Used for formats without a dedicated parser and when a parser fails, so a file
is never dropped for want of structure.
"""

from __future__ import annotations

import posixpath

from strata.stages.parse.model import Draft, ParsedFile


def parse_plain_text(text: str, path: str, note: str | None = None) -> ParsedFile:
    lines = text.splitlines()
    root = Draft(kind="file", subkind="text", title=posixpath.basename(path), text=text,
                 start_line=1, end_line=max(1, len(lines)))
    return ParsedFile(root=root, notes=[note] if note else [])
