"""The one registry of code languages: an entry per language, a query file each.

Adding a language = one :class:`Language` entry in :data:`LANGUAGES` plus
``queries/<name>.scm`` (what is a definition, what is an import; see
:mod:`stages.parse.code.engine` for the capture names), and the grammar wheel
in ``pyproject.toml``. The grammars are the ``tree-sitter-<language>`` wheels
from PyPI: compiled parsers that install offline and are loaded here, never
downloaded at run time.
"""

from __future__ import annotations

import importlib
import posixpath
import re
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from collections.abc import Callable

from tree_sitter import Language as TSLanguage, Node, Parser, Query

from strata.stages.parse.code import resolve
from strata.stages.parse.code.engine import CONTAINERS, MODULE_LIKE, text_of

QUERIES = Path(__file__).with_name("queries")
Target = tuple[str, dict[str, Any]]


def dotted_path(path: str) -> str:
    p = posixpath.normpath(path).lstrip("/")
    p = p[: -len(".d.ts")] if p.endswith(".d.ts") else posixpath.splitext(p)[0]
    return p.replace("/", ".")


def by_path(path: str, package: str) -> tuple[str, str, dict]:
    return dotted_path(path), dotted_path(path), {}


def by_package(path: str, package: str) -> tuple[str, str, dict]:
    """Java, Kotlin, Scala: ``a.b`` + file name; the file keeps its extension so it
    never collides with its public class (``a.b.Gauge.java`` holds ``a.b.Gauge``)."""
    if not package:
        return by_path(path, package)
    pkg = package.replace("`", "")
    return f"{pkg}.{posixpath.basename(path)}", pkg, {"package": pkg}


def by_go_package(path: str, package: str) -> tuple[str, str, dict]:
    directory = posixpath.dirname(posixpath.normpath(path).lstrip("/"))
    stem = posixpath.splitext(posixpath.basename(path))[0]
    pkg_path = directory.replace("/", ".") if directory else (package or stem)
    return pkg_path, pkg_path, ({"package": package} if package else {})


def by_rust_module(path: str, package: str) -> tuple[str, str, dict]:
    module = resolve.rust_module_path(path)
    return module, module, {}


def unquote(text: str) -> str:
    return text.strip().strip("\"'`<>").strip()


def regex_target(pattern: str) -> Callable[[Node, str], list[Target]]:
    """An import target read from the captured statement's text by ``pattern`` (group 1)."""
    rx = re.compile(pattern, re.S)

    def targets(node: Node, kind: str) -> list[Target]:
        m = rx.search(" ".join(text_of(node).split()))
        return [(m.group(1).replace("`", "").replace(" ", ""), {})] if m else []
    return targets


def plain_targets(node: Node, kind: str) -> list[Target]:
    return [(unquote(text_of(node)), {})]


def rust_targets(node: Node, kind: str) -> list[Target]:
    """``use a::{b, c::{D, E as F}, self}`` → one path each; a ``super::`` inside an
    inline ``mod`` is rewritten relative to the file (the original in ``written``)."""
    if kind == "mod":
        return [(text_of(node), {})]
    depth, up = 0, node.parent
    while up is not None:
        depth += up.type == "mod_item"
        up = up.parent
    def join(p: str, s: str) -> str:
        return f"{p}::{s}" if p and s else p or s

    out: list[Target] = []
    work = [("", node)]
    while work:
        prefix, n = work.pop()
        if n.type == "scoped_use_list":
            path = n.child_by_field_name("path")
            inner = join(prefix, text_of(path))
            lst = n.child_by_field_name("list")
            work.extend((inner, c) for c in reversed(lst.named_children if lst else []))
        elif n.type == "use_list":
            work.extend((prefix, c) for c in reversed(n.named_children))
        elif n.type == "use_as_clause":
            out.append((join(prefix, text_of(n.child_by_field_name("path"))),
                        {"alias": text_of(n.child_by_field_name("alias"))}))
        elif n.type == "self":
            out.append((prefix or "self", {}))
        else:
            out.append((join(prefix, "".join(text_of(n).split())), {}))
    fixed = []
    for written, attrs in out:
        path = resolve.rust_inline_path(written, depth)
        fixed.append((path, {**attrs, "written": written if path != written else ""}))
    return fixed


