"""JSON / YAML / TOML files → :class:`ParsedFile`, plus path literals in code.

A config file becomes one file draft with a ``key`` section per top-level key
(or ``item-N`` per element of a top-level array), each with the exact line
range of that key in the file. String values anywhere in a key that look like
relative file paths become ``jump`` references (relation ``references``) from
that key, so "a script and its config", or a config and the data file it
names, end up connected in the graph. :func:`path_literals` finds the same
kind of strings in source code.

Only safe loaders are used (``yaml.safe_load_all`` semantics: PyYAML's
``SafeLoader``; ``json``; ``tomllib``). Nothing here raises: invalid syntax
gives a file draft with the raw text and a note.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from typing import Any
from collections.abc import Iterator

import yaml

from strata.stages.parse.config_spans import json_top_entries, toml_segments
from strata.stages.parse.common import split_lines
from strata.stages.parse.model import Draft, ParsedFile, Reference

__all__ = ["CONFIG_EXTENSIONS", "PATH_EXTENSIONS", "looks_like_path", "parse_config", "path_literals"]

CONFIG_EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}

#: File extensions that make a string look like a file path.
PATH_EXTENSIONS = frozenset({
    ".py", ".md", ".yaml", ".yml", ".json", ".toml", ".ts", ".js", ".go", ".rs", ".java",
    ".c", ".h", ".cpp", ".html", ".txt", ".csv", ".sql", ".sh", ".cfg", ".ini", ".png", ".jpg",
})

# The root text is the whole file up to this size, else a head of it.
_FULL_TEXT_CHARS = 2000
_HEAD_LINES = 60
_MAX_CHILDREN = 200
_MAX_PATH = 200
# Characters that mark a pattern, a template or a command line, not a path.
_NOT_PATH_CHARS = frozenset('*?{}%<>|$="\'`;,()[]\\')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# One left-to-right scan over both quote styles, so an apostrophe inside a
# double-quoted string never throws the single-quote matching off. Escapes
# are consumed (and such strings rejected later); every branch is bounded.
_STRING = re.compile(r""""((?:[^"\\\n]|\\.){0,200})"|'((?:[^'\\\n]|\\.){0,200})'""")
_NEWLINE = re.compile(r"\r\n|\r|\n")
_YAML_MERGE = "tag:yaml.org,2002:merge"
_YAML_STR = "tag:yaml.org,2002:str"


# --------------------------------------------------------------------------
# path-looking strings


def looks_like_path(value: str, *, require_extension: bool = False) -> bool:
    """A relative file path: contains ``/`` or ends with a known extension
    (only the latter when ``require_extension``), no whitespace, no scheme,
    no glob/template characters, not absolute, shorter than 200 characters."""
    if not isinstance(value, str) or not 0 < len(value) < _MAX_PATH:
        return False
    if value != value.strip() or any(ch.isspace() for ch in value):
        return False
    if "://" in value or _SCHEME.match(value) or value[0] in "/~#@-!":
        return False
    if any(ch in _NOT_PATH_CHARS for ch in value):
        return False
    base = posixpath.basename(value.split("#", 1)[0])
    stem, ext = posixpath.splitext(base)
    has_ext = bool(stem) and ext.lower() in PATH_EXTENSIONS
    if require_extension:
        return has_ext
    if has_ext:
        return True
    # "a/b": a slash between two non-empty names (not "./", "../", "a/")
    parts = value.split("/")
    return len(parts) > 1 and all(p not in ("", ".") for p in parts[-1:]) and any(
        p not in ("", ".", "..") for p in parts)


def path_literals(text: str, language: str | None = None) -> list[tuple[str, int]]:
    """String literals in source code that look like relative file paths.

    Quoted strings on one line (``"…"`` or ``'…'``) whose last component ends
    with a known extension, so ``open("config/defaults.yaml")`` counts and the
    JS import spec ``"./module"`` does not. Each string once, with the
    1-based line of its first occurrence. ``language`` is accepted for future
    per-language rules; the rule is the same for every language today.
    """
    found: list[tuple[str, int]] = []
    seen: set[str] = set()
    try:
        lines = _NEWLINE.split(text if isinstance(text, str) else str(text or ""))
        for n, line in enumerate(lines, 1):
            if '"' not in line and "'" not in line:
                continue
            for m in _STRING.finditer(line):
                value = m.group(1) if m.group(1) is not None else m.group(2)
                if value in seen or not value or "\\" in value:
                    continue
                if looks_like_path(value, require_extension=True):
                    seen.add(value)
                    found.append((value, n))
    except Exception:  # noqa: BLE001 - best effort, never raise
        pass
    return found


