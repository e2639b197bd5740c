"""One engine for every tree-sitter language: parse, query, nest, render.

A language's query (``queries/<name>.scm``) marks what to index with capture
names, and this module turns the captures into drafts the same way for every
language:

* ``@definition.<subkind>`` a definition (``class``, ``struct``, ``enum``,
  ``interface``, ``trait``, ``impl``, ``module``, ``function`` …; a
  ``namespace`` is looked through) and ``@name`` its name. ``@receiver``
  qualifies a Go method (``Ring.Push``), ``@trait`` names the trait of a Rust
  ``impl``, ``@body`` points at the body when the grammar has no ``body``
  field, ``@singleton`` flags a Ruby ``class << self`` method;
* ``@import.<kind>`` an import target (``import``, ``require``, ``use``,
  ``mod``, ``include``); ``@package`` the package of the file.

Definitions nest by their byte ranges: members are kept inside classes and the
like, never inside function bodies (a nested function stays in its parent's
text). A function directly in a class-like container is a ``method``. Each
node's text is its own lines with every child below its first line folded to
``<signature> { ... }`` (``... end`` in ``end`` languages). Nothing here
recurses on the syntax tree, and nesting is capped at :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import posixpath
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tree_sitter import Node, QueryCursor

from strata.stages.parse.model import Draft, ParsedFile, Reference

if TYPE_CHECKING:
    from strata.stages.parse.code.languages import Language

MAX_DEPTH = 24
PARSE_SECONDS = 5.0
MAX_SIGNATURE = 400
CONTAINERS = frozenset({"class", "interface", "struct", "enum", "trait", "impl", "module", "object",
                        "namespace", "union", "protocol", "record"})
MODULE_LIKE = frozenset({"module", "namespace"})
_BODY_TYPES = frozenset({
    "class_body", "block", "function_body", "declaration_list", "statement_block", "compound_statement",
    "field_declaration_list", "enum_body", "interface_body", "protocol_body", "enum_class_body",
    "body_statement", "do_block", "enum_variant_list", "template_body", "block_body"})
_TYPE_NAME = re.compile(r"[A-Za-z_][\w]*")


class ParseBudgetExceeded(Exception):
    """A parse ran past its time budget (see ``Builder._parse_within_budget``)."""


def text_of(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def last_row(node: Node) -> int:
    """0-based row of a node's last character (a node may end at column 0 of the next line)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def base_type(text: str) -> str:
    """``Gauge<'a>`` → ``Gauge``; ``fmt::Display`` → ``Display``; ``*Ring`` → ``Ring``."""
    head = text.split("<", 1)[0].split("[", 1)[0].split("{", 1)[0]
    names = _TYPE_NAME.findall(head.replace("::", ".").rsplit(".", 1)[-1] or head)
    return names[0] if names else text.strip()


def clean_comment(raw: str) -> str:
    out: list[str] = []
    for line in raw.split("\n"):
        s = line.strip()
        for mark in ("/**", "/*!", "/*", "///", "//!", "//", "--[[", "---", "--", "(**", "(*", "#"):
            if s.startswith(mark):
                s = s[len(mark):].lstrip("#|") if mark != "--" else s[2:].lstrip("|")
                break
        for mark in ("*/", "*)", "]]"):
            if s.endswith(mark):
                s = s[: -len(mark)]
        s = s.strip()
        if s.startswith("* ") or s == "*":
            s = s[1:].strip()
        if s.startswith(("=begin", "=end")):
            continue
        out.append(s)
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def is_comment(node: Node) -> bool:
    return "comment" in node.type or node.type == "haddock"


@dataclass
class _Def:
    node: Node
    subkind: str
    captures: dict[str, Node] = field(default_factory=dict)


@dataclass
class _Scope:
    draft: Draft
    kind: str
    end: int  # byte offset
    qual: str  # title prefix for members
    prefix: str  # node_path prefix for members
    depth: int
    namespaced: bool = False
    placeholder: str = ""
    children: list[_Scope] = field(default_factory=list)
    seen: dict = field(default_factory=dict)
    real: _Scope | None = None  # a namespace's enclosing real scope