def php_targets(node: Node, kind: str) -> list[Target]:
    if kind != "use":  # require/include: `__DIR__ . '/x.php'` → `__DIR__/x.php`
        if node.type == "binary_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if re.fullmatch(r"__DIR__|dirname\s*\(\s*__FILE__\s*\)", text_of(left).strip()):
                rest = unquote(text_of(right))
                return [("__DIR__" + (rest if rest.startswith("/") else "/" + rest), {})]
        return [(unquote(text_of(node)), {})]
    body = " ".join(text_of(node).split())
    body = re.sub(r"^use\s+(?:function\s+|const\s+)?", "", body).rstrip(";").strip()
    prefix, _, group = body.partition("{")
    items = group.rstrip("}").split(",") if group else body.split(",")
    prefix = prefix.strip() if group else ""
    out = []
    for item in items:
        name = re.sub(r"^(?:function|const)\s+", "", item.strip()).split(" as ")[0].strip()
        if name:
            out.append(((prefix + name).lstrip("\\"), {}))
    return out


_VISIBILITY = ("public", "private", "protected", "internal", "fileprivate", "open")


def modifiers(builder: Any, d: Any, start: Node, name: str, signature: str, scope: Any) -> dict:
    """Visibility and friends, by the language's ``visibility`` rule."""
    spec, attrs = builder.spec, {}
    rule = spec.visibility
    words = signature.split(name.rsplit(".", 1)[-1], 1)[0].replace("(", " ").split()
    vis = next((w for w in words if w in _VISIBILITY), "")
    if "receiver" in d.captures:
        attrs["receiver"] = name.split(".")[0]
    if "singleton" in d.captures:
        attrs["singleton"] = True
    if d.node.type in ("lexical_declaration", "variable_declaration"):
        attrs["arrow"] = True
    if rule == "java":
        attrs["visibility"] = vis or ("public" if scope.kind == "interface" else "package")
        if "static" in words:
            attrs["static"] = True
    elif rule == "rust":
        m = re.match(r"pub(?:\s*\([^)]*\))?", signature)
        attrs["visibility"] = m.group().replace(" ", "") if m else "private"
        attrs["exported"] = bool(m) and attrs["visibility"] == "pub"
    elif rule == "go":
        attrs["exported"] = name.rsplit(".", 1)[-1][:1].isupper()
    elif rule == "zig":
        attrs["exported"] = signature.startswith("pub ")
    elif rule == "js":
        attrs["exported"] = start.type == "export_statement"
    elif rule == "labels" and scope.kind in CONTAINERS - MODULE_LIKE:
        attrs["visibility"] = spec.label_default.get(scope.kind, "public")
        sib, steps = start.prev_named_sibling, 0
        while sib is not None and steps < 5000:
            label = text_of(sib).strip().rstrip(":").strip()
            if sib.type in ("access_specifier", "identifier") and label in _VISIBILITY:
                attrs["visibility"] = label
                break
            sib, steps = sib.prev_named_sibling, steps + 1
    elif vis:
        attrs["visibility"] = vis
    if spec.static_is_private and scope.kind == "file":
        attrs["exported"] = "static" not in words
    return attrs


@dataclass(frozen=True)
class Language:
    name: str
    extensions: tuple[str, ...]
    module: str  # the grammar wheel's module
    function: str = "language"  # its function that returns the grammar
    variants: dict[str, str] = field(default_factory=dict)  # extension → another function (".tsx")
    fold: str = " { ... }"  # what stands for a folded child's body after its signature
    naming: Callable[[str, str], tuple[str, str, dict]] = by_path
    namespace_prefix: bool = False  # C#, PHP: namespaces prefix node paths
    wrappers: frozenset[str] = frozenset()  # nodes whose range a definition takes (export …)
    attributes: frozenset[str] = frozenset()  # sibling nodes above a definition that belong to it
    visibility: str = ""  # java | rust | go | js | labels (C++ access labels, Ruby `private`)
    label_default: dict[str, str] = field(default_factory=dict)
    static_is_private: bool = False  # C, C++: `static` top-level definitions are not exported
    import_targets: Callable[[Node, str], list[Target]] = plain_targets
    resolver: Callable[..., str | None] | None = None
    attributes_of: Callable[..., dict] = modifiers

    def grammar(self, ext: str = "") -> tuple[Parser, Query]:
        return _grammar(self.name, self.module, self.variants.get(ext, self.function))


