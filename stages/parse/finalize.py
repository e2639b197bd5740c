"""Turn one parsed file into node and reference rows.

This is where every format meets the one model: ids, depths, breadcrumbs,
node paths, content hashes and chunking are assigned here, the same way for
Markdown, Python and every later parser.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from strata.stages.parse.chunking import split_text
from strata.stages.parse.model import Draft, ParsedFile
from strata.core.config.schema import CHUNK, EMBEDDED_KINDS, FILE, SECTION
from strata.core.config.settings import ChunkingSettings, check

# Bump when a parser's output changes for the same input: it invalidates the
# per-document cache so old parses are not reused.
PARSER_VERSION = "4"  # 4: code on tree-sitter, the shared section builder
# Kinds whose long text is split into chunk children.
CHUNKED_KINDS = (SECTION, FILE)


class ParseSettings(ChunkingSettings):
    """The chunking a parse runs with: :class:`strata.core.config.settings.ChunkingSettings`
    (its fields, defaults and bounds), checked when made, plus the fingerprint that
    keys the per-document parse cache. Values may be given by position in the
    model's field order; one that is out of bounds is a :class:`SettingsError` in
    one line naming the field."""

    def __init__(self, *values: Any, **named: Any) -> None:
        given = {**dict(zip(ChunkingSettings.model_fields, values)), **named}
        check(ChunkingSettings, given)  # SettingsError, one line
        super().__init__(**given)

    def fingerprint(self) -> str:
        return f"p{PARSER_VERSION}-c{self.chunk_tokens}-x{self.context_lines}"


#: the defaults, made once: a default argument below
DEFAULT_SETTINGS = ParseSettings()


def stable_hash(*parts: str, size: int = 16) -> str:
    return hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"),
                           digest_size=size // 2).hexdigest()


def make_node_id(kind: str, corpus: str, path: str, node_path: str) -> str:
    """Ids derive from where a node sits, not from its text: an edited section
    keeps its id (its ``content_hash`` changes), and a rebuild of unchanged
    content reproduces every id."""
    return f"{kind}-{stable_hash(corpus, path, node_path)}"


def _add_chunks(d: Draft, budget: int, lines: list[str]) -> None:
    # Code and config files are structured by their definitions/keys already;
    # only prose (and code that fell back to plain text) is chunked.
    if d.kind not in CHUNKED_KINDS or (d.language and d.subkind != "text"):
        return
    pieces = split_text(d.text, budget)
    if len(pieces) < 2:
        return
    chunks = []
    cursor = (d.start_line or 1) - 1
    stop = d.end_line or len(lines)
    for i, piece in enumerate(pieces, 1):
        start, end = _locate(piece, lines, cursor, stop)
        if end:
            cursor = end
        chunks.append(Draft(kind=CHUNK, title=f"{d.title} (part {i}/{len(pieces)})", text=piece,
                            slug=f"chunk-{i}", subkind="text", start_line=start or d.start_line,
                            end_line=end or d.end_line, page=d.page, language=d.language))
    d.children[:0] = chunks


def _locate(piece: str, lines: list[str], cursor: int, stop: int) -> tuple[int | None, int | None]:
    """1-based line range of a chunk inside the file, searched from ``cursor``."""
    body = [ln.strip() for ln in piece.splitlines() if ln.strip()]
    if not body or not lines:
        return None, None
    first, last = body[0][:60], body[-1][-60:]
    start = end = None
    for i in range(cursor, min(stop, len(lines))):
        if start is None and first in lines[i]:
            start = i + 1
        if start is not None and last in lines[i]:
            end = i + 1
            break
    return start, end


def finalize(parsed: ParsedFile, corpus: str, path: str, source_text: str,
             settings: ParseSettings = DEFAULT_SETTINGS) -> tuple[list[dict], list[dict]]:
    """Rows for ``nodes`` and for the file's unresolved references."""
    lines = source_text.splitlines()
    rows: list[dict[str, Any]] = []
    ids: dict[int, str] = {}
    seen_paths: dict[str, int] = {}
    root = parsed.root
    if not root.node_path:
        root.node_path = path
    # Explicit stack: documents can nest thousands of levels deep.
    stack: list[tuple[Draft, Draft | None, int, int, str]] = [(root, None, 0, 0, path)]
    while stack:
        d, parent, depth, ordinal, crumb = stack.pop()
        _add_chunks(d, settings.chunk_tokens, lines)
        if parent is not None and not d.node_path:
            sep = "#" if parent is root and parent.kind == FILE and parent.subkind != "python" else "/"
            d.node_path = f"{parent.node_path}{sep}{d.slug or d.kind}"
        n = seen_paths.get(d.node_path, 0)
        seen_paths[d.node_path] = n + 1
        if n:
            d.node_path = f"{d.node_path}~{n}"
        nid = make_node_id(d.kind, corpus, path, d.node_path)
        ids[id(d)] = nid
        breadcrumb = path if parent is None else f"{crumb} > {d.title}"
        has_chunks = any(c.kind == CHUNK for c in d.children)
        text = d.text if d.text and d.text.strip() else (d.title or d.slug or path)
        rows.append({
            "node_id": nid, "corpus": corpus, "kind": d.kind, "subkind": d.subkind,
            "path": path, "node_path": d.node_path,
            "parent_id": ids[id(parent)] if parent is not None else None,
            "depth": depth, "ordinal": ordinal, "title": d.title or d.slug or path,
            "breadcrumb": breadcrumb, "text": text,
            "start_line": d.start_line, "end_line": d.end_line, "page": d.page,
            "language": d.language,
            "content_hash": stable_hash(d.title or "", text),
            "embedded": d.kind in EMBEDDED_KINDS and not (d.kind == SECTION and has_chunks),
            "attrs": json.dumps(d.attrs, sort_keys=True, default=str, ensure_ascii=False),
        })
        for i in range(len(d.children) - 1, -1, -1):
            stack.append((d.children[i], d, depth + 1, i, breadcrumb))
    refs = [{
        "src": ids[id(r.source)], "path": path, "target": r.target, "type": r.type,
        "relation": r.relation,
        "attrs": json.dumps(r.attrs, sort_keys=True, default=str, ensure_ascii=False),
    } for r in parsed.references if id(r.source) in ids]
    return rows, refs