class Builder:
    def __init__(self, source: str, path: str, spec: Language, ext: str):
        self.source = source
        self.path = path
        self.spec = spec
        self.data = source.encode("utf-8", "surrogatepass")
        self.lines = source.split("\n")
        self.parser, self.query = spec.grammar(ext)
        self.references: list[Reference] = []
        self.notes: list[str] = []

    def parse(self) -> ParsedFile:
        tree = self._parse_within_budget()
        root_node = tree.root_node
        defs: dict[tuple[int, int, str], _Def] = {}
        imports: list[tuple[Node, str]] = []
        package = ""
        cursor = QueryCursor(self.query)
        # One top-level node at a time: matching from the root is quadratic in its
        # number of children when they are error tokens (100k unmatched "{").
        matches = (m for child in root_node.children for m in cursor.matches(child))
        for _, caps in matches:
            one = {name: nodes[0] for name, nodes in caps.items() if nodes}
            for cap, node in one.items():
                if cap.startswith("definition."):
                    key = (node.start_byte, node.end_byte, node.type)
                    if key in defs:
                        defs[key].captures.update(one)
                    else:
                        defs[key] = _Def(node, cap.split(".", 1)[1], dict(one))
                elif cap.startswith("import."):
                    imports.append((node, cap.split(".", 1)[1]))
                elif cap == "package" and not package:
                    package = text_of(node).strip()
        if root_node.has_error:
            self.notes.append(f"{self.spec.name} syntax error near line {first_error(root_node)}; "
                              "definitions around it may be missing")
        root_path, prefix, extra = self.spec.naming(self.path, package)
        name = posixpath.basename(self.path) or self.path
        root_draft = Draft(kind="file", subkind=self.spec.name, language=self.spec.name, title=name,
                           slug=name, node_path=root_path, text="", start_line=1,
                           end_line=line_count(self.source),
                           attrs={"docstring": self._file_docstring(root_node), **extra})
        self.root_draft = root_draft
        root = _Scope(root_draft, "file", len(self.data) + 1, "", prefix, 0)
        self._nest(root, sorted(defs.values(), key=lambda d: (d.node.start_byte, -d.node.end_byte)))
        self._imports(imports)
        self._render(root)
        if not root_draft.text.strip():
            root_draft.text = name
        self.references.sort(key=lambda r: r.attrs["line"])
        return ParsedFile(root=root_draft, references=self.references, notes=self.notes)

    def _parse_within_budget(self):
        """tree-sitter's error recovery is superlinear on some hostile input (50k
        unmatched ``}`` take 10-15 s in the Lua, Julia and Scala grammars): past
        :data:`PARSE_SECONDS` (+1 s per 200 kB) the parse is cancelled and the file
        is indexed as plain text with a note. Real files take milliseconds."""
        data, view = self.data, memoryview(self.data)
        deadline = time.monotonic() + PARSE_SECONDS + len(data) / 200_000
        try:  # only the read-callback form takes a progress callback
            tree = self.parser.parse(lambda offset, _point: view[offset:],
                                     progress_callback=lambda *_: time.monotonic() > deadline)
        except ValueError:
            raise ParseBudgetExceeded(f"tree-sitter gave up after {PARSE_SECONDS:g} s") from None
        # A tree parsed from a callback has no source for Node.text: re-parse from the
        # bytes with it as the old tree (nothing changed, so this takes milliseconds).
        return self.parser.parse(data, old_tree=tree)

    # -- definitions

    def _nest(self, root: _Scope, defs: list[_Def]) -> None:
        stack = [root]
        for d in defs:
            start = d.node.start_byte
            while len(stack) > 1 and stack[-1].end <= start:
                stack.pop()
            parent = stack[-1]
            if parent.kind not in CONTAINERS and parent is not root:
                continue  # inside a function body: stays in its text
            if parent.depth >= MAX_DEPTH:
                continue
            real = parent.real or parent
            name = self._name(d)
            if not name:
                continue
            if d.subkind == "namespace":
                ns = name.replace("\\", ".").replace("::", ".")
                inner = real.prefix
                if self.spec.namespace_prefix:
                    inner = f"{parent.prefix}.{ns}" if parent.namespaced else ns
                if self._body(d) is None:  # file-scoped: `namespace A.B;` names what follows
                    parent.prefix, parent.namespaced = inner, True
                    continue
                stack.append(_Scope(real.draft, "namespace", d.node.end_byte, real.qual, inner,
                                    parent.depth, namespaced=True, real=real))
                continue
            stack.append(self._add(parent, real, d, name))

    def _name(self, d: _Def) -> str:
        caps = d.captures
        name = text_of(caps.get("name")).strip()
        if d.subkind == "impl":
            name = base_type(name)
        elif d.subkind == "function" and ("::" in name or ":" in name or "." in name):
            name = name.replace("::", ".").replace(":", ".")  # Server::stop, Gauge:read, Gauge.new
            d.subkind = "method"
        receiver = caps.get("receiver")
        if receiver is not None and d.subkind != "impl":
            name = f"{base_type(text_of(receiver))}.{name}"
            d.subkind = "method"
        return name

    def _body(self, d: _Def) -> Node | None:
        body = d.captures.get("body") or d.node.child_by_field_name("body")
        if body is None:
            body = next((c for c in reversed(d.node.named_children) if c.type in _BODY_TYPES), None)
        return body

    def _add(self, parent: _Scope, real: _Scope, d: _Def, name: str) -> _Scope:
        spec, node = self.spec, d.node
        outer = node
        while outer.parent is not None and outer.parent.type in spec.wrappers:
            outer = outer.parent
        start = outer
        while (start.prev_named_sibling is not None and start.prev_named_sibling.type in spec.attributes):
            start = start.prev_named_sibling
        subkind, display, member_qual = d.subkind, name, ""
        if subkind == "impl":
            word = "extension" if "extension" in text_of(node)[:200].split("{")[0].split() else "impl"
            trait = d.captures.get("trait")
            display = f"{word} {base_type(text_of(trait)) + ' for ' if trait is not None else ''}{name}"
            member_qual = name
        elif subkind == "function" and real.kind in CONTAINERS - MODULE_LIKE:
            subkind = "method"
        slug_base = display.replace(" ", "-") if subkind == "impl" else name
        key = (parent.prefix, slug_base)
        count = real.seen.get(key, 0)
        real.seen[key] = count + 1
        slug = slug_base if count == 0 else f"{slug_base}-{count}"
        node_path = f"{parent.prefix}.{slug}" if parent.prefix else slug
        title = f"{real.qual}.{display}" if real.qual else display
        body = self._body(d)
        sig_end = body.start_byte if body is not None else min(
            node.end_byte, self.data.find(b"\n", node.start_byte) % (len(self.data) + 1))
        signature = " ".join(self.data[outer.start_byte:sig_end].decode("utf-8", "replace").split())
        if len(signature) > MAX_SIGNATURE:
            signature = signature[: MAX_SIGNATURE - 1] + "…"
        attrs = {"signature": signature, "docstring": self._doc_above(start)}
        attrs.update(spec.attributes_of(self, d, start, name, signature, real))
        draft = Draft(kind="code", subkind=subkind, language=spec.name, title=title, slug=slug,
                      node_path=node_path, text="", start_line=start.start_point[0] + 1,
                      end_line=last_row(node) + 1, attrs=attrs)
        real.draft.add(draft)
        if subkind == "impl":
            qual = f"{real.qual}.{member_qual}" if real.qual else member_qual
        else:
            qual = title
        before = self._before_on_line(start)
        indent = before[: len(before) - len(before.lstrip())]
        scope = _Scope(draft, subkind, node.end_byte, qual, node_path, parent.depth + 1,
                       placeholder=indent + signature + (spec.fold if body is not None
                                                         or draft.end_line > draft.start_line else ""))
        real.children.append(scope)
        return scope

    # -- comments

    def _before_on_line(self, node: Node) -> str:
        """The text on a node's first line before it (columns are bytes, not characters)."""
        line_start = self.data.rfind(b"\n", 0, node.start_byte) + 1
        return self.data[line_start:node.start_byte].decode("utf-8", "replace")

    def _doc_above(self, node: Node) -> str:
        parts: list[str] = []
        limit = node.start_point[0]
        prev = node.prev_sibling
        while prev is not None and is_comment(prev) and len(parts) < 200:
            if limit - last_row(prev) > 1 or self._before_on_line(prev).strip():
                break
            parts.append(text_of(prev))
            limit = prev.start_point[0]
            prev = prev.prev_sibling
        return clean_comment("\n".join(reversed(parts)))

    def _file_docstring(self, root: Node) -> str:
        """The comment block at the very top (after a PHP open tag or a shebang)."""
        first = next((c for c in root.children if c.type not in ("php_tag", "text", "shebang")
                      and not text_of(c).startswith("#!")), None)
        if first is None or not is_comment(first):
            return ""
        parts = [text_of(first)]
        nxt, row = first.next_sibling, last_row(first)
        while nxt is not None and is_comment(nxt) and nxt.start_point[0] - row <= 1 and len(parts) < 200:
            parts.append(text_of(nxt))
            nxt, row = nxt.next_sibling, last_row(nxt)
        return clean_comment("\n".join(parts))

    # -- imports

    def _imports(self, imports: list[tuple[Node, str]]) -> None:
        seen = set()
        for node, kind in imports:
            if (node.start_byte, node.end_byte, kind) in seen:
                continue
            seen.add((node.start_byte, node.end_byte, kind))
            for target, extra in self.spec.import_targets(node, kind):
                if not target:
                    continue
                attrs = {"language": self.spec.name, "line": node.start_point[0] + 1, "kind": kind}
                attrs.update({k: v for k, v in extra.items() if v not in (None, False, "")})
                self.references.append(Reference(source=self.root_draft, target=target, type="import",
                                                 relation="imports", attrs=attrs))

    # -- text

    def _render(self, root: _Scope) -> None:
        work = [root]
        while work:
            scope = work.pop()
            d = scope.draft
            start, end = (1, line_count(self.source)) if scope is root else (d.start_line, d.end_line)
            cuts = [(c.draft.start_line, min(c.draft.end_line, end), c.placeholder) for c in scope.children
                    if scope is root or c.draft.start_line > start]
            d.text = render_lines(self.lines, start, end, cuts)
            work.extend(scope.children)


def first_error(node: Node) -> int:
    """1-based line of the first ERROR or MISSING node (iterative descent)."""
    while True:
        if node.type == "ERROR" or node.is_missing:
            return node.start_point[0] + 1
        nxt = next((c for c in node.children if c.has_error), None)
        if nxt is None:
            return node.start_point[0] + 1
        node = nxt


def line_count(source: str) -> int:
    return max(source.count("\n") + (0 if source.endswith("\n") else 1), 1)


def render_lines(lines: list[str], start: int, end: int, cuts: list[tuple[int, int, str]]) -> str:
    """Lines ``start..end`` (1-based, inclusive) with each cut range replaced by its placeholder."""
    out: list[str] = []
    current = start
    for cut_start, cut_end, replacement in sorted(cuts, key=lambda c: c[0]):
        if cut_start < current:  # overlaps the previous cut (two definitions on one line)
            current = max(current, cut_end + 1)
            continue
        out.extend(lines[current - 1:cut_start - 1])
        out.append(replacement)
        current = cut_end + 1
    out.extend(lines[current - 1:end])
    return "\n".join(out)