@cache
def _grammar(name: str, module: str, function: str) -> tuple[Parser, Query]:
    with warnings.catch_warnings():  # older grammar wheels hand over an int, not a capsule
        warnings.simplefilter("ignore", DeprecationWarning)
        language = TSLanguage(getattr(importlib.import_module(module), function)())
    query = Query(language, (QUERIES / f"{name}.scm").read_text(encoding="utf-8"))
    return Parser(language), query


_JS = dict(wrappers=frozenset({"export_statement"}), visibility="js", resolver=resolve.js)
_C = dict(static_is_private=True, resolver=resolve.c, import_targets=plain_targets)
_END = " ... end"

LANGUAGES: dict[str, Language] = {lang.name: lang for lang in [
    Language("javascript", (".js", ".mjs", ".cjs", ".jsx"), "tree_sitter_javascript", **_JS),
    Language("typescript", (".ts", ".tsx", ".mts", ".cts"), "tree_sitter_typescript", "language_typescript",
             variants={".tsx": "language_tsx"}, **_JS),
    Language("go", (".go",), "tree_sitter_go", naming=by_go_package, visibility="go", resolver=resolve.go),
    Language("rust", (".rs",), "tree_sitter_rust", naming=by_rust_module, visibility="rust",
             attributes=frozenset({"attribute_item"}), import_targets=rust_targets, resolver=resolve.rust),
    Language("java", (".java",), "tree_sitter_java", naming=by_package, visibility="java",
             import_targets=regex_target(r"import (?:static )?((?:\w+ ?\. ?)*[\w*]+)"), resolver=resolve.java),
    Language("kotlin", (".kt", ".kts"), "tree_sitter_kotlin", naming=by_package,
             import_targets=regex_target(r"import ((?:[\w`]+\.)*[\w`*]+)"), resolver=resolve.kotlin),
    Language("c", (".c", ".h"), "tree_sitter_c", **_C),
    Language("cpp", (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"), "tree_sitter_cpp", visibility="labels",
             label_default={"class": "private", "struct": "public"}, **_C),
    Language("csharp", (".cs",), "tree_sitter_c_sharp", namespace_prefix=True,
             import_targets=regex_target(r"using (?:static )?(?:\w+ ?= ?)?([\w.]+)")),
    Language("ruby", (".rb",), "tree_sitter_ruby", fold=_END, visibility="labels", resolver=resolve.ruby),
    Language("php", (".php",), "tree_sitter_php", "language_php", namespace_prefix=True,
             import_targets=php_targets, resolver=resolve.php),
    Language("swift", (".swift",), "tree_sitter_swift",
             import_targets=regex_target(r"import (?:(?:typealias|struct|class|enum|protocol|let|var|func) )?"
                                         r"([\w.]+)")),
    Language("bash", (".sh", ".bash"), "tree_sitter_bash", resolver=resolve.c),
    Language("lua", (".lua",), "tree_sitter_lua", fold=_END, resolver=resolve.modules(".lua", "/init.lua")),
    Language("scala", (".scala", ".sc"), "tree_sitter_scala", naming=by_package,
             import_targets=regex_target(r"import ((?:[\w`]+\.)*[\w`*]+)"), resolver=resolve.scala),
    Language("elixir", (".ex", ".exs"), "tree_sitter_elixir", fold=" do ... end",
             resolver=resolve.modules(".ex", ".exs", snake=True)),
    Language("haskell", (".hs",), "tree_sitter_haskell", fold=" ...", resolver=resolve.modules(".hs")),
    Language("zig", (".zig",), "tree_sitter_zig", visibility="zig", resolver=resolve.c),
    Language("julia", (".jl",), "tree_sitter_julia", fold=_END, resolver=resolve.c),
    Language("ocaml", (".ml", ".mli"), "tree_sitter_ocaml", "language_ocaml", fold=" ...",
             resolver=resolve.modules(".ml", lower_first=True)),
    Language("sql", (".sql",), "tree_sitter_sql", fold=" ...", wrappers=frozenset({"statement"})),
]}

LANGUAGE_BY_EXTENSION: dict[str, str] = {ext: lang.name for lang in LANGUAGES.values()
                                         for ext in lang.extensions}
