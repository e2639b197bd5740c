"""Python source → a tree of drafts (module, classes, functions) plus imports.

Uses the stdlib :mod:`ast` only, so the parse matches what the interpreter
itself accepts. Each definition becomes a ``code`` draft whose text is its own
source with the bodies of its code children cut out and replaced by a one-line
placeholder: every line of a file then lives in exactly one node, while a
parent still shows the shape of what it contains.

The tree is built with an explicit work stack (no recursion over the AST), and
nesting is bounded (see :func:`_promotes`), so pathological files can neither
hit the recursion limit here nor produce trees too deep for later stages.
Files that do not parse are indexed as plain text with a note, never raised.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import PurePosixPath
from collections.abc import Iterable

from strata.stages.parse.model import Draft, ParsedFile, Reference

PYTHON_SUFFIXES = (".py", ".pyi")
INIT_FILES = ("__init__.py", "__init__.pyi")

# Code nodes below this many levels under the file are not split out; they stay
# in their parent's text. Real code never gets near it; it guards generated or
# hostile input against trees that recursive consumers cannot walk.
MAX_DEPTH = 24

# Errors ast.parse raises for input it cannot turn into a tree. ValueError is
# the pre-3.12 null-byte error; RecursionError / MemoryError are "too complex".
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)

_DEF_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IMPORT_TYPES = (ast.Import, ast.ImportFrom)
# Nodes that can hold statements without opening a new scope (if/try/with
# bodies, except handlers, match cases).
_BLOCK_TYPES = (ast.stmt, ast.excepthandler, ast.match_case)


# --------------------------------------------------------------------------
# Module names


def module_names(paths: Iterable[str]) -> dict[str, tuple[str, bool]]:
    """Map each .py/.pyi path (POSIX, relative to the corpus root) to (dotted module name, is_package).

    The name follows the package layout the way the import system would see it
    with the top-most package's parent on ``sys.path``: walk up while the
    directory has an ``__init__.py`` (looked up in ``paths``, never on disk,
    so this works on any listing). A file outside any package is named by its
    stem, which is also what a stdlib-like root (``os.py`` → ``os``) needs.
    """
    paths = list(paths)
    known = {str(PurePosixPath(p)) for p in paths}
    names: dict[str, tuple[str, bool]] = {}
    for p in paths:
        pure = PurePosixPath(p)
        if pure.suffix in PYTHON_SUFFIXES:
            names[p] = _module_name(pure, known)
    return names


def _module_name(path: PurePosixPath, known: set[str]) -> tuple[str, bool]:
    """Dotted name of one file given the set of all known paths.

    An ``__init__`` directly at the corpus root belongs to a package whose
    name we cannot know; it is named ``__init__`` and treated as a plain
    module, so its relative imports resolve to the same names its sibling
    modules get (``from .api import x`` → ``api``).
    """
    package_parts: list[str] = []
    directory = path.parent
    while _has_init(directory, known):
        if directory.name:
            package_parts.append(directory.name)
        if directory == directory.parent:
            break
        directory = directory.parent
    package_parts.reverse()
    if path.stem == "__init__":
        if package_parts:
            return ".".join(package_parts), True
        return "__init__", False
    return ".".join(package_parts + [path.stem]), False


def _has_init(directory: PurePosixPath, known: set[str]) -> bool:
    return any(str(directory / init) in known for init in INIT_FILES)


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> tuple[str, bool]:
    """Absolute target of ``from <level dots><name> import ...`` in ``module``.

    Returns ``(target, resolvable)``. Level 1 is the containing package (the
    module itself for an ``__init__``). Going above the top package cannot be
    resolved; the target is then the best guess that is left (what remains of
    the package plus ``name``, or the raw dots when nothing remains).
    """
    if level == 0:
        return name or "", True
    package = module if is_package else module.rpartition(".")[0]
    parts = package.split(".") if package else []
    up = level - 1
    resolvable = up < len(parts)
    base = parts[: len(parts) - up] if resolvable else []
    target = ".".join(base + ([name] if name else []))
    return (target or "." * level), resolvable


# --------------------------------------------------------------------------
# Parsing


@dataclass
class _Scope:
    """A definition (or the module) whose body still has to be processed."""

    node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    draft: Draft
    qualname: str  # "" for the module
    kind: str  # module | class | function
    fn_depth: int  # enclosing function scopes, this one included
    depth: int  # draft levels below the file draft
    start: int
    end: int


def parse_python(text: str, path: str, module: str, is_package: bool = False) -> ParsedFile:
    """Parse one Python file into a module draft with code children and import references.

    ``module`` / ``is_package`` come from :func:`module_names`; they give the
    node paths (``module.Qual.name``) and anchor relative imports.
    """
    source = text.replace("\r\n", "\n").replace("\r", "\n")  # as the tokenizer sees it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes etc.
            tree = ast.parse(source, filename=path)
    except _PARSE_ERRORS as exc:
        return _text_fallback(text, module, exc, source)
    return _TreeBuilder(source, module, is_package).build(tree)


def _text_fallback(text: str, module: str, exc: BaseException, source: str) -> ParsedFile:
    """Index an unparseable file as one plain-text node so it is still searchable."""
    line = _error_line(exc, source)
    msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    root = Draft(
        kind="file", subkind="text", language="python", title=module, slug=module,
        node_path=module, text=text, start_line=1, end_line=_line_count(source),
        attrs={"docstring": ""},
    )
    where = str(line) if line is not None else "?"
    return ParsedFile(root=root, notes=[f"python syntax error at line {where}: {msg}; indexed as plain text"])


def _error_line(exc: BaseException, source: str) -> int | None:
    """Line of a parse error; null-byte errors carry none, so locate the byte."""
    line = getattr(exc, "lineno", None)
    if line is None and "\0" in source:
        line = source.count("\n", 0, source.index("\0")) + 1
    return line


def _line_count(source: str) -> int:
    """Number of lines as editors count them (a trailing newline ends a line, it does not add one)."""
    count = source.count("\n") + (0 if source.endswith("\n") else 1)
    return max(count, 1)


class _TreeBuilder:
    """Turns one parsed module into drafts and references."""

    def __init__(self, source: str, module: str, is_package: bool):
        self.source = source
        self.lines = source.split("\n")
        self.module = module
        self.is_package = is_package
        self.references: list[Reference] = []

    def build(self, tree: ast.Module) -> ParsedFile:
        docstring = ast.get_docstring(tree) or ""
        root = Draft(
            kind="file", subkind="python", language="python", title=self.module,
            slug=self.module, node_path=self.module, text="", start_line=1,
            end_line=_line_count(self.source),
            attrs={"docstring": docstring, "is_package": self.is_package},
        )
        work = [_Scope(tree, root, "", "module", 0, 0, 1, len(self.lines))]
        while work:
            work.extend(self._process(work.pop()))
        if not root.text.strip():
            root.text = self.module
        self.references.sort(key=lambda r: r.attrs["line"])
        return ParsedFile(root=root, references=self.references)

    def _process(self, scope: _Scope) -> list[_Scope]:
        """Split out a scope's definitions, record its imports and set its text.

        Returns the child scopes still to process (the caller's work stack).
        """
        defs, imports = _scan_block(scope.node.body)
        children: list[_Scope] = []
        placeholders: list[tuple[int, int, list[str]]] = []
        seen: dict[str, int] = {}
        for node in defs:
            if not _promotes(scope):
                # Kept inline in this scope's text, so its imports belong here too.
                imports.extend(n for n in ast.walk(node) if isinstance(n, _IMPORT_TYPES))
                continue
            child = self._child_scope(scope, node, seen)
            scope.draft.add(child.draft)
            children.append(child)
            placeholders.append((child.start, child.end, self._placeholder(node, child.draft)))
        for node in imports:
            self.references.extend(self._import_refs(scope.draft, node))
        scope.draft.text = _render(self.lines, scope.start, scope.end, placeholders)
        return children

    def _child_scope(self, parent: _Scope, node: ast.AST, seen: dict[str, int]) -> _Scope:
        """Draft for one definition; repeated names in a scope get ``-1``, ``-2`` slugs."""
        count = seen.get(node.name, 0)
        seen[node.name] = count + 1
        slug = node.name if count == 0 else f"{node.name}-{count}"
        qualname = f"{parent.qualname}.{node.name}" if parent.qualname else node.name
        is_class = isinstance(node, ast.ClassDef)
        if is_class:
            subkind = "class"
        else:
            subkind = "method" if parent.kind == "class" else "function"
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        attrs = {
            "docstring": ast.get_docstring(node) or "",
            "decorators": [_unparse(d) for d in node.decorator_list],
            "signature": _signature(node),
        }
        if is_class:
            attrs["bases"] = [_unparse(b) for b in node.bases]
        else:
            attrs["async"] = isinstance(node, ast.AsyncFunctionDef)
        draft = Draft(
            kind="code", subkind=subkind, language="python", title=qualname, slug=slug,
            node_path=f"{parent.draft.node_path}.{slug}", text="",
            start_line=start, end_line=node.end_lineno, attrs=attrs,
        )
        return _Scope(
            node=node, draft=draft, qualname=qualname,
            kind="class" if is_class else "function",
            fn_depth=parent.fn_depth + (0 if is_class else 1),
            depth=parent.depth + 1, start=start, end=node.end_lineno,
        )

    def _placeholder(self, node: ast.AST, draft: Draft) -> list[str]:
        """Stand-in lines for a child cut out of its parent: decorators plus ``<signature>: ...``."""
        header = self.lines[node.lineno - 1]
        indent = header[: len(header) - len(header.lstrip())]
        decorators = [f"{indent}@{d}" for d in draft.attrs["decorators"]]
        return decorators + [f"{indent}{draft.attrs['signature']}: ..."]

    def _import_refs(self, source: Draft, node: ast.Import | ast.ImportFrom) -> list[Reference]:
        """One reference per imported module, targets made absolute."""
        if isinstance(node, ast.Import):
            return [
                _import_ref(source, alias.name, [], node.lineno, 0, {alias.name: alias.asname} if alias.asname else {})
                for alias in node.names
            ]
        target, resolvable = resolve_relative(self.module, self.is_package, node.level, node.module)
        names = [alias.name for alias in node.names]
        aliases = {alias.name: alias.asname for alias in node.names if alias.asname}
        ref = _import_ref(source, target, names, node.lineno, node.level, aliases)
        if not resolvable:
            ref.attrs["unresolvable"] = True
        return [ref]


def _import_ref(source: Draft, target: str, names: list[str], line: int, level: int,
                aliases: dict[str, str]) -> Reference:
    attrs = {"names": names, "line": line, "level": level}
    if aliases:
        attrs["aliases"] = aliases
    return Reference(source=source, target=target, type="import", relation="imports", attrs=attrs)


def _promotes(scope: _Scope) -> bool:
    """Whether definitions in this scope become their own drafts.

    Everything in modules and classes does; inside functions only one level of
    nested functions does (closures of closures stay in their parent's text).
    """
    if scope.depth >= MAX_DEPTH:
        return False
    return scope.kind != "function" or scope.fn_depth <= 1


def _scan_block(body: list[ast.stmt]) -> tuple[list[ast.AST], list[ast.AST]]:
    """Definitions and imports of one scope, in source order.

    Looks through if/try/with/for/match blocks (``if TYPE_CHECKING:``, ``try:
    import x except ImportError: def x(...)``) but not into definitions, which
    are scopes of their own.
    """
    defs: list[ast.AST] = []
    imports: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, _DEF_TYPES):
            defs.append(node)
        elif isinstance(node, _IMPORT_TYPES):
            imports.append(node)
        else:
            blocks = [c for c in ast.iter_child_nodes(node) if isinstance(c, _BLOCK_TYPES)]
            stack.extend(reversed(blocks))
    return defs, imports


def _render(lines: list[str], start: int, end: int, cuts: list[tuple[int, int, list[str]]]) -> str:
    """Lines ``start..end`` (1-based, inclusive) with each cut range replaced by its stand-in."""
    out: list[str] = []
    current = start
    for cut_start, cut_end, replacement in sorted(cuts, key=lambda c: c[0]):
        out.extend(lines[current - 1 : cut_start - 1])
        out.extend(replacement)
        current = cut_end + 1
    out.extend(lines[current - 1 : end])
    return "\n".join(out)


def _signature(node: ast.AST) -> str:
    type_params = getattr(node, "type_params", None)  # PEP 695, Python 3.12+
    generic = f"[{', '.join(_unparse(t) for t in type_params)}]" if type_params else ""
    if isinstance(node, ast.ClassDef):
        parts = [_unparse(b) for b in node.bases]
        parts += [f"{k.arg}={_unparse(k.value)}" if k.arg else f"**{_unparse(k.value)}" for k in node.keywords]
        return f"class {node.name}{generic}({', '.join(parts)})" if parts else f"class {node.name}{generic}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {_unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}{generic}({_unparse(node.args)}){returns}"


def _unparse(node: ast.AST) -> str:
    """Source of an expression on one line; ``...`` if it is too deeply nested to unparse."""
    try:
        return ast.unparse(node)
    except RecursionError:
        return "..."