# --------------------------------------------------------------------------
# public entry point


def parse_config(text: str, path: str, fmt: str) -> ParsedFile:
    """Parse one JSON/YAML/TOML file; never raises."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        text = "" if text is None else str(text)
        fmt = (fmt or "").lower().lstrip(".")
        fmt = CONFIG_EXTENSIONS.get("." + fmt, fmt)
        return _Builder(text.lstrip("\ufeff"), str(path or ""), fmt).build()
    except Exception as exc:  # noqa: BLE001 - the contract is "never raise"
        return _raw(text, path, fmt, f"config parse failed: {type(exc).__name__}: {exc}")


def _raw(text: Any, path: Any, fmt: Any, note: str) -> ParsedFile:
    content = text if isinstance(text, str) else ""
    lines = split_lines(content)
    name = posixpath.basename(str(path or "").replace("\\", "/")) or "config"
    fmt = str(fmt or "text")
    root = Draft(kind="file", subkind=fmt, title=name, text=content if content.strip() else name,
                 start_line=1, end_line=max(1, len(lines)), language=fmt)
    return ParsedFile(root=root, notes=[note])


def _first_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    return msg[:300]


# --------------------------------------------------------------------------
# builder


class _Builder:
    def __init__(self, text: str, path: str, fmt: str) -> None:
        self.text = text
        self.path = path
        self.fmt = fmt
        self.lines = split_lines(text)
        self.nlines = max(1, len(self.lines))
        self.notes: list[str] = []
        self.references: list[Reference] = []
        self.name = posixpath.basename(path.replace("\\", "/")) or "config"
        self.root = Draft(kind="file", subkind=fmt, title=self.name, text=self._root_text(),
                          start_line=1, end_line=self.nlines, language=fmt)
        self.slugs: set[str] = set()
        self.children = 0
        self.dropped = 0

    def build(self) -> ParsedFile:
        handler = {"json": self._json, "yaml": self._yaml, "toml": self._toml}.get(self.fmt)
        if handler is None:
            self.notes.append(f"unknown config format {self.fmt!r}; kept as text")
            self.root.text = self.text if self.text.strip() else self.name
        else:
            ok = handler()
            if not ok:
                self.root.text = self.text if self.text.strip() else self.name
                self.root.children.clear()
                self.references.clear()
        if self.dropped:
            self.notes.append(f"{self.dropped} more top-level entries not split into sections "
                              f"(limit {_MAX_CHILDREN})")
        return ParsedFile(root=self.root, references=self.references, notes=self.notes)

    def _root_text(self) -> str:
        if len(self.text) < _FULL_TEXT_CHARS:
            return self.text if self.text.strip() else self.name
        head = self.lines[:_HEAD_LINES]
        more = len(self.lines) - len(head)
        out = "\n".join(head)
        if len(out) > 4 * _FULL_TEXT_CHARS:  # a few enormous lines (minified JSON)
            out = out[: 4 * _FULL_TEXT_CHARS] + "…"
        if more > 0:
            out += f"\n…({more} more lines)"
        return out

    def _merge_spans(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Sorted spans, joined where only blank or comment lines separate them."""
        out: list[tuple[int, int]] = []
        for s, e in sorted(spans):
            if out and all(not self.lines[i - 1].strip() or self.lines[i - 1].strip().startswith("#")
                           for i in range(out[-1][1] + 1, s)):
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        return out

    def _invalid(self, exc: BaseException) -> bool:
        self.notes.append(f"invalid {self.fmt}: {_first_line(exc)}")
        return False

    # ---- children -------------------------------------------------------

    def _child(self, name: str, text: str, start: int | None, end: int | None,
               attrs: dict[str, Any] | None = None) -> Draft | None:
        if self.children >= _MAX_CHILDREN:
            self.dropped += 1
            return None
        self.children += 1
        slug = name or "key"
        base, n = slug, 1
        while slug in self.slugs:
            n += 1
            slug = f"{base}-{n}"
        self.slugs.add(slug)
        if start is not None:
            start = max(1, min(start, self.nlines))
            end = max(start, min(end or start, self.nlines))
        return self.root.add(Draft(
            kind="section",
            subkind="key",
            title=name or slug,
            text=text if text.strip() else (name or slug),
            slug=slug,
            start_line=start,
            end_line=end,
            language=self.fmt,
            attrs=attrs or {},
        ))

    def _ref(self, source: Draft | None, target: str, line: int | None) -> None:
        self.references.append(Reference(
            source=source if source is not None else self.root,
            target=target,
            type="jump",
            relation="references",
            attrs={"line": line or (source.start_line if source is not None else 1) or 1, "kind": "path"},
        ))

    def _raw_lines(self, start: int, end: int) -> str:
        return "\n".join(self.lines[start - 1:end])

    def _trim_end(self, start: int, end: int) -> int:
        """Drop trailing blank, comment and document-marker lines of a range."""
        end = min(end, self.nlines)
        while end > start:
            s = self.lines[end - 1].strip() if end - 1 < len(self.lines) else ""
            if s and not s.startswith("#") and s not in ("---", "..."):
                break
            end -= 1
        return max(start, end)

    # ---- JSON -----------------------------------------------------------

    def _json(self) -> bool:
        try:
            data = json.loads(self.text)
        except RecursionError as exc:
            return self._invalid(ValueError(f"nested too deeply ({exc})"))
        except ValueError as exc:
            return self._invalid(exc)
        if not isinstance(data, (dict, list)):
            return True
        kind, entries = json_top_entries(self.text)
        if isinstance(data, dict):
            positions: dict[str, list[tuple[int, int]]] = {}
            if kind == "object":
                for key, start, end in entries:
                    positions.setdefault(key or "", []).append((start, end))
            for key, value in data.items():
                spots = positions.get(key) or []
                start, end = spots.pop(0) if spots else (None, None)
                text = f"{json.dumps(key, ensure_ascii=False)}: " + _json_dump(value)
                draft = self._child(str(key), text, start, end)
                self._refs_in_value(value, draft, start, end, "json")
        else:
            for i, value in enumerate(data, 1):
                start, end = (entries[i - 1][1], entries[i - 1][2]) if kind == "array" and i <= len(entries) \
                    else (None, None)
                draft = self._child(f"item-{i}", _json_dump(value), start, end)
                self._refs_in_value(value, draft, start, end, "json")
        return True

    # ---- TOML -----------------------------------------------------------

    def _toml(self) -> bool:
        try:
            data = tomllib.loads(self.text)
        except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
            return self._invalid(exc)
        segments = toml_segments(self.lines)
        for key, value in data.items():
            spans = self._merge_spans([(s, self._trim_end(s, e)) for s, e in segments.get(key, [])])
            if spans:
                start, end = spans[0][0], spans[-1][1]
                text = "\n".join(self._raw_lines(s, e) for s, e in spans)
            else:
                start = end = None
                text = _json_dump({key: value})
            attrs = {"spans": [list(sp) for sp in spans]} if len(spans) > 1 else None
            draft = self._child(str(key), text, start, end, attrs)
            self._refs_in_value(value, draft, start, end, "toml")
        return True

    # ---- YAML -----------------------------------------------------------

    def _yaml(self) -> bool:
        try:
            docs = list(yaml.compose_all(self.text, Loader=yaml.SafeLoader))
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            return self._invalid(exc)
        multi = len(docs) > 1
        for n, node in enumerate(docs, 1):
            if node is None:
                continue
            prefix = f"doc{n}/" if multi else ""
            # The safe constructor rewrites merge keys (``<<``) in place;
            # keep the pairs as written for keys and line ranges.
            pairs = list(node.value) if isinstance(node, yaml.MappingNode) else []
            try:
                value = _construct(node)
            except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
                return self._invalid(exc)
            if isinstance(node, yaml.MappingNode) and isinstance(value, dict):
                self._yaml_mapping(node, pairs, value, prefix)
            elif isinstance(node, yaml.SequenceNode) and isinstance(value, list):
                for i, item in enumerate(node.value, 1):
                    start, end = self._yaml_range(item, item)
                    text = self._yaml_text(node, start, end, value[i - 1] if i <= len(value) else None)
                    draft = self._child(f"{prefix}item-{i}", text, start, end)
                    self._refs_in_node(item, draft)
            elif multi and value is not None:
                start, end = self._yaml_range(node, node)
                draft = self._child(f"doc{n}", self._raw_lines(start, end), start, end)
                self._refs_in_node(node, draft)
        return True

    def _yaml_mapping(self, node: yaml.MappingNode, pairs: list, value: dict, prefix: str) -> None:
        for k_node, v_node in pairs:
            if k_node.tag == _YAML_MERGE:
                continue
            try:
                key = _construct(k_node)
                item = value.get(key)
            except Exception:  # noqa: BLE001 - unhashable/odd keys: keep the raw key text
                key, item = getattr(k_node, "value", "key"), None
            name = key if isinstance(key, str) else _scalar_text(key)
            start, end = self._yaml_range(k_node, v_node)
            text = self._yaml_text(node, start, end, {key: item} if _hashable(key) else item)
            draft = self._child(prefix + name, text, start, end)
            self._refs_in_node(v_node, draft)

    def _yaml_range(self, first: yaml.Node, last: yaml.Node) -> tuple[int, int]:
        start = first.start_mark.line + 1
        mark = last.end_mark
        end = mark.line if mark.column == 0 and mark.line + 1 > start else mark.line + 1
        return start, self._trim_end(start, max(start, end))

    def _yaml_text(self, parent: yaml.Node, start: int, end: int, value: Any) -> str:
        """Raw lines for block style (keeps the comments, which document
        config files); a compact re-dump when the collection is flow style
        (several keys share one line)."""
        if not getattr(parent, "flow_style", False):
            return self._raw_lines(start, end)
        try:
            return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False,
                                  width=100).rstrip()
        except Exception:  # noqa: BLE001
            return self._raw_lines(start, end)

    def _refs_in_node(self, node: yaml.Node, source: Draft | None) -> None:
        seen: set[int] = set()
        work = [node]
        while work:
            cur = work.pop()
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            if isinstance(cur, yaml.ScalarNode):
                if cur.tag == _YAML_STR and looks_like_path(cur.value):
                    self._ref(source, cur.value, cur.start_mark.line + 1)
            elif isinstance(cur, yaml.SequenceNode):
                work.extend(reversed(cur.value))
            elif isinstance(cur, yaml.MappingNode):
                for _key, v in reversed(cur.value):
                    work.append(v)

    # ---- references in JSON/TOML values ------------------------------------

    def _refs_in_value(self, value: Any, source: Draft | None, start: int | None, end: int | None,
                       fmt: str) -> None:
        cursor = (start or 1) - 1
        stop = end or self.nlines
        for s in _strings(value):
            if not looks_like_path(s):
                continue
            line = None
            needles = [json.dumps(s, ensure_ascii=False)] if fmt == "json" else [f'"{s}"', f"'{s}'"]
            for i in range(cursor, min(stop, len(self.lines))):
                if any(nd in self.lines[i] for nd in needles):
                    line, cursor = i + 1, i
                    break
            self._ref(source, s, line or start)


# --------------------------------------------------------------------------
# helpers


def _json_dump(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return str(value)


def _construct(node: yaml.Node) -> Any:
    """A node's value with PyYAML's *safe* constructor (same as safe_load)."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _strings(value: Any) -> Iterator[str]:
    """Every string value (not keys) in a nested structure, in document
    order; iterative and alias-safe."""
    seen: set[int] = set()
    work = [value]
    while work:
        cur = work.pop()
        if isinstance(cur, str):
            yield cur
        elif isinstance(cur, (dict, list, tuple)):
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            items = list(cur.values()) if isinstance(cur, dict) else list(cur)
            work.extend(reversed(items))
