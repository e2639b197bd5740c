"""Line spans of the top-level entries of a JSON or TOML file, for
:mod:`strata.stages.parse.config_files`.

The safe loaders give values, not positions; a config file's ``key`` sections need
the exact lines each top-level key occupies. These are single linear scans that
track nesting and strings (JSON), or tables, keys and multi-line values (TOML),
on text the loader has already accepted. Kept apart from the builder because they
are the lexing half: small state machines with their own edge cases.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["json_top_entries", "toml_segments"]


def json_top_entries(text: str) -> tuple[str | None, list[tuple[str | None, int, int]]]:
    """Line range of each top-level key (object) or item (array) of valid JSON.

    A single linear scan that tracks nesting outside strings; returns the top
    kind (``object``/``array``) and ``(key, start_line, end_line)`` entries.
    """
    n = len(text)
    i = 0
    line = 1
    depth = 0
    top: str | None = None
    expect = False  # at depth 1, the next token starts a new entry
    key_next = False  # ... and, in an object, that token is the key
    entries: list[list[Any]] = []
    cur: list[Any] | None = None
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if depth == 1 and expect and c not in ",]}":
            expect = False
            key_next = top == "object"
            cur = [None, line, line]
            entries.append(cur)
        if c == '"':
            j = i + 1
            while j < n:
                cj = text[j]
                if cj == "\\":
                    j += 2
                    continue
                if cj == '"':
                    break
                if cj == "\n":
                    line += 1
                j += 1
            if key_next and cur is not None:
                key_next = False
                try:
                    cur[0] = json.loads(text[i:j + 1])
                except ValueError:
                    cur[0] = text[i + 1:j]
            if cur is not None and depth >= 1:
                cur[2] = line
            i = j + 1
            continue
        if c in "{[":
            if depth == 0:
                if top is not None:
                    break
                top = "object" if c == "{" else "array"
                depth = 1
                expect = True
                i += 1
                continue
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth <= 0:
                break
        elif c == "," and depth == 1:
            expect = True
            i += 1
            continue
        if cur is not None and depth >= 1:
            cur[2] = line
        i += 1
    return top, [(e[0], e[1], e[2]) for e in entries]


_TOML_BARE = re.compile(r"[A-Za-z0-9_\-]+")


def _toml_first_key(s: str, pos: int) -> tuple[str | None, int]:
    """First segment of a (dotted) TOML key at ``s[pos:]`` and the position
    just after the whole dotted key."""
    first: str | None = None
    n = len(s)
    while True:
        while pos < n and s[pos] in " \t":
            pos += 1
        if pos >= n:
            return first, pos
        c = s[pos]
        if c == '"':
            j = pos + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            raw = s[pos:j + 1]
            try:
                seg = json.loads(raw)
            except ValueError:
                seg = raw.strip('"')
            pos = j + 1
        elif c == "'":
            j = s.find("'", pos + 1)
            j = n if j < 0 else j
            seg = s[pos + 1:j]
            pos = j + 1
        else:
            m = _TOML_BARE.match(s, pos)
            if not m:
                return first, pos
            seg = m.group(0)
            pos = m.end()
        if first is None:
            first = seg
        while pos < n and s[pos] in " \t":
            pos += 1
        if pos < n and s[pos] == ".":
            pos += 1
            continue
        return first, pos


def _toml_scan_value(s: str, pos: int, state: list[Any]) -> None:
    """Advance ``state = [open multi-line delimiter or None, bracket depth]``
    over ``s[pos:]`` (strings and comments are skipped)."""
    n = len(s)
    while pos < n:
        if state[0]:
            j = s.find(state[0], pos)
            if j < 0:
                return
            pos = j + 3
            state[0] = None
            continue
        c = s[pos]
        if c == "#":
            return
        if s.startswith('"""', pos) or s.startswith("'''", pos):
            state[0] = s[pos:pos + 3]
            pos += 3
            continue
        if c == '"':
            j = pos + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            pos = j + 1
            continue
        if c == "'":
            j = s.find("'", pos + 1)
            pos = n if j < 0 else j + 1
            continue
        if c in "[{":
            state[1] += 1
        elif c in "]}":
            state[1] = max(0, state[1] - 1)
        pos += 1


def toml_segments(lines: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Where each top-level TOML key lives: root ``key = …`` lines (with
    multi-line values) and every ``[key…]`` / ``[[key…]]`` table, as 1-based
    inclusive line ranges (table ranges end before the next header)."""
    out: dict[str, list[tuple[int, int]]] = {}
    state: list[Any] = [None, 0]
    table: tuple[str, int] | None = None  # (top key, header line) of the open table
    root_key: tuple[str, int] | None = None  # a root assignment whose value continues
    in_tables = False

    def close_table(end: int) -> None:
        if table is not None:
            out.setdefault(table[0], []).append((table[1], max(table[1], end)))

    for idx, line in enumerate(lines, 1):
        if state[0] or state[1] > 0:
            _toml_scan_value(line, 0, state)
            if root_key is not None and not state[0] and state[1] == 0:
                out.setdefault(root_key[0], []).append((root_key[1], idx))
                root_key = None
            continue
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("["):
            close_table(idx - 1)
            pos = 2 if s.startswith("[[") else 1
            first, _ = _toml_first_key(s, pos)
            table = (first, idx) if first is not None else None
            in_tables = True
            continue
        first, pos = _toml_first_key(s, 0)
        eq = s.find("=", pos)
        if first is None or eq < 0:
            continue
        _toml_scan_value(s, eq + 1, state)
        if not in_tables:
            if state[0] or state[1] > 0:
                root_key = (first, idx)
            else:
                out.setdefault(first, []).append((idx, idx))
    close_table(len(lines))
    if root_key is not None:
        out.setdefault(root_key[0], []).append((root_key[1], len(lines)))
    return out
